"""``setupbot@<rev>`` (bot/bench/previous.py): another commit of this project's code as a
benchmark system, so that a run compares this code with the previous one on the same trees,
machine and load (issues #16 and #19)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.bench import previous
from bot.bench.summary import render_summary, same_run_against
from bot.errors import InputError

# What "the old code" does in the plumbing test: a `bot` package of a commit of a real git
# repository, whose `run` writes what setupbot's `run` writes (a Dockerfile, the lock beside
# it, the --json summary, the run record) and says which settings reached it.
OLD_MAIN = """
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
assert args[0] == "run" and "--json" in args, args
repo, out = Path(args[1]), Path(args[args.index("--json") + 1])
(repo / ".devcontainer").mkdir(exist_ok=True)
seen = {k: os.environ.get(k, "") for k in ("SETUPBOT_TARGET_AS_OF", "SETUPBOT_KNOWLEDGE_PATH", "SETUPBOT_IMAGES_SOURCE")}
(repo / ".devcontainer" / "Dockerfile").write_text("FROM python:3.11-slim\\n# " + json.dumps(seen, sort_keys=True) + "\\n")
(repo / ".devcontainer" / "requirements.lock").write_text("six==1.16.0\\n")
(repo / ".setupbot").mkdir(exist_ok=True)
(repo / ".setupbot" / "run.json").write_text(json.dumps({"status": "success", "steps": 7, "repairs": [{}, {}]}))
out.write_text(json.dumps({"status": "success", "verdict": "Full",
                           "written": [".devcontainer/Dockerfile", ".devcontainer/requirements.lock", "../outside"]}))
