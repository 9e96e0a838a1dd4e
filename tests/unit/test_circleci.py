"""CircleCI's config is read as a GitHub workflow is: Python versions from the primary image
with its parameters filled in, services from the secondary images, the tests' environment, and
the apt, pip and test lines of its steps (bitcart tests on CircleCI alone: Python 3.9 to 3.11,
PostgreSQL and Redis beside the tests, libsecp256k1-dev from apt)."""

from __future__ import annotations

from bot.compile.plan import make_plan
from bot.config import load_settings
from bot.evidence import scan_repository
from bot.evidence.circleci import MAX_EXPANSIONS
from bot.graph.mapping import Registry

CONFIG = """\
version: 2.1
orbs:
  shared: someone/shared@2
executors:
  main-executor:
    parameters:
      v:
        type: string
        default: "3.9"
    docker:
      - image: cimg/python:<< parameters.v >>
      - image: circleci/redis:alpine
      - image: circleci/postgres:12-alpine-ram
        environment:
          POSTGRES_DB: app_test
          POSTGRES_PASSWORD: $SECRET
          POSTGRES_HOST_AUTH_METHOD: trust
      - image: example/some-daemon:1
    environment:
      TEST_ARGS: "--junitxml out.xml"
      PYTHON: << parameters.v >>
commands:
  install:
    steps:
      - run:
          name: install dependencies
          command: |
            sudo apt update
            sudo apt install libsecp256k1-dev
            pip install -U -r requirements/test.txt
jobs:
  test:
    parameters:
      v:
        type: string
    executor:
      name: main-executor
      v: << parameters.v >>
    environment:
      APP_ENV: testing
    steps:
      - checkout
      - install
      - run:
          name: start a daemon
          command: sudo apt install nodaemon-pkg && make daemon
          background: true
      - run: pytest -n 2 $TEST_ARGS tests
      - run: make check
  deploy:
    docker:
      - image: cimg/base:stable
    environment:
      ARCH: amd64
    steps:
      - run: sudo apt-get install -y qemu-user-static
workflows:
  main:
    jobs:
      - test:
          name: test-<< matrix.v >>
          matrix:
            parameters:
              v: ["3.10", "3.11"]
      - deploy
"""


def _repo(write_tree, config: str = CONFIG):
    return write_tree(
        {
            ".circleci/config.yml": config,
            "requirements/test.txt": "pytest\n",
            "Makefile": "check:\n\tpytest -x tests\n\ndaemon:\n\tpython -m daemon\n",
            "tests/test_x.py": "def test_x():\n    pass\n",
        }
    )


def test_versions_services_environment_and_steps_of_a_circleci_config(write_tree):
    ev = scan_repository(_repo(write_tree))
    tested = [(p.kind, p.value, p.source.file, p.source.line) for p in ev.python if p.source.file.startswith(".c")]
    # the parameter's default and the workflow's matrix, each from the image line
    assert tested == [
        ("tested", "3.9", ".circleci/config.yml", 11),
        ("tested", "3.10", ".circleci/config.yml", 11),
        ("tested", "3.11", ".circleci/config.yml", 11),
    ]
    assert [(s.name, s.kind, s.image, s.env, s.evidence[0].line) for s in ev.services] == [
        ("redis", "redis", "circleci/redis:alpine", {}, 12),
        (
            "postgres",
            "postgres",
            "circleci/postgres:12-alpine-ram",
            {"POSTGRES_DB": "app_test", "POSTGRES_HOST_AUTH_METHOD": "trust"},
            13,
        ),
    ]
    assert any("example/some-daemon:1" in w.message and w.line == 18 for w in ev.warnings)
    # plain values of the test jobs and their executor; a parameter, a variable and a deploy
    # job's variables are left out
    assert {k: v for k, (v, _) in ev.env.items()} == {"TEST_ARGS": "--junitxml out.xml", "APP_ENV": "testing"}
    assert [(p, s.file, s.line) for p, s in ev.apt_packages] == [("libsecp256k1-dev", ".circleci/config.yml", 28)]
    assert [(f, s.file, s.line) for f, s in ev.requirement_files] == [
        ("requirements/test.txt", ".circleci/config.yml", 28)
    ]
    ci = [c for c in ev.test_commands if c.source.file == ".circleci/config.yml"]
    assert [c.argv for c in ci] == [["pytest", "-n", "2", "$TEST_ARGS", "tests"]] and ci[0].ci
    # a make recipe a CircleCI step runs is read as CI's (``make check``), one in the background is not
    assert [(t, s.file) for t, s in ev.ci_targets] == [("check", ".circleci/config.yml")]
    made = [c for c in ev.test_commands if c.source.file == "Makefile"]
    assert [(c.argv, c.ci) for c in made] == [(["pytest", "-x", "tests"], True)]


def test_the_plan_takes_the_newest_circleci_version_its_services_and_its_selection(write_tree):
    repo = _repo(write_tree)
    plan = make_plan(
        repo, load_settings(repo, environ={}), available_pythons=["3.11", "3.13"], registry=Registry(enabled=False)
    )
    text = plan.dockerfile.text
    assert "FROM python:3.11-slim" in text and ".circleci/config.yml:11" in text
    assert "libsecp256k1-dev" in text
    assert {s.kind for s in plan.services} == {"postgres", "redis"}
    assert plan.test_command == ["python", "-m", "pytest", "tests"]


def test_a_malformed_or_odd_circleci_config_is_a_warning_and_the_rest_is_read(write_tree):
    for config in (
        "- a\n- list\n",
        "jobs: [1, 2]\nexecutors: 3\n",
        "version: 2.1\njobs:\n  t:\n    docker: oops\n    steps: 7\n",
    ):
        ev = scan_repository(_repo(write_tree, config))
        assert ev.services == [] and not [p for p in ev.python if p.source.file.startswith(".c")]
        assert not [t for t in ev.test_commands if t.source.file.startswith(".c")]
        assert ev.requirements or ev.requirement_files  # requirements/test.txt is read all the same
    ev = scan_repository(_repo(write_tree, "- a\n- list\n"))
    assert any(w.file == ".circleci/config.yml" and "not a mapping" in w.message for w in ev.warnings)
    # a parameter with no known value names no version
    many = "jobs:\n  t:\n    docker:\n      - image: cimg/python:<< parameters.unknown >>\n"
    assert not [p for p in scan_repository(_repo(write_tree, many)).python if p.source.file.startswith(".c")]


def test_a_matrix_over_a_service_version_starts_one_service_and_a_huge_matrix_is_bounded(write_tree):
    """Each version a matrix names would be one more PostgreSQL under the same network alias:
    the first is started. A hostile matrix of 2,000 x 2,000 values names at most MAX_EXPANSIONS
    images and is read in bounded time."""
    values = ", ".join(f'"{i}"' for i in range(2000))
    config = (
        "version: 2.1\njobs:\n  test:\n    docker:\n"
        "      - image: cimg/python:3.<< parameters.b >>\n"
        "      - image: postgres:<< parameters.b >>.<< parameters.c >>\n"
        "    steps:\n      - run: pytest\n"
        f"workflows:\n  w:\n    jobs:\n      - test:\n          matrix:\n            parameters:\n"
        f"              b: [{values}]\n              c: [{values}]\n"
    )
    ev = scan_repository(_repo(write_tree, config))
    assert [(s.name, s.image) for s in ev.services] == [("postgres", "postgres:0.0")]
    assert len([p for p in ev.python if p.source.file.startswith(".c")]) <= MAX_EXPANSIONS
