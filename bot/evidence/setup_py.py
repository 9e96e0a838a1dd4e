"""setup.py (read with ``ast``, never executed) and setup.cfg."""

from __future__ import annotations

import ast
import configparser
import re
from collections.abc import Iterator
from typing import Any

from bot.evidence import requirements as reqmod
from bot.evidence.files import RepoFiles, line_of
from bot.evidence.imports import is_stdlib
from bot.evidence.model import MAIN, TEST, Evidence, PythonConstraint, Source
from bot.evidence.pyproject import SCM_BUILD_TOOLS, is_test_group


class _Unresolved(Exception):
    pass


def _value(node: ast.AST, names: dict[str, ast.AST], depth: int = 0) -> Any:
    """A literal value, following simple module-level names and list concatenation."""
    if depth > 8:
        raise _Unresolved
    if isinstance(node, ast.Name) and node.id in names:
        return _value(names[node.id], names, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, names, depth + 1), _value(node.right, names, depth + 1)
        return left + right
    if isinstance(node, ast.Subscript):
        container = _value(node.value, names, depth + 1)
        key = _value(node.slice, names, depth + 1)
        try:
            return container[key]
        except (KeyError, IndexError, TypeError):
            raise _Unresolved from None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return {kw.arg: _value(kw.value, names, depth + 1) for kw in node.keywords if kw.arg}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e, names, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {
            _value(k, names, depth + 1): _value(v, names, depth + 1)
            for k, v in zip(node.keys, node.values, strict=False)
            if k is not None
        }
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Unresolved from None


def scan(files: RepoFiles, ev: Evidence) -> None:
    _scan_setup_py(files, ev)
    _scan_setup_cfg(files, ev)


def _scan_setup_py(files: RepoFiles, ev: Evidence) -> None:
    rel = "setup.py"
    text = files.read_text(rel)
    if text is None:
        return
    proj = ev.project
    proj.installable = True
    proj.install_source = proj.install_source or Source(rel, 1, "setup.py")
    proj.manager = proj.manager or "setuptools"
    try:
        tree = ast.parse(text, rel)
    except (SyntaxError, ValueError) as exc:
        ev.warn(rel, getattr(exc, "lineno", None), f"cannot parse setup.py: {exc.msg if hasattr(exc, 'msg') else exc}")
        return
    names = _module_names(tree)
    own = _own_import(tree, files)
    if own is not None:
        proj.self_import = Source(rel, own[1], f"setup.py imports {own[0]} from the checkout")
    for module, line in _build_imports(tree, files):
        proj.build_imports.append((module, Source(rel, line, f"setup.py imports {module} to run")))
    setup_call = _find_setup_call(tree, ev, rel)
    # requirements files named in setup.py (open("requirements.txt") etc.)
    for m in re.finditer(r"""["']([\w./-]*requirements[\w./-]*\.txt)["']""", text):
        path = m.group(1)
        if files.exists(path):
            group = reqmod.classify(path)
            reqmod.scan_file(files, ev, path, group if group != "other" else MAIN, via_ok=True)
    if setup_call is None:
        ev.warn(rel, None, "no setup() call found; setup.py read for names only")
        return
    keywords, computed = _keywords(setup_call, names)
    for kw in keywords:
        _setup_keyword(ev, rel, text, kw, names)
    if computed is not None:
        # setup(**computed()): what it declares is not known
        ev.warn(rel, computed, "setup(**...) is computed; its keywords are not read statically")
        proj.unread_dependencies = proj.unread_dependencies or Source(
            rel, computed, "setup(**...) computed by setup.py"
        )


