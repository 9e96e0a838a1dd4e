"""SUMMARY.md and chart.png from the JSON lines: the per-pair table, per-system aggregates and
EBSR per difficulty. Regenerated from the records alone (``setupbot bench --report-only``).

The EBSR figures, the targets and the chart are Python's. Repositories another ecosystem leads
(Rust) are scored another way (``cargo test --no-run``, libtest counts), so they get a section of
their own and never enter the Python figures. A repository whose tree could not be exported has
no known ecosystem: it is listed apart, and counted as a failure in the Python figures (the
default list), so that a missing tree never raises an EBSR.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from bot.bench.determinism import identical_share
from bot.bench.systems import SYSTEMS

DIFFICULTY_ORDER = ("easy", "medium", "hard")
# A Python package whose own code is a Rust extension: its own section, scored the Python way.
PYTHON_RUST = "python+rust"
# How each ecosystem other than Python is scored, for its section of the summary.
ECOSYSTEM_METHODS = {
    "rust": (
        "EBSR: `cargo test --no-run` (the test binaries build) exits 0 in the built image; tests: "
        "libtest's counts of `cargo test --no-fail-fast` (an ignored test counts as skipped), both in a "
        "fresh container with no network. `setupbot` runs the Rust setup loop (as `setupbot run` does) "
        "and its clean replay's image is scored; `declared` is the naive template: the newest "
        "`rust:X.Y-slim` offered, `COPY . .`, `cargo fetch` and `cargo test --no-run` in the build."
    ),
    PYTHON_RUST: (
        "Python packages whose own code is a Rust extension (maturin or setuptools-rust): scored as "
        "the Python repositories are (EBSR: `python -m pytest --collect-only -q` exits 0; tests: JUnit "
        "counts), but kept out of the Python figures. `setupbot` runs the Python setup loop, which "
        "joins a Rust toolchain to the Python image (`bot.ecosystems.rust.pyrust`); `declared` and "
        "`pipreqs` are the Python templates, which have no Rust toolchain."
    ),
}
SECTION_TITLES = {PYTHON_RUST: "Python packages that build Rust"}


# The records the Python figures count: Python's, and the trees that could not be exported.
PYTHON_FIGURES = ("python", "")


def ecosystem_of(record: dict) -> str:
    """The record's lead ecosystem: "python" for records from before the benchmark knew
    ecosystems (no key), "" for a tree that could not be exported."""
    return str(record["ecosystem"] or "") if "ecosystem" in record else "python"


def section_of(record: dict) -> str:
    """The summary section a record belongs to: its lead ecosystem, or ``python+rust`` for a
    Python package whose tree Rust also leads part of (a maturin or setuptools-rust extension)."""
    lead = ecosystem_of(record)
    if lead == "python" and "rust" in (record.get("ecosystems") or []):
        return PYTHON_RUST
    return lead


def _systems_in(records: list[dict]) -> list[str]:
    present = {r["system"] for r in records}
    return [s for s in SYSTEMS if s in present] + sorted(present - set(SYSTEMS))


def _difficulties_in(records: list[dict]) -> list[str]:
    present = {r.get("difficulty") or "unrated" for r in records}
    return [d for d in DIFFICULTY_ORDER if d in present] + sorted(present - set(DIFFICULTY_ORDER))


def _median(values: Iterable[Any]) -> float | None:
    numbers = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(numbers) if numbers else None


@dataclass
class SystemAggregate:
    system: str
    repos: int
    ebsr: int
    mean_pass_share: float | None
    mean_essr: float | None
    essr_repos: int
    median_produce: float | None
    median_build: float | None
    median_image: float | None
    tokens: int
    median_steps: float | None
    repairs: int
    replay_reused: int

    @property
    def ebsr_rate(self) -> float:
        return self.ebsr / self.repos if self.repos else 0.0


def aggregate(records: list[dict]) -> list[SystemAggregate]:
    rows = []
    for system in _systems_in(records):
        rs = [r for r in records if r["system"] == system]
        shares = [r.get("pass_share") or 0.0 for r in rs]
        essrs = [r["essr"] for r in rs if r.get("essr") is not None]
        rows.append(
            SystemAggregate(
                system=system,
                repos=len(rs),
                ebsr=sum(1 for r in rs if r.get("ebsr")),
                mean_pass_share=statistics.fmean(shares) if shares else None,
                mean_essr=statistics.fmean(essrs) if essrs else None,
                essr_repos=len(essrs),
                median_produce=_median([r.get("produce_seconds") for r in rs]),
                median_build=_median([r.get("build_seconds") for r in rs]),
                median_image=_median([r.get("image_bytes") for r in rs]),
                tokens=sum(int(r.get("tokens") or 0) for r in rs),
                median_steps=_median([r.get("steps") for r in rs]),
                repairs=sum(int(r.get("repairs") or 0) for r in rs),
                replay_reused=sum(1 for r in rs if r.get("replay_reused")),
            )
        )
    return rows


def ebsr_by_difficulty(records: list[dict]) -> dict[str, dict[str, tuple[int, int]]]:
    """{difficulty: {system: (ebsr successes, repos)}}"""
    table: dict[str, dict[str, tuple[int, int]]] = {}
    for difficulty in _difficulties_in(records):
        table[difficulty] = {}
        for system in _systems_in(records):
            rs = [r for r in records if r["system"] == system and (r.get("difficulty") or "unrated") == difficulty]
            table[difficulty][system] = (sum(1 for r in rs if r.get("ebsr")), len(rs))
    return table


def overshoot(records: list[dict]) -> tuple[float, str, float, float] | None:
    """The setupbot run that went furthest past its wall-clock budget: (share over the budget,
    repository, seconds, budget); negative when every run ended early. None without budgets."""
    runs = [
        (r["produce_seconds"] / r["budget_seconds"] - 1, r["repo"], r["produce_seconds"], r["budget_seconds"])
        for r in records
        if r.get("system") == "setupbot" and r.get("budget_seconds") and r.get("produce_seconds") is not None
    ]
    return max(runs) if runs else None


def _secs(v) -> str:
    if v is None:
        return "–"
    v = float(v)
    if v < 10:
        return f"{v:.1f}s"
    return f"{v:.0f}s" if v < 600 else f"{v / 60:.1f}m"


def _size(v) -> str:
    if v is None:
        return "–"
    v = float(v)
    return f"{v / 1e9:.2f} GB" if v >= 1e9 else f"{v / 1e6:.0f} MB"


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _lock_cell(r: dict) -> str:
    """yes (setupbot's own requirements.lock), native (the repository's lock) or no."""
    lock = (r.get("details") or {}).get("lock") or {}
    if lock.get("status") in ("locked", "unchanged"):
        return "yes"
    if lock.get("status") == "native":
        return "native"
    return "no" if r.get("system") == "setupbot" else "–"


def _determinism_cell(r: dict) -> str:
    d = r.get("determinism")
    if not isinstance(d, dict) or d.get("identical") is None:
        return "–"
    return "identical" if d["identical"] else "differs"


def render_summary(
    records: list[dict],
    *,
    commands: list[str] | None = None,
    chart_name: str = "chart.png",
    notes: list[str] | None = None,
    sections: list[str] | None = None,
) -> str:
    """The summary; ``sections``: further markdown lines (the retrieval figures) before the list
    of files absent from the snapshots."""
    lines = ["# setupbot benchmark", ""]
    if not records:
        return "\n".join(lines + ["No results yet: run `setupbot bench --repos FILE` first.", ""])
    python = [r for r in records if section_of(r) in PYTHON_FIGURES]
    systems = _systems_in(python)
    repos = _repos_in(python)
    lines += _produced_by_lines(commands)
    if python:
        lines += _method_lines(python, systems, repos)
    for note in notes or []:
        lines.append(note)
        lines.append("")
    lines += _commit_lines(records)
    if python:
        lines.append(f"![EBSR and pass share by system and difficulty]({chart_name})")
        lines.append("")
        lines += _per_system_lines(python)
        lines += _target_lines(python)
        lines += _same_run_lines(python)
        lines += _difficulty_lines(python, systems)
        lines += _per_repository_lines(python, systems, repos)
        lines += _time_lines(python)
    for section in sorted({section_of(r) for r in records} - {"python", ""}):
        lines += _ecosystem_lines(section, [r for r in records if section_of(r) == section])
    lines += _unexported_lines([r for r in records if section_of(r) == ""])
    lines += sections or []
    lines += _missing_blob_lines(records, _systems_in(records))
    return "\n".join(lines)


def _repos_in(records: list[dict]) -> list[tuple[str, str]]:
    return sorted({(r["repo"], r.get("sha", "")) for r in records}, key=lambda x: x[0].lower())


def _ecosystem_lines(ecosystem: str, records: list[dict]) -> list[str]:
    """One ecosystem's own section: how it is scored, per system, and per repository with the
    systems side by side. Systems skipped for it are named, not scored."""
    scored = [r for r in records if r.get("status") != "skipped"]
    skipped = [r for r in records if r.get("status") == "skipped"]
    title = SECTION_TITLES.get(ecosystem, ecosystem.capitalize())
    lines = [f"## {title}" if ecosystem in SECTION_TITLES else f"## {title} repositories", ""]
    lines += [ECOSYSTEM_METHODS.get(ecosystem, f"Scored the {title} way."), ""]
    named = "" if ecosystem in SECTION_TITLES else title
    lines += [f"{_repositories(len(_repos_in(records)), named)}, not counted in the Python figures.", ""]
    lines += [
        "| system | repos | EBSR | mean pass share | median produce | median build | median image | "
        "median steps | repairs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for a in aggregate(scored):
        steps = "–" if a.median_steps is None else f"{a.median_steps:g}"
        lines.append(
            f"| {a.system} | {a.repos} | {a.ebsr}/{a.repos} ({_pct(a.ebsr_rate)}) | {_pct(a.mean_pass_share)} | "
            f"{_secs(a.median_produce)} | {_secs(a.median_build)} | {_size(a.median_image)} | {steps} | {a.repairs} |"
        )
    lines.append("")
    for system in _systems_in(skipped):
        rs = [r for r in skipped if r["system"] == system]
        lines += [f"`{system}` skipped on {_repositories(len(rs))}: {rs[0].get('reason', '')}.", ""]
    lines += _side_by_side_lines(scored)
    return lines


def _repositories(n: int, title: str = "") -> str:
    return f"{n} {title + ' ' if title else ''}{'repository' if n == 1 else 'repositories'}"


def _side_by_side_lines(records: list[dict]) -> list[str]:
    """One row per repository, one column per system: EBSR, passed / failed / skipped, status."""
    systems = _systems_in(records)
    by_pair = {(r["repo"], r["system"]): r for r in records}
    lines = [
        "| repository | difficulty | " + " | ".join(systems) + " |",
        "|---|---|" + "---|" * len(systems),
    ]
    for name, sha in _repos_in(records):
        cells = []
        for system in systems:
            r = by_pair.get((name, system))
            cells.append("–" if r is None else _side_by_side_cell(r))
        difficulty = next((r.get("difficulty") for r in records if r["repo"] == name and r.get("difficulty")), "–")
        lines.append(f"| {_cell(name)}@{sha[:8]} | {difficulty} | " + " | ".join(cells) + " |")
    lines += ["", "A cell: EBSR, then passed / failed / skipped tests, build time and image size, or why not.", ""]
    return lines


def _side_by_side_cell(r: dict) -> str:
    t = r.get("tests") or {}
    if r.get("ebsr"):
        text = f"✓ {t.get('passed', 0)} / {t.get('failed', 0)} / {t.get('skipped', 0)}"
        text += " (timeout)" if r.get("test_timed_out") else ""
        return _cell(f"{text}, {_secs(r.get('build_seconds'))}, {_size(r.get('image_bytes'))}")
    why = (r.get("reason") or "").splitlines()[0][:120] if r.get("reason") else ""
    return _cell(f"✗ {r.get('status', '')}" + (f": {why}" if why else ""))


def _unexported_lines(records: list[dict]) -> list[str]:
    """Repositories whose tree could not be exported: no ecosystem known, no system scored."""
    if not records:
        return []
    lines = [
        "## Not exported",
        "",
        "Counted as failures in the Python figures (the tree was never read, so its ecosystem is unknown):",
        "",
    ]
    for name, sha in _repos_in(records):
        r = next(r for r in records if r["repo"] == name)
        lines.append(f"- {name}@{sha[:8]}: " + _cell((r.get("reason") or r.get("status", "")).splitlines()[0][:200]))
    lines.append("")
    return lines


def _produced_by_lines(commands: list[str] | None) -> list[str]:
    """The commands that produced the results, as a shell block."""
    if not commands:
        return []
    lines = ["Produced by:" if len(commands) == 1 else "Produced by these commands (resumed runs):", "```sh"]
    lines += commands
    lines.append("```")
    lines.append("")
    return lines


def _method_lines(records: list[dict], systems: list[str], repos: list[tuple[str, str]]) -> list[str]:
    """How every system is scored, and what each system is."""
    lines = [
        f"{len(repos)} repositories × {len(systems)} systems ({', '.join(systems)}). "
        "Every Dockerfile is scored in a fresh build with no cache, the repository at the "
        "pinned commit as context (no `.git`). EBSR: `python -m pytest --collect-only -q` exits 0 "
        "in the built image. Tests: JUnit counts of `python -m pytest -p no:cacheprovider`. "
        "Pass share: passed / (passed + failed + errors); ESSR: passed / gold count, where the "
        "list gives one.",
        "",
    ]
    reused = sum(1 for r in records if r.get("replay_reused"))
    if "setupbot" in systems:
        lines.append(
            f"setupbot: {reused} of {sum(1 for r in records if r['system'] == 'setupbot')} scores "
            "come from the clean replay inside `run_setup` (already a fresh no-cache build of the "
            "final Dockerfile at the pinned commit), reused instead of building twice; the others "
            "were built by the benchmark."
        )
        lines.append("")
    lines += [
        "Systems:",
        "",
        "- `setupbot`: the setup loop (`run_setup`), deterministic unless an LLM is configured; a fresh "
        "seeded experience store per repository. Its produce time is the whole run (plan, builds, "
        "repairs and the clean replay).",
        "- `declared`: a fixed template on `python:3.11-slim` installing every top-level "
        "`requirements*.txt` and `requirements/*.txt`, then `pip install -e .[test,tests,testing,dev]` "
        "(the extras the project declares), then pytest.",
        "- `pipreqs`: the same template with the requirements `pipreqs --mode no-pin` infers from "
        "the imports (the project itself is not installed), then pytest.",
        "",
    ]
    return lines


def _commit_lines(records: list[dict]) -> list[str]:
    """Which setupbot commit produced which result, when a resumed run mixes them."""
    commits: dict[str, list[str]] = {}
    for r in records:
        if r["system"] == "setupbot":
            commits.setdefault(r.get("setupbot_commit") or "", []).append(r["repo"].split("/")[-1])
    if not (len(commits) > 1 or "" in commits and len(commits) == 1 and records):
        return []
    parts = [
        f"`{c}`: {', '.join(sorted(names))}"
        if c
        else f"not recorded (runs before commit tracking): {', '.join(sorted(names))}"
        for c, names in sorted(commits.items(), key=lambda kv: (kv[0] == "", kv[0]))
    ]
    return ["setupbot code per result (resumed runs): " + "; ".join(parts) + ".", ""]


def _per_system_lines(records: list[dict]) -> list[str]:
    """The per-system table: EBSR, pass share, ESSR, times, image size, tokens, steps, repairs."""
    lines = [
        "## Per system",
        "",
        "| system | repos | EBSR | mean pass share | mean ESSR (gold) | median produce | median build | "
        "median image | tokens | median steps | repairs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in aggregate(records):
        essr = f"{_pct(a.mean_essr)} (n={a.essr_repos})" if a.essr_repos else "–"
        steps = "–" if a.median_steps is None else f"{a.median_steps:g}"
        lines.append(
            f"| {a.system} | {a.repos} | {a.ebsr}/{a.repos} ({_pct(a.ebsr_rate)}) | "
            f"{_pct(a.mean_pass_share)} | {essr} | {_secs(a.median_produce)} | {_secs(a.median_build)} | "
            f"{_size(a.median_image)} | {a.tokens} | {steps} | {a.repairs} |"
        )
    lines.append("")
    return lines


def _target_lines(records: list[dict]) -> list[str]:
    """setupbot against the round's targets: EBSR, tokens, image size, budget overshoot, determinism."""
    setupbot = next((a for a in aggregate(records) if a.system == "setupbot"), None)
    if setupbot is None:
        return []
    # The round's targets (issue: setupbot EBSR >= 85% deterministic, 0 tokens, median image <= 1 GB).
    checks = [
        (f"EBSR {_pct(setupbot.ebsr_rate)} ≥ 85%", setupbot.ebsr_rate >= 0.85),
        (f"tokens {setupbot.tokens} = 0", setupbot.tokens == 0),
        (
            f"median image {_size(setupbot.median_image)} ≤ 1 GB",
            setupbot.median_image is not None and setupbot.median_image <= 1e9,
        ),
    ]
    lines = ["Targets for setupbot: " + "; ".join(f"{text} {'✓' if ok else '✗'}" for text, ok in checks) + ".", ""]
    over = overshoot(records)
    if over is not None:
        share, repo, seconds, budget = over
        lines.append(
            f"Budget: the largest overshoot of a setupbot run over budgets.wall_clock is "
            f"{share * 100:+.1f} % ({repo}: {seconds:.0f}s of {budget:.0f}s; target ≤ 5 %) "
            f"{'✓' if share <= 0.05 else '✗'}."
        )
    same, checked = identical_share(records)
    if checked:
        # issue 16: the final Dockerfile built twice with no cache gives the same package sets
        lines.append(
            f"Determinism: {same}/{checked} repositories ({_pct(same / checked)}) give identical "
            "`pip freeze --all` and `dpkg-query -W` in two no-cache builds of the final Dockerfile "
            f"(target ≥ 95% {'✓' if same / checked >= 0.95 else '✗'})."
        )
        lines.append("")
    return lines


