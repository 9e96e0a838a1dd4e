"""The ``rust:<version>-slim`` family: official tags, and offline stand-ins from Debian.

Debian ships two toolchains per release: ``rustc``/``cargo`` (trixie: 1.85) and the
``rustc-web``/``cargo-web`` pair that follows Firefox's needs (trixie: 1.96). Each becomes one
stand-in, built by the same machinery as the Python stand-ins (``bot.engine.images.build_standin``:
recipe hash label, the CA merged into the system store, which Debian's cargo reads through
libcurl). The version in each tag is what the suite ships; the probe checks it, so a mirror that
moved on fails the build loudly instead of mislabelling an image.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bot.engine.images import Outcome, build_standin
from bot.engine.recipes import ImageRecipe
from bot.errors import ConfigError

log = logging.getLogger(__name__)

# Official rust image tags (rust:1.NN-slim). The registry publishes every stable release; the
# list starts at the first 2021-edition compiler.
OFFICIAL_RUST = tuple(f"1.{minor}" for minor in range(56, 98))


@dataclass(frozen=True)
class DebianToolchain:
    version: str  # rustc major.minor the suite ships
    suite: str
    rustc_package: str
    cargo_package: str


# Checked with `apt-cache policy rustc cargo rustc-web cargo-web` against the trixie mirror.
DEBIAN_TOOLCHAINS = (
    DebianToolchain("1.85", "trixie", "rustc", "cargo"),
    DebianToolchain("1.96", "trixie", "rustc-web", "cargo-web"),
)


def rust_recipe(tc: DebianToolchain) -> ImageRecipe:
    probe = (
        "set -e; for t in rustc cargo rustdoc gcc cc; do command -v $t >/dev/null; done; "
        "! command -v pkg-config >/dev/null; "
        f"rustc --version | grep -q '^rustc {re.escape(tc.version)}\\.'; "
        "rustc --version | cut -d' ' -f2"
    )
    return ImageRecipe(
        tag=f"rust:{tc.version}-slim",
        template="images/rust/rust.Dockerfile.j2",
        base=f"debian:{tc.suite}-slim",
        kind="rust",
        name=tc.version,
        version=tc.version,
        variables={"rustc_package": tc.rustc_package, "cargo_package": tc.cargo_package, "suite": tc.suite},
        probe=("sh", "-c", probe),
        version_env="RUST_VERSION",
        env={"CARGO_HOME": "/usr/local/cargo"},
        aliases=(f"rust:{tc.version}-slim-{tc.suite}",),
    )


def image_recipes(suites: Iterable[str] = ("bookworm", "trixie")) -> list[ImageRecipe]:
    wanted = set(suites)
    return [rust_recipe(tc) for tc in DEBIAN_TOOLCHAINS if tc.suite in wanted]


def local_versions(image_tags: Iterable[str]) -> list[str]:
    """Rust versions among ``rust:X.Y-slim`` tags (stand-ins or pulled images), oldest first."""
    found = {m.group(1) for t in image_tags if (m := re.fullmatch(r"rust:(\d+\.\d+)-slim", t))}
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


def bootstrap(
    engine,
    settings,
    versions: Iterable[str] | None = None,
    *,
    force: bool = False,
    log_line: Callable[[str], None] = log.info,
) -> list:
    """Build the Rust stand-ins (all, or ``versions``) on top of the Debian stand-ins, which must
    be present already (``setupbot images bootstrap`` makes them). Nothing else is rebuilt."""
    recipes = image_recipes(tuple(settings.images.suites))
    known = {r.name: r for r in recipes}
    chosen = list(known.values()) if versions is None else []
    for v in versions or ():
        if v not in known:
            raise ConfigError(f"no Rust stand-in recipe for {v}", f"Choose among: {', '.join(known) or 'none'}.")
        chosen.append(known[v])
    outcomes = []
    for recipe in chosen:
        if not engine.image_exists(recipe.base):
            outcomes.append(
                Outcome(
                    recipe.tag,
                    "failed",
                    0.0,
                    f"its base {recipe.base} is not present: run `setupbot images bootstrap` first",
                )
            )
            continue
        outcome = build_standin(engine, settings, recipe, force=force, log_line=log_line)
        log_line(f"{outcome.action:7} {outcome.tag} ({outcome.seconds:.0f}s)")
        outcomes.append(outcome)
    return outcomes