def _keywords(call: ast.Call, names: dict[str, ast.AST]) -> tuple[list[ast.keyword], int | None]:
    """setup()'s keywords, with those of a module-level dict it unpacks (``setup(**configuration)``
    where ``configuration = {"install_requires": [...], ...}`` or ``dict(...)``) read as if written
    in the call; an explicit keyword wins over the dict's. Also, when the call unpacks something
    and no keyword came of it (``setup(**make_config())``), the line of its first ``**``; else None."""
    explicit = [kw for kw in call.keywords if kw.arg is not None]
    unpacked: list[ast.keyword] = []
    stars = [kw.value.lineno for kw in call.keywords if kw.arg is None]
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        node = names.get(kw.value.id) if isinstance(kw.value, ast.Name) else kw.value
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=False):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    unpacked.append(ast.keyword(arg=key.value, value=value, lineno=value.lineno))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            unpacked.extend(k for k in node.keywords if k.arg is not None)
    given = {kw.arg for kw in explicit}
    keywords = explicit + [kw for kw in unpacked if kw.arg not in given]
    return keywords, stars[0] if stars and len(keywords) == len(explicit) else None


def _module_level_imports(tree: ast.Module, *, into_try: bool) -> Iterator[tuple[str, int]]:
    """The top-level module names setup.py imports as it runs, in order, with their lines:
    module level and under an ``if``; inside a ``try`` too when ``into_try``."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        stmt = stack.pop(0)
        if isinstance(stmt, ast.If) or (into_try and isinstance(stmt, ast.Try)):
            stack[:0] = [
                *stmt.body,
                *getattr(stmt, "orelse", []),
                *[s for h in getattr(stmt, "handlers", []) for s in h.body],
            ]
            continue
        if isinstance(stmt, ast.Import):
            modules = [a.name for a in stmt.names]
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            modules = [stmt.module]
        else:
            continue
        for module in modules:
            yield module.split(".")[0], stmt.lineno


def _in_checkout(files: RepoFiles, top: str) -> bool:
    return files.exists(f"{top}/__init__.py") or files.exists(f"{top}.py")


def _own_import(tree: ast.Module, files: RepoFiles) -> tuple[str, int] | None:
    """The first module of the checkout that setup.py imports at module level (``from mypkg
    import __version__``, ``import versioneer``), with its line; None when it imports none."""
    return next(
        ((top, line) for top, line in _module_level_imports(tree, into_try=True) if _in_checkout(files, top)), None
    )


# what every isolated setuptools build has, whatever [build-system] says
_BUILD_ALWAYS = {"setuptools", "distutils", "pkg_resources", "_distutils_hack"}


def _build_imports(tree: ast.Module, files: RepoFiles) -> list[tuple[str, int]]:
    """The distributions' modules setup.py imports unconditionally to run (module level, or
    under an ``if``; not inside a ``try``, which tolerates their absence): not the standard
    library, not the checkout, not setuptools. Each once, with its first line."""
    found: dict[str, int] = {}
    for top, line in _module_level_imports(tree, into_try=False):
        if top not in _BUILD_ALWAYS and not is_stdlib(top) and not _in_checkout(files, top):
            found.setdefault(top, line)
    return sorted(found.items(), key=lambda kv: kv[1])


def _module_names(tree: ast.Module) -> dict[str, ast.AST]:
    """The module-level assignments, so setup(install_requires=REQS) can be read."""
    names: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            names[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            names[stmt.target.id] = stmt.value
    return names


def _find_setup_call(tree: ast.Module, ev: Evidence, rel: str) -> ast.Call | None:
    """The first setup(...) call; any Extension-like call marks the project as compiling."""
    proj = ev.project
    setup_call = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            fname = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if fname == "setup" and setup_call is None:
                setup_call = node
            if fname in ("Extension", "cythonize", "Pybind11Extension", "CMakeExtension", "RustExtension"):
                proj.c_extensions = proj.c_extensions or Source(rel, node.lineno, f"{fname}(...) in setup.py")
    return setup_call


def _setup_keyword(ev: Evidence, rel: str, text: str, kw: ast.keyword, names: dict[str, ast.AST]) -> None:
    """One setup() keyword: name, python_requires, requirements, extras, SCM, extensions, classifiers."""
    proj = ev.project
    src = Source(rel, kw.value.lineno, f"setup({kw.arg}=...)")
    try:
        val = _value(kw.value, names)
    except _Unresolved:
        if kw.arg in ("install_requires", "extras_require", "tests_require", "python_requires"):
            ev.warn(rel, kw.value.lineno, f"setup({kw.arg}=...) is computed; not read statically")
        if kw.arg == "install_requires":
            proj.unread_dependencies = proj.unread_dependencies or Source(rel, kw.value.lineno, "computed by setup.py")
        if kw.arg in ("ext_modules",):
            proj.c_extensions = proj.c_extensions or src
        if kw.arg == "use_scm_version":
            proj.scm_version, proj.scm_tool = src, "setuptools-scm"
        return
    if kw.arg == "name" and isinstance(val, str):
        proj.name, proj.name_source = val, src
    elif kw.arg == "python_requires" and isinstance(val, str):
        ev.python.append(PythonConstraint("requires", val, src))
    elif kw.arg == "install_requires":
        for spec in _specs(val):
            ev.add_requirement(spec, MAIN, Source(rel, line_of(text, spec) or src.line, "install_requires"))
    elif kw.arg == "tests_require":
        for spec in _specs(val):
            ev.add_requirement(spec, TEST, Source(rel, line_of(text, spec) or src.line, "tests_require"))
    elif kw.arg == "extras_require" and isinstance(val, dict):
        _extras_require(ev, rel, text, val, src)
    elif kw.arg == "setup_requires":
        for spec in _specs(val):
            low = re.split(r"[<>=!~\[; ]", spec.lower(), maxsplit=1)[0].replace("_", "-")
            if low in SCM_BUILD_TOOLS:
                proj.scm_version, proj.scm_tool = src, SCM_BUILD_TOOLS[low]
            if low in ("cython", "pybind11", "cffi", "setuptools-rust"):
                proj.c_extensions = proj.c_extensions or src
    elif kw.arg == "use_scm_version" and val:
        proj.scm_version, proj.scm_tool = src, "setuptools-scm"
    elif kw.arg == "ext_modules" and val:
        proj.c_extensions = proj.c_extensions or src
    elif kw.arg == "classifiers":
        for c in _specs(val):
            cm = re.match(r"Programming Language :: Python :: (3\.\d+)\s*$", c)
            if cm:
                ev.python.append(PythonConstraint("tested", cm.group(1), Source(rel, line_of(text, c), "classifier")))


def _extras_require(ev: Evidence, rel: str, text: str, val: dict, src: Source) -> None:
    """setup(extras_require=...): the extras, and which of them the tests need."""
    for extra, specs in sorted(val.items(), key=lambda kv: str(kv[0])):
        extra_name = str(extra).split(":")[0]
        ev.project.extras[extra_name] = list(_specs(specs))
        for spec in _specs(specs):
            ev.add_requirement(
                spec,
                f"extra:{extra_name}",
                Source(rel, line_of(text, spec) or src.line, f"extras_require[{extra_name}]"),
                optional=True,
            )
        if (
            is_test_group(extra_name)
            and extra_name.lower() != "dev"
            or extra_name.lower() in ("test", "tests", "testing")
        ):
            ev.test_extras.append((extra_name, src))
    if "dev" in val and not any(is_test_group(str(e)) and str(e) != "dev" for e in val):
        ev.test_extras.append(("dev", src))


def _specs(val: Any) -> list[str]:
    if isinstance(val, str):
        return [s.strip() for s in val.splitlines() if s.strip() and not s.strip().startswith("#")]
    if isinstance(val, (list, tuple)):
        return [s for s in val if isinstance(s, str)]
    return []


def _cfg_lines(value: str) -> list[str]:
    return [v.strip() for v in value.splitlines() if v.strip() and not v.strip().startswith("#")]


def _scan_setup_cfg(files: RepoFiles, ev: Evidence) -> None:
    rel = "setup.cfg"
    text = files.read_text(rel)
    if text is None:
        return
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text, source=rel)
    except configparser.Error as exc:
        ev.warn(rel, getattr(exc, "lineno", None), f"malformed setup.cfg: {str(exc).splitlines()[0]}")
        return
    if parser.has_section("metadata"):
        _scan_cfg_metadata(ev, parser, text, rel)
    if parser.has_section("options"):
        _scan_cfg_options(files, ev, parser, text, rel)
    if parser.has_section("options.extras_require"):
        _scan_cfg_extras(ev, parser, text, rel)


def _scan_cfg_metadata(ev: Evidence, parser: configparser.RawConfigParser, text: str, rel: str) -> None:
    proj = ev.project
    if parser.has_option("metadata", "name"):
        proj.name = proj.name or parser.get("metadata", "name").strip()
        proj.name_source = proj.name_source or Source(rel, line_of(text, "name"), "metadata.name")
    if parser.has_option("metadata", "classifiers"):
        for c in _cfg_lines(parser.get("metadata", "classifiers")):
            cm = re.match(r"Programming Language :: Python :: (3\.\d+)\s*$", c)
            if cm:
                ev.python.append(PythonConstraint("tested", cm.group(1), Source(rel, line_of(text, c), "classifier")))


def _scan_cfg_options(
    files: RepoFiles, ev: Evidence, parser: configparser.RawConfigParser, text: str, rel: str
) -> None:
    proj = ev.project
    proj.installable = True
    proj.install_source = proj.install_source or Source(rel, line_of(text, "[options]"), "setup.cfg [options]")
    if parser.has_option("options", "python_requires"):
        ev.python.append(
            PythonConstraint(
                "requires",
                parser.get("options", "python_requires").strip(),
                Source(rel, line_of(text, "python_requires"), "python_requires"),
            )
        )
    for key, group in (("install_requires", MAIN), ("tests_require", TEST)):
        if parser.has_option("options", key):
            start = line_of(text, key) or 1
            for spec in _cfg_lines(parser.get("options", key)):
                if spec.startswith("file:"):
                    for f in spec[5:].split(","):
                        reqmod.scan_file(files, ev, f.strip(), group, via_ok=True)
                    continue
                ev.add_requirement(spec, group, Source(rel, line_of(text, spec, start), key))
    if parser.has_option("options", "setup_requires"):
        for spec in _cfg_lines(parser.get("options", "setup_requires")):
            low = re.split(r"[<>=!~\[; ]", spec.lower(), maxsplit=1)[0].replace("_", "-")
            if low in SCM_BUILD_TOOLS:
                proj.scm_version = Source(rel, line_of(text, spec), "setup_requires")
                proj.scm_tool = SCM_BUILD_TOOLS[low]


def _scan_cfg_extras(ev: Evidence, parser: configparser.RawConfigParser, text: str, rel: str) -> None:
    proj = ev.project
    start = line_of(text, "[options.extras_require]") or 1
    for extra, value in parser.items("options.extras_require"):
        proj.extras[extra] = _cfg_lines(value)
        for spec in _cfg_lines(value):
            ev.add_requirement(
                spec,
                f"extra:{extra}",
                Source(rel, line_of(text, spec, start), f"extras_require.{extra}"),
                optional=True,
            )
        if is_test_group(extra) and extra != "dev" or extra in ("test", "tests", "testing"):
            ev.test_extras.append((extra, Source(rel, line_of(text, extra, start), f"test extra {extra}")))
    if parser.has_option("options.extras_require", "dev") and not any(
        is_test_group(e) and e != "dev" for e, _ in parser.items("options.extras_require")
    ):
        ev.test_extras.append(("dev", Source(rel, line_of(text, "dev", start), "extra dev")))