def same_run_against(records: list[dict], previous: str, current: str = "setupbot") -> SameRun | None:
    """``current`` (this code unless told) against ``previous`` (a ``setupbot@<rev>`` system) on
    the repositories both ran in these results: a ``SameRun`` (EBSR over all of them, median
    produce over those where both wrote a Dockerfile)."""

    def by_repo(system: str) -> dict[tuple[str, str], dict]:
        return {
            (str(r.get("repo")).lower(), str(r.get("sha"))): r
            for r in records
            if r.get("system") == system and isinstance(r.get("produce_seconds"), (int, float))
        }

    new, old = by_repo(current), by_repo(previous)
    both = sorted(set(new) & set(old))
    if not both:
        return None
    # the times compare runs that wrote a Dockerfile: a run that stopped before producing one (an
    # old code that rejects a flag exits in a second) says nothing of how fast either sets up;
    # its EBSR still counts as a failure of its system
    timed = [k for k in both if not _produce_failed(new[k]) and not _produce_failed(old[k])]
    median_new = _median(new[k]["produce_seconds"] for k in timed) or 0.0
    median_old = _median(old[k]["produce_seconds"] for k in timed) or 0.0
    return SameRun(
        len(both),
        median_new,
        median_old,
        sum(bool(new[k].get("ebsr")) for k in both),
        sum(bool(old[k].get("ebsr")) for k in both),
        len(timed),
    )


