"""Python behind the ecosystem seam (``bot.ecosystems.base.Ecosystem``).

The adapter delegates to the modules that already do the work, stage by stage:
evidence ``bot.evidence.scan_repository``; graph ``bot.graph.build.build_graph``; runtime
``bot.graph.runtime.choose_python``; the plan ``bot.compile.plan.make_plan``; Dockerfile steps
``bot.compile.dockerfile.plan_steps``; JUnit results ``bot.verify.results.parse_junit``;
diagnosis ``bot.loop.diagnose.diagnose``. It adds detection, which nothing did before: every
repository used to get a Python plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.compile.devcontainer import INTERPRETER
from bot.compile.dockerfile import plan_steps
from bot.compile.plan import make_plan
from bot.ecosystems.base import CompileSnippet, Detection, ImageFamily, TestRunner, basename, depth, list_files, matches
from bot.engine import Engine
from bot.engine.images import available_pythons
from bot.errors import SetupbotError
from bot.evidence import scan_repository
from bot.evidence.imports import REMOVED_STDLIB
from bot.evidence.model import ScanWarning
from bot.graph.build import build_graph
from bot.graph.mapping import Registry
from bot.graph.runtime import choose_python
from bot.graph.specs import planned_test_command
from bot.junit import parse_junit
from bot.loop.diagnose import diagnose

# Files that make a repository a Python project. Manifests at the root are certain; the rest
# are weaker signs (a lone tox.ini or .python-version is still Python's).
MANIFESTS = ("pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "environment.yml", "environment.yaml")
OTHER_MARKERS = (
    "requirements*.txt",
    "requirements*.in",
    "tox.ini",
    "noxfile.py",
    ".python-version",
    "poetry.lock",
    "uv.lock",
    "pdm.lock",
    "Pipfile.lock",
    "pytest.ini",
    "conftest.py",
)
# The official image's supported tags (bot.graph.runtime.OFFICIAL_PYTHONS says the same).
OFFICIAL = ("3.9", "3.10", "3.11", "3.12", "3.13", "3.14")


def _is_test_file(rel: str) -> bool:
    name = basename(rel)
    return name.endswith(".py") and (
        name.startswith("test_") or name.endswith("_test.py") or "/tests/" in f"/{rel}" or "/test/" in f"/{rel}"
    )


def _layer(step: dict[str, Any], after_source: bool) -> str:
    op = step.get("op")
    if op == "FROM":
        return "base"
    if op == "CMD":
        return "target"
    if op == "ENV":
        return "env"
    if op == "WORKDIR":
        return "source"
    if op == "COPY":
        return "source" if step.get("src") == ["."] else "manifests"
    if after_source:
        return "project"
    commands = step.get("commands") or [[]]
    return "system" if commands[0][:1] == ["apt-get"] else "dependencies"


class PythonEcosystem:
    """Python projects: pip/uv/poetry/pdm installs into an official ``python:X.Y-slim`` image,
    tests run by pytest with JUnit XML results."""

    name = "python"
    title = "Python"
    markers: tuple[str, ...] = (*MANIFESTS, *OTHER_MARKERS)
    image_family = ImageFamily(
        "python",
        "python:{version}-slim",
        OFFICIAL,
        "requires-python and lock files must hold; then a developer's pin (.python-version), the newest "
        "version the project tests (CI matrix, classifiers, tox, nox), the newest available",
    )
    test_runner = TestRunner(
        ("python", "-m", "pytest"),
        ("python", "-m", "pytest", "--collect-only", "-q"),
        "junit",
        "/tmp/setupbot-junit.xml",
    )
    devcontainer_extensions: tuple[str, ...] = ("ms-python.python",)

    # -- detection ------------------------------------------------------------------------------
    def detect(self, repo: Path) -> Detection | None:
        return self.detect_files(list_files(repo))

    def detect_files(self, files: Sequence[str]) -> Detection | None:
        manifests = [f for f in files if basename(f) in MANIFESTS]
        others = [f for f in files if matches(basename(f), OTHER_MARKERS)]
        sources = [f for f in files if f.endswith(".py")]
        root_manifests = [f for f in manifests if depth(f) == 0]
        if root_manifests:
            return Detection(
                self.name,
                tuple(sorted(root_manifests + [f for f in others if depth(f) == 0])),
                1.0,
                f"{', '.join(sorted(root_manifests))} at the root",
            )
        if manifests or [f for f in others if depth(f) == 0]:
            found = sorted(manifests + others)
            return Detection(self.name, tuple(found[:20]), 0.7, f"{found[0]} (no manifest at the root)")
        tests = [f for f in sources if _is_test_file(f)]
        if tests:
            return Detection(self.name, tuple(tests[:20]), 0.6, f"Python tests ({tests[0]}) and no manifest")
        if sources:
            return Detection(self.name, tuple(sources[:20]), 0.3, f"Python files only ({sources[0]})")
        return None

    # -- evidence and graph --------------------------------------------------------------------
    def scan(self, repo: Path, output_dir: str | None = None) -> Any:
        return scan_repository(repo, output_dir)

    def contribute(self, evidence: Any, graph: Any, warnings: list[Any]) -> None:
        built = build_graph(evidence, Registry(), warnings)
        for node in built.nodes.values():
            if node.id not in graph.nodes:
                graph.add(node)
        for src, dst, kind in built.edges:
            graph.edge(src, dst, kind)
        for key, value in built.meta.items():
            graph.meta.setdefault(key, value)

    def available_versions(self, settings: Any) -> list[str]:
        try:
            found = list(available_pythons(Engine.from_settings(settings)))
        except (SetupbotError, OSError):  # no engine here: plan against the official tags
            found = []
        return found or list(self.image_family.versions)

    def choose_version(self, evidence: Any, available: Sequence[str]) -> Any:
        removed = sorted({u.module for u in evidence.imports if u.module in REMOVED_STDLIB})
        ceilings = sorted({(REMOVED_STDLIB[m][0], f"imports {m}") for m in removed if REMOVED_STDLIB[m][1] is None})
        return choose_python(list(evidence.python), list(available), ceilings)

    def make_plan(self, repo: Path, settings: Any = None, **options: Any) -> Any:
        known = ("available_pythons", "resolve", "registry", "resolve_timeout", "index_url")
        if options.get("available_versions") is not None and options.get("available_pythons") is None:
            options["available_pythons"] = options["available_versions"]
        return make_plan(repo, settings, **{k: v for k, v in options.items() if k in known})

    def extend_plan(self, plan: Any, settings: Any = None) -> None:
        # Python joining a plan another ecosystem leads (Python bindings in a crate's folder):
        # not planned yet, and the report says so rather than leaving it out silently.

        found = self.detect(Path(plan.repo))
        if found is not None:
            plan.warnings.append(
                ScanWarning(
                    found.markers[0],
                    None,
                    "Python files found beside the main ecosystem; the plan does not set "
                    "up their Python environment yet",
                )
            )

    # -- compile, target, results, diagnosis ------------------------------------------------------
    def compile_snippets(self, graph: Any) -> list[CompileSnippet]:
        out = []
        after_source = after_target = False
        for step in plan_steps(graph):
            # after the tests' CMD: the development stage (git, the user), which no test needs
            layer = "dev" if after_target else _layer(step, after_source)
            after_source = after_source or (step.get("op") == "COPY" and step.get("src") == ["."])
            after_target = after_target or step.get("op") == "CMD"
            out.append(CompileSnippet(layer, step))
        return out

    def test_command(self, evidence: Any, graph: Any) -> tuple[list[str], list[tuple[str, int | None, str]]]:
        return planned_test_command(evidence, graph)

    def parse_results(self, text: str) -> Any:
        return parse_junit(text)

    def diagnose(self, output: str) -> list[Any]:
        return diagnose(output)

    def devcontainer(self, config: dict[str, Any], plan: Any) -> dict[str, Any]:
        out = dict(config)
        custom = dict(out.get("customizations") or {})
        vscode = dict(custom.get("vscode") or {})
        vscode["extensions"] = list(dict.fromkeys([*vscode.get("extensions", []), *self.devcontainer_extensions]))
        vscode["settings"] = {**dict(vscode.get("settings") or {}), "python.defaultInterpreterPath": INTERPRETER}
        custom["vscode"] = vscode
        out["customizations"] = custom
        return out