"""


def _old_checkout(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "project"
    (root / "bot").mkdir(parents=True)
    (root / "bot" / "__init__.py").write_text("")
    (root / "bot" / "__main__.py").write_text(OLD_MAIN)
    (root / "pyproject.toml").write_text("[project]\nname = 'old'\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "old"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return root, sha


def test_the_old_commit_runs_on_the_tree_with_the_runs_settings_and_its_files_are_read_back(tmp_path, monkeypatch):
    root, sha = _old_checkout(tmp_path)
    repo, scratch, cache = tmp_path / "repo", tmp_path / "scratch", tmp_path / "cache"
    repo.mkdir()
    scratch.mkdir()
    (tmp_path / "outside").write_text("not read")
    monkeypatch.setenv("SETUPBOT_IMAGES_SOURCE", "standins")
    settings = SimpleNamespace(
        target=SimpleNamespace(as_of="2024-11-26T12:00:08-05:00"), budgets=SimpleNamespace(wall_clock=60)
    )
    produced, meta = previous.produce(f"setupbot@{sha[:10]}", repo, scratch, settings, cache, root=root)
    assert produced.ok and produced.system == f"setupbot@{sha[:10]}"
    seen = json.loads(produced.dockerfile.splitlines()[1][2:])
    # the pinned commit's date, a fresh store in the pair's scratch, the operator's settings
    assert seen == {
        "SETUPBOT_IMAGES_SOURCE": "standins",
        "SETUPBOT_KNOWLEDGE_PATH": str(scratch / "knowledge.sqlite"),
        "SETUPBOT_TARGET_AS_OF": "2024-11-26T12:00:08-05:00",
    }
    # the lock goes into the scored build context; a path outside the copy is not read
    assert produced.files == {".devcontainer/requirements.lock": "six==1.16.0\n"}
    assert meta == {"steps": 7, "repairs": 2}
    assert produced.details["commit"] == sha[:12] and produced.details["loop_status"] == "success"
    # the tree is written out once per commit
    assert (cache / sha / ".setupbot-tree-complete").read_text().strip() == sha


def test_a_run_that_writes_no_dockerfile_says_why(tmp_path):
    root, sha = _old_checkout(tmp_path)
    (root / "bot" / "__main__.py").write_text("import sys\nprint('boom: no engine', file=sys.stderr)\nsys.exit(3)\n")
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qam", "new"], check=True
    )
    repo = tmp_path / "repo"
    repo.mkdir()
    settings = SimpleNamespace(target=SimpleNamespace(as_of=""), budgets=SimpleNamespace(wall_clock=60))
    produced, _ = previous.produce("setupbot@HEAD", repo, tmp_path, settings, tmp_path / "cache", root=root)
    assert not produced.ok and "exit 3" in produced.reason and "boom: no engine" in produced.reason


def test_revisions_are_checked_before_anything_runs(tmp_path):
    assert previous.revision_of("setupbot") is None and previous.revision_of("declared") is None
    assert previous.revision_of("setupbot@1a51deb") == "1a51deb"
    for bad in ("setupbot@", "setupbot@-x", "setupbot@a..b", "setupbot@a b"):
        with pytest.raises(InputError):
            previous.revision_of(bad)
    root, _ = _old_checkout(tmp_path)
    with pytest.raises(InputError, match="no such commit"):
        previous.resolve("0123456789abcdef", root)


def test_this_checkouts_own_commit_runs_from_its_written_out_tree(tmp_path):
    """The real tree of a real commit of this project: `python -m bot run --help` from it, with
    that tree first on the path, offers the --json the system reads back."""
    code = previous.code_at("HEAD", tmp_path)
    env = previous.child_env(code, tmp_path, "")
    proc = subprocess.run(
        [sys.executable, "-c", "import bot; print(bot.__file__)"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.stdout.strip() == str(code / "bot" / "__init__.py")
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "run", "--help"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0 and "--json" in proc.stdout


def test_the_summary_gives_the_same_run_ratio_against_the_previous_code():
    def rec(system, repo, seconds, ebsr):
        return {
            "repo": repo,
            "sha": "a" * 40,
            "system": system,
            "ecosystem": "python",
            "produce_seconds": seconds,
            "ebsr": ebsr,
            "status": "ok" if ebsr else "collect-failed",
        }

    records = [
        rec("setupbot", "o/a", 100, True),
        rec("setupbot", "o/b", 300, True),
        rec("setupbot", "o/c", 50, True),
        rec("setupbot@1a51deb", "o/a", 200, True),
        rec("setupbot@1a51deb", "o/b", 400, False),
    ]
    # o/c ran with this code only: the comparison takes the two both produced
    assert same_run_against(records, "setupbot@1a51deb") == (2, 200.0, 300.0, 2, 1)
    text = render_summary(records)
    assert "Same run, against `setupbot@1a51deb` on the 2 repositories both produced" in text
    assert "(ratio 0.67); EBSR 2/2 against 1/2." in text


def test_the_old_code_runs_without_the_verdict_when_it_knows_the_flag(tmp_path, monkeypatch):
    """The in-process system runs the setup loop alone; the old code gets --no-verify where its
    run command declares it, and runs as it is where it does not (older than the flag)."""
    monkeypatch.setenv("SETUPBOT_IMAGES_SOURCE", "standins")
    settings = SimpleNamespace(target=SimpleNamespace(as_of=""), budgets=SimpleNamespace(wall_clock=60))
    main = OLD_MAIN + "\n(repo / 'argv.txt').write_text(' '.join(args))\n"
    seen = {}
    for knows in (True, False):
        root = tmp_path / f"p{knows}"
        (root / "bot" / "commands").mkdir(parents=True)
        (root / "bot" / "__init__.py").write_text("")
        (root / "bot" / "__main__.py").write_text(main)
        if knows:
            (root / "bot" / "commands" / "run.py").write_text('p.add_argument("--no-verify", action="store_true")\n')
        git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "old"], check=True)
        sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
        repo, scratch = tmp_path / f"repo{knows}", tmp_path / f"scratch{knows}"
        repo.mkdir()
        scratch.mkdir()
        previous.produce(f"setupbot@{sha[:10]}", repo, scratch, settings, tmp_path / "cache", root=root)
        seen[knows] = (repo / "argv.txt").read_text().split()
    assert "--no-verify" in seen[True] and "--no-verify" not in seen[False]


def test_a_repository_that_keeps_its_own_dockerfile_is_scored_by_the_runs_dockerfile(tmp_path):
    """setupbot leaves a Dockerfile without its marker alone and writes its own into the report
    and the run record: the benchmark scores the run's Dockerfile, never the repository's."""
    root, sha = _old_checkout(tmp_path)
    (root / "bot" / "__main__.py").write_text(
        "import json, sys\nfrom pathlib import Path\n"
        "args = sys.argv[1:]\nrepo, out = Path(args[1]), Path(args[args.index('--json') + 1])\n"
        "(repo / '.setupbot').mkdir()\n"
        "(repo / '.setupbot' / 'run.json').write_text(json.dumps({'status': 'success', "
        "'dockerfile': '# Generated by setupbot from the repository\\'s own files\\nFROM python:3.11-slim\\n'}))\n"
        "out.write_text(json.dumps({'status': 'success', 'written': ['.setupbot/run.json']}))\n"
    )
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qam", "keeps"], check=True
    )
    repo = tmp_path / "repo"
    (repo / ".devcontainer").mkdir(parents=True)
    (repo / ".devcontainer" / "Dockerfile").write_text("FROM the-projects-own:image\n")
    settings = SimpleNamespace(target=SimpleNamespace(as_of=""), budgets=SimpleNamespace(wall_clock=60))
    produced, _ = previous.produce("setupbot@HEAD", repo, tmp_path, settings, tmp_path / "cache", root=root)
    assert produced.ok and produced.dockerfile.endswith("FROM python:3.11-slim\n")
    assert "the-projects-own" not in produced.dockerfile