class SameRun(NamedTuple):
    """Two systems on the repositories both ran: medians over the ``timed`` ones where both
    wrote a Dockerfile, EBSR over all of them."""

    repos: int
    median_new: float
    median_old: float
    ebsr_new: int
    ebsr_old: int
    timed: int


def _produce_failed(record: dict) -> bool:
    return str(record.get("status") or "").startswith("produce-failed")


def _timed_note(got: SameRun) -> str:
    """Where the medians cover fewer repositories than the EBSR does."""
    if got.timed == got.repos:
        return ""
    return f" (medians over the {got.timed} where both wrote a Dockerfile)"


def _same_run_lines(records: list[dict]) -> list[str]:
    """For each ``setupbot@<rev>`` system in the results: this code against that one, same run."""
    lines: list[str] = []
    for system in sorted({str(r.get("system")) for r in records if str(r.get("system")).startswith("setupbot@")}):
        got = same_run_against(records, system)
        if got is None:
            continue
        n, new, old, ebsr_new, ebsr_old, timed = got
        ratio = f"{new / old:.2f}" if old else "–"
        times = (
            f"median produce {_secs(new)} against {_secs(old)} (ratio {ratio}){_timed_note(got)}"
            if timed
            else "no produce time to compare (on none of them did both write a Dockerfile)"
        )
        lines.append(
            f"{_which_run(records, system)} `{system}` on the {n} repositories both produced: {times}; "
            f"EBSR {ebsr_new}/{n} against {ebsr_old}/{n}."
        )
    lines += _before_after_lines(records)
    return [*lines, ""] if lines else []


