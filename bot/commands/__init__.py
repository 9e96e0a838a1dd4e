"""One module per CLI subcommand: ``add_parser(sub)`` and ``run(args) -> int``.

The CLI imports every command module at start to build its parser, so a command imports the
stages it drives (pipeline, engine, loop, knowledge) inside ``run``: ``setupbot --help`` and the
light commands stay fast. This is the one place where the project's own modules are imported
inside functions by design (docs/architecture.md).
"""
