"""Source imports, read with ``ast``: top-level module names, whether an import is optional
(try/except ImportError, TYPE_CHECKING, pytest.importorskip) and whether it is in tests.
Also the names the repository itself provides (local modules), so they are never mistaken
for distributions."""

from __future__ import annotations

import ast
import posixpath
import re
import sys

from bot.evidence.files import RepoFiles
from bot.evidence.model import Evidence, ImportUse, Source

SKIP_TOP = {
    "docs",
    "doc",
    "examples",
    "example",
    "benchmarks",
    "benchmark",
    "bench",
    "asv_bench",
    "tools",
    "scripts",
    "script",
    "contrib",
    "sandbox",
    "notebooks",
    "website",
    "site",
    "vendor",
    "_vendor",
    "third_party",
    "thirdparty",
    "extern",
    "external",
    "demo",
    "demos",
    "migrations",
    "tutorials",
    "tutorial",
    "misc",
    "dev",
    "ci",
    ".github",
    "release",
    "utils",
}
# top-level names shared by many distributions: the distribution follows from the submodule
NAMESPACE_ROOTS = {
    "backports",
    "google",
    "zope",
    "jaraco",
    "ruamel",
    "azure",
    "sphinxcontrib",
    "flufl",
    "zc",
    "plone",
    "oslo",
    "mpl_toolkits",
    "paste",
    "repoze",
    "pyobjc",
    "opentelemetry",
    "ckan",
}
# fixture trees and test data are inputs to the tests, not code the tests import
DATA_DIRS = {"fixtures", "testdata", "test_data", "data", "resources", "snapshots", "cassettes", "golden"}
MAX_PY_FILES = 4000
MAX_SYNTAX_WARNINGS = 10
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def in_tests(rel: str) -> bool:
    parts = rel.split("/")
    name = parts[-1]
    return (
        any(p in ("tests", "test", "testing", "unittests", "unit_tests", "integration_tests") for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def local_modules(files: RepoFiles, py_files: list[str]) -> set[str]:
    """Top-level names importable from some directory of the repository: packages whose parent is
    not a package, and modules in non-package directories (scripts, tests helpers, src/)."""
    dirs_with_init = {posixpath.dirname(f) for f in py_files if f.endswith("/__init__.py") or f == "__init__.py"}
    names: set[str] = set()
    for d in dirs_with_init:
        parent = posixpath.dirname(d)
        if d and parent not in dirs_with_init:
            names.add(posixpath.basename(d))
    for f in py_files:
        parent = posixpath.dirname(f)
        if parent not in dirs_with_init:
            names.add(posixpath.basename(f)[:-3])
    # namespace packages: a directory of .py files directly under the root or src/
    for f in py_files:
        parts = f.split("/")
        if len(parts) >= 2 and parts[0] not in SKIP_TOP and not in_tests(f):
            names.add(parts[0] if parts[0] != "src" else (parts[1] if len(parts) > 2 else parts[0]))
    for f in files.all_files():
        if f.endswith((".so", ".pyd", ".pyx")) and "/" not in f.strip("/").split("/", 1)[-1]:
            names.add(posixpath.basename(f).split(".")[0])
        if f.endswith(".pyx"):
            names.add(posixpath.basename(f).split(".")[0])
    return {n for n in names if n.isidentifier()}


class _Visitor(ast.NodeVisitor):
    def __init__(self, rel: str, tests: bool, out: list[ImportUse]):
        self.rel, self.tests, self.out = rel, tests, out
        self.optional_depth = 0
        self.func_depth = 0

    def _add(self, module: str, line: int) -> None:
        top = module.split(".")[0]
        if top and top != "__future__":
            self.out.append(
                ImportUse(
                    top,
                    Source(self.rel, line, module),
                    optional=self.optional_depth > 0,
                    in_tests=self.tests,
                    lazy=self.func_depth > 0,
                    full=module,
                )
            )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            if "." not in node.module and node.module in NAMESPACE_ROOTS and node.names:
                # from backports import zoneinfo: the distribution is named after the submodule
                for alias in node.names:
                    self._add(f"{node.module}.{alias.name}", node.lineno)
            else:
                self._add(node.module, node.lineno)

    def visit_Try(self, node: ast.Try) -> None:
        catches = False
        for h in node.handlers:
            if h.type is None:
                catches = True
            for n in ast.walk(h.type) if h.type is not None else []:
                if (
                    isinstance(n, ast.Name)
                    and n.id in _IMPORT_ERRORS
                    or isinstance(n, ast.Attribute)
                    and n.attr in _IMPORT_ERRORS
                ):
                    catches = True
        if catches:
            self.optional_depth += 1
        for stmt in node.body:
            self.visit(stmt)
        # a fallback import in the handler (try: import zoneinfo / except ImportError: from
        # backports import zoneinfo) is optional too
        for handler in node.handlers:
            self.visit(handler)
        if catches:
            self.optional_depth -= 1
        for part in (node.orelse, node.finalbody):
            for stmt in part:
                self.visit(stmt)

    visit_TryStar = visit_Try  # type: ignore[assignment]  # same fields as Try

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test) if hasattr(ast, "unparse") else ""
        guarded = (
            "TYPE_CHECKING" in test
            or "sys.version_info" in test
            or "sys.platform" in test
            or "platform.system" in test
            or "os.name" in test
        )
        if guarded:
            self.optional_depth += 1
        self.generic_visit(node)
        if guarded:
            self.optional_depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.func_depth += 1
        self.generic_visit(node)
        self.func_depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]  # same fields

    def visit_Call(self, node: ast.Call) -> None:
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        if (
            name in ("importorskip",)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            self.out.append(
                ImportUse(
                    node.args[0].value.split(".")[0],
                    Source(self.rel, node.lineno, "importorskip"),
                    optional=True,
                    in_tests=self.tests,
                    lazy=True,
                )
            )
        self.generic_visit(node)


def scan(files: RepoFiles, ev: Evidence) -> None:
    py_files = [f for f in files.all_files() if f.endswith(".py")]
    ev.local_modules |= local_modules(files, py_files)
    ev.root_modules |= {
        f[:-3] if "/" not in f else f.split("/")[0]
        for f in py_files
        if ("/" not in f and f != "setup.py") or (f.count("/") == 1 and f.endswith("/__init__.py"))
    } - {"__init__"}
    scanned = [
        f for f in py_files if f.split("/")[0] not in SKIP_TOP and not any(p in DATA_DIRS for p in f.split("/")[:-1])
    ]
    if len(scanned) > MAX_PY_FILES:
        ev.warn(".", None, f"{len(scanned)} Python files; imports read from the first {MAX_PY_FILES}")
        scanned = scanned[:MAX_PY_FILES]
    syntax_errors = 0
    for rel in scanned:
        text = files.read_text(rel)
        if text is None:
            continue
        try:
            tree = ast.parse(text, rel)
        except (SyntaxError, ValueError) as exc:
            syntax_errors += 1
            if syntax_errors <= MAX_SYNTAX_WARNINGS:
                ev.warn(rel, getattr(exc, "lineno", None), "not valid Python 3 syntax; imports not read")
            continue
        _Visitor(rel, in_tests(rel), ev.imports).visit(tree)
    if syntax_errors > MAX_SYNTAX_WARNINGS:
        ev.warn(".", None, f"{syntax_errors - MAX_SYNTAX_WARNINGS} more files with syntax errors")
    ev.local_modules |= nested_local_modules(py_files, ev.imports)
    refused: set[str] = set()
    for use in sibling_test_imports(py_files, ev.imports):
        ev.local_modules.add(use.module)
        folder = posixpath.dirname(use.source.file)
        if folder in ev.test_paths or folder in refused:
            continue
        if not _PLAIN_FOLDER.fullmatch(folder):
            # the path goes into an ENV value: a name that ':' would split, or '$' expand, stays out
            refused.add(folder)
            continue
        # on PYTHONPATH a folder's modules come before the standard library's: one named like
        # a standard module (tests/logging.py) would replace it for every program in the image
        stems = [posixpath.basename(f)[:-3] for f in py_files if posixpath.dirname(f) == folder]
        shadows = sorted(stem for stem in stems if is_stdlib(stem))
        if shadows:
            refused.add(folder)
            ev.warn(
                folder,
                None,
                f"not put on PYTHONPATH for its tests' bare imports: it holds {', '.join(shadows)}, "
                "named like the standard library",
            )
        else:
            ev.test_paths[folder] = use.source


_PLAIN_FOLDER = re.compile(r"[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)*")


def sibling_test_imports(py_files: list[str], imports: list[ImportUse]) -> list[ImportUse]:
    """A test module in a package folder that imports a module beside it by its bare name
    (``from utils import Timer`` in tests/bench.py, with tests/__init__.py and tests/utils.py).
    No distribution of that name is meant: guessing one installed the index's unrelated
    ``utils``, which then shadowed the folder's. pytest puts the first folder above without
    __init__.py on sys.path, not this one, so the folder goes on the path. (In a folder that is
    not a package the module is already local, and pytest puts the folder on sys.path; outside
    the tests a bare import in a package means a top-level module, as Python 3 reads it.)"""
    packages = {f[: -len("/__init__.py")] for f in py_files if f.endswith("/__init__.py")}
    modules = {f[:-3] for f in py_files} | packages
    out = []
    for use in imports:
        folder = posixpath.dirname(use.source.file)
        if (
            use.in_tests
            and folder in packages
            and posixpath.join(folder, use.module) in modules
            and use.source.file != posixpath.join(folder, use.module + ".py")
        ):
            out.append(use)
    return out


def nested_local_modules(py_files: list[str], imports: list[ImportUse]) -> set[str]:
    """Top-level import names that the repository holds below its root, imported along a path it
    has (``from src.utils.llm import f`` with ``.../src/utils/llm.py``): code that puts that
    folder on sys.path imports it, so no distribution of that name is meant (guessing one
    installed the unrelated ``src`` from the index)."""
    pairs: set[tuple[str, str]] = set()
    for f in py_files:
        parts = f[:-3].split("/")
        pairs.update(zip(parts, parts[1:], strict=False))
    out: set[str] = set()
    for use in imports:
        comps = (use.full or use.module).split(".")
        if len(comps) >= 2 and (comps[0], comps[1]) in pairs:
            out.add(comps[0])
    return out


STDLIB = frozenset(sys.stdlib_module_names) | {"__main__", "_typeshed", "typing_extensions_stub"}
# modules removed from the standard library: (first version without it, replacement distribution)
REMOVED_STDLIB = {
    "asyncore": ("3.12", "pyasyncore"),
    "asynchat": ("3.12", "pyasynchat"),
    "smtpd": ("3.12", "aiosmtpd"),
    "distutils": ("3.12", "setuptools"),
    "imp": ("3.12", None),
    "aifc": ("3.13", "standard-aifc"),
    "audioop": ("3.13", "audioop-lts"),
    "cgi": ("3.13", "legacy-cgi"),
    "cgitb": ("3.13", "legacy-cgi"),
    "chunk": ("3.13", "standard-chunk"),
    "crypt": ("3.13", "crypt-r"),
    "imghdr": ("3.13", "standard-imghdr"),
    "mailcap": ("3.13", "standard-mailcap"),
    "msilib": ("3.13", None),
    "nis": ("3.13", None),
    "nntplib": ("3.13", "standard-nntplib"),
    "ossaudiodev": ("3.13", None),
    "pipes": ("3.13", "standard-pipes"),
    "sndhdr": ("3.13", "standard-sndhdr"),
    "spwd": ("3.13", None),
    "sunau": ("3.13", "standard-sunau"),
    "telnetlib": ("3.13", "standard-telnetlib"),
    "uu": ("3.13", "standard-uu"),
    "xdrlib": ("3.13", "standard-xdrlib"),
    "lib2to3": ("3.13", None),
}


def is_stdlib(module: str) -> bool:
    return module in STDLIB or module in REMOVED_STDLIB or bool(re.match(r"^_[a-z]", module) and module in STDLIB)