def _finished_window(records: list[dict], system: str, repos: set[tuple[str, str]]) -> tuple[str, str] | None:
    """When ``system``'s rows of ``repos`` finished: the first and the last, or None when a row
    does not say."""
    times = [
        str(r.get("finished_at") or "")
        for r in records
        if r.get("system") == system and (str(r.get("repo")).lower(), str(r.get("sha"))) in repos
    ]
    if not times or not all(times):
        return None
    return min(times), max(times)


def _which_run(records: list[dict], system: str) -> str:
    """How this code's rows and ``system``'s came about: one run (their rows finished over the
    same hours), separate runs (the figures then also compare two moments of the machine), or
    unknown. The summary claims a same-run comparison only when the rows show it."""

    def repos(name: str) -> set[tuple[str, str]]:
        return {(str(r.get("repo")).lower(), str(r.get("sha"))) for r in records if r.get("system") == name}

    both = repos("setupbot") & repos(system)
    new, old = _finished_window(records, "setupbot", both), _finished_window(records, system, both)
    if new is None or old is None:
        return "Against"
    if new[0] <= old[1] and old[0] <= new[1]:
        return "Same run, against"
    return f"Not one run (this code's rows finished {_hhmm(new)}, `{system}`'s {_hhmm(old)}), against"


def _hhmm(window: tuple[str, str]) -> str:
    """``2026-12-04T16:34:00Z`` to ``2026-12-04T19:03:00Z`` as "2026-12-04 16:34 to 19:03"."""
    first, last = (w.replace("T", " ")[:16] for w in window)
    return f"{first} to {last[11:] if last[:10] == first[:10] else last}"


