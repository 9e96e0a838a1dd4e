"""The service catalogue (bot/catalogue.py) is the one home of what setupbot knows about a kind
of service: every stage reads its entry, so a kind added there reaches evidence, the graph,
diagnosis, verification, the compose/devcontainer outputs and the stand-in recipes (issue #17)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import yaml

from bot import catalogue
from bot.atoms import Atom
from bot.catalogue import KINDS, kind_of, resolve_image
from bot.compile.devcontainer import parse_devcontainer
from bot.engine.core import render_template
from bot.engine.service_recipes import SERVICE_RECIPES
from bot.evidence import scan_repository
from bot.evidence.services import service_clients, service_kind
from bot.graph.apply import apply_atom
from bot.graph.build import build_graph
from bot.graph.mapping import Registry
from bot.loop.diagnose import diagnose, service_for
from bot.outputs import generate_outputs
from bot.paths import templates_dir
from bot.report import ReportData
from bot.services import ServiceSpec, health_argv, service_env, specs_from_diagnosis

ROOT = Path(__file__).parents[2]


def test_the_catalogue_sits_at_the_bottom_layer():
    tree = ast.parse((ROOT / "bot" / "catalogue.py").read_text())
    internal = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bot")
    }
    internal |= {
        a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for a in node.names
        if a.name.startswith("bot")
    }
    assert internal <= {"bot.errors", "bot.paths"}


def test_no_stage_keeps_its_own_copy_of_service_tables():
    # the tables that used to disagree (postgres 16 vs 17, mysql vs mariadb) are gone
    for rel, names in {
        "bot/graph/apply.py": ("SERVICE_IMAGES", "SERVICE_ENV", "SERVICE_PORTS ="),
        "bot/compile/compose.py": ("HEALTHCHECKS",),
        "bot/evidence/services.py": ("KINDS = (",),
    }.items():
        text = (ROOT / rel).read_text()
        assert not [n for n in names if n in text], rel
    assert not (ROOT / "bot" / "verify" / "catalog.py").exists()


def test_every_stage_agrees_on_the_mysql_kind_and_the_postgres_version():
    # evidence, diagnosis and an atom all land on one kind, whose image is the stand-in's tag
    assert service_kind("mariadb:11") == service_kind("mysql:8") == "mysql"
    sig = next(s for s in diagnose("Can't connect to MySQL server on 'localhost' (111)\n") if s.category == "service")
    assert service_for(sig) == "mysql"
    g = _graph()
    apply_atom(g, Atom("start_service", {"service": "mariadb"}))
    apply_atom(g, Atom("start_service", {"service": "postgres"}))
    assert g.nodes["service:mysql"].attrs["image"] == KINDS["mysql"].standin.tag == "mariadb:11"
    assert g.nodes["service:postgres"].attrs["image"] == KINDS["postgres"].standin.tag == "postgres:17"
    assert "service:mariadb" not in g.nodes
    recipe_tags = {r.tag for r in SERVICE_RECIPES}
    for kind in KINDS.values():
        if kind.standin is not None:
            # what the outputs name is what `images bootstrap` builds
            assert kind.image in kind.standin.tags and kind.standin.tag in recipe_tags


def _graph(files: dict[str, str] | None = None, tmp: Path | None = None):
    from bot.graph.model import DepGraph, Node

    if files is None:
        g = DepGraph()
        g.add(Node("target:tests", "TARGET", "tests", "UNKNOWN"))
        return g
    assert tmp is not None
    for rel, text in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    ev = scan_repository(tmp)
    return ev, build_graph(ev, Registry(enabled=False), [])


def test_memcached_flows_everywhere_from_its_one_entry(tmp_path):
    """Memcached was added as one catalogue entry plus its stand-in template; each stage below
    knows it only through that entry."""
    entry = KINDS["memcached"]
    # evidence: the client imports name the kind; a compose service with the image is a requirement
    ev, g = _graph(
        {
            "pyproject.toml": '[project]\nname = "app"\nversion = "0"\ndependencies = ["pymemcache"]\n',
            "app/cache.py": "import pymemcache\nfrom pylibmc import Client\n",
            "tests/test_cache.py": "def test_x():\n    assert True\n",
            "docker-compose.yml": "services:\n  cache:\n    image: memcached:1.6-alpine\n",
        },
        tmp_path,
    )
    clients = service_clients(ev)
    assert sorted(u.module for u in clients["memcached"]) == ["pylibmc", "pymemcache"]
    assert [s.kind for s in ev.services] == ["memcached"]
    # graph: a SERVICE node from the evidence, and the client hint on the target
    node = g.nodes["service:memcached"]
    assert node.type == "SERVICE" and node.attrs["image"] == "memcached:1.6-alpine"
    assert g.target.attrs["service_clients"] == {"memcached": ["pylibmc", "pymemcache"]}
    # a start_service atom from diagnosis: the catalogue's image and port
    bare = _graph()
    apply_atom(bare, Atom("start_service", {"service": "memcache"}))
    assert bare.nodes["service:memcached"].attrs["image"] == entry.image == "memcached:1.6"
    assert bare.nodes["service:memcached"].attrs["ports"] == ["11211"]
    # diagnosis: the port, the host name and the client's own words
    for log in (
        "pymemcache: [Errno 111] Connection refused on 127.0.0.1:11211\n",
        "socket.gaierror: [Errno -2] Name or service not known: 'memcached'\n",
    ):
        sigs = [s for s in diagnose(log) if s.category == "service"]
        assert [service_for(s) for s in sigs] == ["memcached"], log
    specs = specs_from_diagnosis("E   pylibmc.ConnectionError: error 3 from memcached_get: Connection refused\n")
    assert [s.kind for s in specs] == ["memcached"]
    # verification: wiring and the health probe
    spec = ServiceSpec.from_any({"name": "cache", "kind": "memcached"})
    assert spec.image == "memcached:1.6" and spec.port == 11211
    assert service_env(spec)["MEMCACHED_URL"] == "cache:11211"
    assert health_argv(spec) == [["bash", "-c", 'exec 3<>"/dev/tcp/127.0.0.1/$1"', "probe", "11211"]]
    # outputs: compose with the health check, devcontainer running the service
    out = generate_outputs(
        ReportData(repository="octo/app", test_command=["python", "-m", "pytest"]),
        dockerfile_text="FROM python:3.11-slim\n",
        services=[{"name": "cache", "kind": "memcached", "image": entry.image}],
        app_env=service_env(spec),
    )
    compose = yaml.safe_load(out.files[".devcontainer/compose.yaml"])
    assert compose["services"]["cache"]["image"] == "memcached:1.6"
    assert compose["services"]["cache"]["healthcheck"]["test"] == list(entry.compose_health)
    assert compose["services"]["app"]["environment"]["MEMCACHED_HOST"] == "cache"
    dc = parse_devcontainer(out.files[".devcontainer/devcontainer.json"])
    assert "cache" in dc["runServices"]
    # stand-in: one recipe from the entry, whose template installs the entry's Debian package
    recipe = next(r for r in SERVICE_RECIPES if r.name == "memcached")
    assert (recipe.tag, recipe.aliases, recipe.ports) == (
        "memcached:1.6",
        ("memcached:1", "memcached:latest"),
        (11211,),
    )
    dockerfile = render_template(recipe.template, **recipe.template_variables())
    assert "--no-install-recommends memcached " in dockerfile
    assert (templates_dir() / recipe.files["entrypoint.sh"]).is_file()
    assert resolve_image("memcached", "memcached:1.6-alpine", {"memcached:1.6"}.__contains__).image == "memcached:1.6"


def test_every_stand_in_template_installs_the_catalogues_packages():
    for recipe in SERVICE_RECIPES:
        kind = next(k for k in KINDS.values() if k.standin and k.standin.template == recipe.name)
        text = render_template(recipe.template, **recipe.template_variables())
        assert "--no-install-recommends " + " ".join(kind.standin.packages) + " " in text, recipe.name


def test_mongodb_says_plainly_that_it_cannot_start_offline():
    mongo = KINDS["mongodb"]
    # Debian (bookworm, trixie) has no MongoDB package: no stand-in, no recipe, and a reason
    assert mongo.standin is None and not mongo.starts_offline and "Debian" in mongo.offline_note
    assert not [r for r in SERVICE_RECIPES if r.name in ("mongodb", "mongo")]
    choice = resolve_image("mongodb", "mongo:7", lambda tag: False)
    assert choice.image is None and "cannot start offline" in choice.note and "Debian" in choice.note
    # an engine that has the official image still starts it
    assert resolve_image("mongodb", "mongo:7", {"mongo:8"}.__contains__).image == "mongo:8"
    # a kind with a stand-in whose image is merely absent says how to build it instead
    absent = resolve_image("memcached", "memcached:1.6", lambda tag: False)
    assert "cannot start offline" not in absent.note and "--services memcached" in absent.note


def test_kinds_are_found_from_images_names_ports_and_imports():
    assert kind_of(image="bitnami/memcached:1.6") == "memcached"
    assert kind_of(name="memcache") == "memcached"
    assert kind_of(ports=[11211]) == "memcached"
    assert kind_of(image="acme/webapp:2", name="web") is None
    assert catalogue.kinds_for_imports(["mysql.connector.pooling", "redis.asyncio"]) == {
        "redis": ["redis"],
        "mysql": ["mysql.connector"],
    }
    # the catalogue's data is plain enough to print (what `setupbot images list` and reports show)
    json.dumps({k.kind: [k.image, k.port, list(k.standin_tags)] for k in KINDS.values()})


def test_every_seeded_start_service_names_a_catalogue_kind():
    from bot.knowledge.units import seed_units
    from bot.loop.candidates import SQL_SERVERS

    named = [a.args["service"] for unit in seed_units() for a in unit.atoms if a.kind == "start_service"]
    # {database} is filled from the loop's context, with one of SQL_SERVERS
    kinds = [k for s in named for k in (SQL_SERVERS if s == "{database}" else [s])]
    assert named and all(catalogue.canonical(k) for k in kinds), named
