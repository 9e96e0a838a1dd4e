"""Which ``rust:<version>-slim`` image a repository gets (issue #18, "a Rust runtime node").

Hard floors first: ``rust-version`` (MSRV) of every crate, the newest edition in use (2024 needs
1.85, 2021 1.56, 2018 1.31) and the Cargo.lock format (version 4 needs cargo 1.78). Then the
developer's pin (``rust-toolchain.toml`` with a numbered channel): that version when the engine
offers it, else the oldest offered above it. Otherwise the newest version offered: crates.io
dependencies raise their own MSRVs over time, and the newest compiler builds the most of them.
When nothing offered meets the floor, the choice says so plainly and names what is missing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.ecosystems.rust.evidence import EDITION_FLOOR, LOCK_FLOOR, RustEvidence, version_key


@dataclass
class RustChoice:
    version: str | None  # "1.85"; None when nothing is offered at all
    satisfied: bool  # every floor holds
    reason: str
    floor: str | None = None  # the highest floor, "1.85"
    floor_why: str = ""  # "rust-version = 1.85 in crates/a/Cargo.toml"
    warnings: list[str] = field(default_factory=list)

    @property
    def image(self) -> str | None:
        return f"rust:{self.version}-slim" if self.version else None


def _minor(text: str) -> str:
    key = version_key(text)
    return f"{key[0]}.{key[1]}"


def floors(ev: RustEvidence) -> list[tuple[str, str]]:
    """(version, why) for every hard floor the evidence states, highest first."""
    out: list[tuple[str, str]] = []
    msrv = ev.msrv()
    if msrv:
        out.append((_minor(msrv[0]), f"rust-version = {msrv[0]} in {msrv[1].file}"))
    editions = [e for e in ev.editions() if e in EDITION_FLOOR]
    if editions:
        newest = max(editions)
        out.append((EDITION_FLOOR[newest], f"edition {newest} (needs rustc {EDITION_FLOOR[newest]})"))
    if ev.lock_version in LOCK_FLOOR and ev.lock_version and ev.lock_version >= 3:
        floor = LOCK_FLOOR[ev.lock_version]
        out.append((floor, f"Cargo.lock format version {ev.lock_version} (needs cargo {floor})"))
    return sorted(out, key=lambda f: version_key(f[0]), reverse=True)


def pinned(ev: RustEvidence) -> tuple[str, str] | None:
    """The developer's numbered toolchain (``1.79.0`` -> ``1.79``), from the toolchain file."""
    if ev.toolchain and re.fullmatch(r"1\.\d+(?:\.\d+)?", ev.toolchain.channel):
        return _minor(ev.toolchain.channel), f"channel {ev.toolchain.channel} in {ev.toolchain.source.file}"
    return None


def choose_toolchain(ev: RustEvidence, available: Sequence[str]) -> RustChoice:
    offered = sorted({_minor(v) for v in available if re.fullmatch(r"\d+\.\d+(?:\.\d+)?", v)}, key=version_key)
    hard = floors(ev)
    floor, floor_why = hard[0] if hard else (None, "")
    warnings: list[str] = []
    if ev.toolchain and not pinned(ev):
        if ev.toolchain.channel.startswith(("nightly", "beta")):
            warnings.append(
                f"{ev.toolchain.source.file} asks for {ev.toolchain.channel}; the image carries a stable "
                "toolchain, so features that need nightly will not build"
            )
    if not offered:
        return RustChoice(
            None,
            False,
            "no rust:X.Y-slim image is offered on this engine "
            "(run `setupbot images bootstrap --ecosystem rust` or let a registry answer)",
            floor,
            floor_why,
            warnings,
        )
    fitting = [v for v in offered if floor is None or version_key(v) >= version_key(floor)]
    if not fitting:
        newest = offered[-1]
        return RustChoice(
            newest,
            False,
            f"{floor_why} needs rustc {floor} or newer, and the newest image offered here is "
            f"rust:{newest}-slim (offered: {', '.join(offered)}); the build will fail until a "
            f"rust:{floor}-slim or newer image is available",
            floor,
            floor_why,
            warnings,
        )
    pin = pinned(ev)
    if pin:
        want, why = pin
        exact = [v for v in fitting if v == want]
        above = [v for v in fitting if version_key(v) >= version_key(want)]
        if exact:
            return RustChoice(want, True, f"the pinned toolchain ({why})", floor, floor_why, warnings)
        if above:
            warnings.append(f"{why}: rust:{want}-slim is not offered; using the nearest newer rust:{above[0]}-slim")
            return RustChoice(above[0], True, f"nearest offered above the pin ({why})", floor, floor_why, warnings)
        warnings.append(f"{why}: no image at or above it is offered; using the newest, rust:{fitting[-1]}-slim")
    newest = fitting[-1]
    why = (
        f"the newest offered that meets {floor_why}"
        if floor
        else "the newest offered (no rust-version or edition floor)"
    )
    return RustChoice(newest, True, why, floor, floor_why, warnings)