def _before_after_lines(records: list[dict]) -> list[str]:
    """Named commits and no plain ``setupbot``: a before-run and an after-run of the same list
    (the earliest and the latest, by when each system's first row finished; a partial run of a
    commit between them is in the tables only), on the repositories both produced, with the
    ratio of their EBSR."""
    named = {str(r.get("system")) for r in records if str(r.get("system")).startswith("setupbot@")}
    if len(named) < 2 or any(r.get("system") == "setupbot" for r in records):
        return []
    # (a row with no time, such as a repository with no snapshot, says nothing of when it ran)
    first = {
        system: min(
            (str(r["finished_at"]) for r in records if r.get("system") == system and r.get("finished_at")),
            default="~",
        )
        for system in named
    }
    ordered = sorted(named, key=lambda system: (first[system], system))
    before, after = ordered[0], ordered[-1]
    got = same_run_against(records, before, current=after)
    if got is None:
        return []
    n, new, old, ebsr_new, ebsr_old, _ = got
    ratio = f"{ebsr_new / ebsr_old:.2f}" if ebsr_old else "–"
    return [
        f"Before and after, `{before}` then `{after}` on the {n} repositories both produced: EBSR "
        f"{ebsr_new}/{n} ({100 * ebsr_new / n:.1f}%) against {ebsr_old}/{n} ({100 * ebsr_old / n:.1f}%), "
        f"ratio {ratio}; median produce {_secs(new)} against {_secs(old)}{_timed_note(got)}."
    ]


# the stages of a setupbot run, as its record times them (the loop's RunRecord.timings)
STAGES = (
    ("plan", "plan_seconds"),
    ("builds", "build_seconds"),
    ("target runs", "test_seconds"),
    ("lock", "lock_seconds"),
)


def stage_times(record: dict) -> dict[str, float] | None:
    """Seconds per stage of one setupbot run, with "other" for what no stage timed (snapshots,
    trial installs, services, the freeze); None for a record that does not time its target runs."""
    timings = (record.get("details") or {}).get("timings") or {}
    if "test_seconds" not in timings or not timings.get("total_seconds"):
        return None
    out = {name: float(timings.get(key) or 0.0) for name, key in STAGES}
    total = float(timings["total_seconds"])
    out["other"] = max(0.0, total - sum(out.values()))
    out["total"] = total
    out["replay"] = float(timings.get("replay_seconds") or 0.0)
    return out


def _time_lines(records: list[dict]) -> list[str]:
    """Where setupbot's produce time goes, per repository, slowest first (the replay's build
    and test run are inside builds and target runs; its own column says how much)."""
    rows = [(r, stage_times(r)) for r in records if r.get("system") == "setupbot"]
    timed = sorted(((r, t) for r, t in rows if t is not None), key=lambda rt: -rt[1]["total"])
    if not timed:
        return []
    names = [name for name, _ in STAGES] + ["other"]
    lines = [
        "## Where setupbot's time goes",
        "",
        "| repository | total | " + " | ".join(names) + " | of which the clean replay |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    for r, t in timed:
        share = " | ".join(f"{_secs(t[n])} ({t[n] / t['total']:.0%})" for n in names)
        lines.append(f"| {r['repo']} | {_secs(t['total'])} | {share} | {_secs(t['replay'])} |")
    sums = {n: sum(t[n] for _, t in timed) for n in [*names, "total"]}
    lines += [
        "",
        f"Across the {len(timed)} timed runs: "
        + ", ".join(f"{n} {sums[n] / sums['total']:.0%}" for n in sorted(names, key=lambda n: -sums[n]))
        + ".",
        "",
    ]
    return lines


def _difficulty_lines(records: list[dict], systems: list[str]) -> list[str]:
    """EBSR per difficulty and system."""
    lines = [
        "## EBSR per difficulty",
        "",
        "| difficulty | " + " | ".join(systems) + " |",
        "|---|" + "---|" * len(systems),
    ]
    for difficulty, row in ebsr_by_difficulty(records).items():
        cells = [f"{ok}/{n} ({_pct(ok / n if n else None)})" if n else "–" for ok, n in (row[s] for s in systems)]
        lines.append(f"| {difficulty} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _per_repository_lines(records: list[dict], systems: list[str], repos: list[tuple[str, str]]) -> list[str]:
    """One row per repository and system."""
    lines = [
        "## Per repository",
        "",
        "| repository | difficulty | system | EBSR | passed / failed / errors | ESSR | produce | build | "
        "image | lock | determinism | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_pair = {(r["repo"], r["system"]): r for r in records}
    for name, sha in repos:
        for system in systems:
            found = by_pair.get((name, system))
            if found is None:
                continue
            lines.append(_repository_row(name, sha, system, found))
    lines.append("")
    return lines


def _repository_row(name: str, sha: str, system: str, r: dict) -> str:
    """One repository's result for one system, as a table row."""
    t = r.get("tests") or {}
    tests = f"{t.get('passed', 0)} / {t.get('failed', 0)} / {t.get('errors', 0)}"
    if r.get("test_timed_out"):
        tests += " (timeout)"
    status = r.get("status", "")
    if status != "ok" and r.get("reason"):
        status += ": " + r["reason"].splitlines()[0][:120]
    return (
        f"| {_cell(name)}@{sha[:8]} | {r.get('difficulty') or '–'} | {system} | "
        f"{'✓' if r.get('ebsr') else '✗'} | {tests} | {_pct(r.get('essr'))} | "
        f"{_secs(r.get('produce_seconds'))} | {_secs(r.get('build_seconds'))} | "
        f"{_size(r.get('image_bytes'))} | {_lock_cell(r)} | {_determinism_cell(r)} | {_cell(status)} |"
    )


def _missing_blob_lines(records: list[dict], systems: list[str]) -> list[str]:
    """The files the snapshot export had to skip (large blobs), per repository."""
    missing = [
        (r["repo"], r["export"]["missing_blobs"])
        for r in records
        if r["system"] == systems[0] and (r.get("export") or {}).get("missing_blobs")
    ]
    if not missing:
        return []
    lines = [
        "## Files absent from the snapshots",
        "",
        "Blobs of 4 MiB or more are not in the stored snapshots; the export skipped them:",
        "",
    ]
    for name, paths in missing:
        lines.append(f"- {name}: {len(paths)} file(s): " + ", ".join(f"`{p}`" for p in paths[:6]))
    lines.append("")
    return lines


def render_chart(records: list[dict], path: Path) -> Path:
    """Two panels: EBSR and mean pass share (ESSR where gold counts exist) per system; EBSR per
    difficulty and system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = _systems_in(records)
    aggs = {a.system: a for a in aggregate(records)}
    by_diff = ebsr_by_difficulty(records)
    difficulties = list(by_diff)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    width = 0.38
    xs = range(len(systems))
    ebsr = [100 * aggs[s].ebsr_rate for s in systems]
    share = [
        100 * ((aggs[s].mean_essr or 0.0) if aggs[s].essr_repos else (aggs[s].mean_pass_share or 0.0)) for s in systems
    ]
    b1 = left.bar([x - width / 2 for x in xs], ebsr, width, label="EBSR")
    b2 = left.bar(
        [x + width / 2 for x in xs],
        share,
        width,
        label="ESSR" if any(aggs[s].essr_repos for s in systems) else "pass share",
    )
    left.bar_label(b1, fmt="%.0f", fontsize=8)
    left.bar_label(b2, fmt="%.0f", fontsize=8)
    left.set_xticks(list(xs), systems)
    left.set_ylim(0, 110)
    left.set_ylabel("%")
    left.set_title("by system (" + ", ".join(f"{s}: n={aggs[s].repos}" for s in systems) + ")", fontsize=9)
    left.legend(loc="upper right", fontsize=8)
    width = 0.8 / max(1, len(systems))
    for i, system in enumerate(systems):
        cells = [by_diff[d][system] for d in difficulties]
        values = [100 * ok / n if n else 0.0 for ok, n in cells]
        bars = right.bar([j - 0.4 + width * (i + 0.5) for j in range(len(difficulties))], values, width, label=system)
        # A system with no repository of that difficulty is "n/a", not a zero.
        right.bar_label(
            bars, labels=[f"{v:.0f}" if n else "n/a" for v, (_, n) in zip(values, cells, strict=False)], fontsize=7
        )
    right.set_xticks(
        range(len(difficulties)), [f"{d} (n={max(n for _, n in by_diff[d].values())})" for d in difficulties]
    )
    right.set_ylim(0, 110)
    right.set_title("EBSR by difficulty")
    right.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(
    records: list[dict],
    summary_path: Path,
    chart_path: Path,
    *,
    commands: list[str] | None = None,
    notes: list[str] | None = None,
    sections: list[str] | None = None,
) -> tuple[Path, Path | None]:
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    chart: Path | None = None
    python = [r for r in records if section_of(r) in PYTHON_FIGURES]
    if python:  # the chart draws the Python figures
        chart = render_chart(python, chart_path)
    try:
        chart_ref = chart_path.resolve().relative_to(summary_path.parent.resolve()).as_posix()
    except ValueError:
        chart_ref = str(chart_path)
    summary_path.write_text(
        render_summary(records, commands=commands, chart_name=chart_ref, notes=notes, sections=sections) + "\n"
    )
    return summary_path, chart
