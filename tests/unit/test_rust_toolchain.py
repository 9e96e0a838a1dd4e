"""Toolchain choice for Rust repositories (issue #18): MSRV, edition, lock format, pins."""

from __future__ import annotations

from bot.ecosystems.rust.evidence import Crate, RustEvidence, Toolchain
from bot.ecosystems.rust.toolchain import choose_toolchain, floors
from bot.evidence.model import Source

OFFERED = ["1.85", "1.96"]


def evidence(*, edition=None, msrv=None, lock=None, channel=None) -> RustEvidence:
    ev = RustEvidence(root="Cargo.toml", crates=[Crate("", "Cargo.toml", "x", edition, msrv)], lock_version=lock)
    if channel:
        ev.toolchain = Toolchain(channel, Source("rust-toolchain.toml", 2))
    return ev


def test_no_floor_takes_the_newest():
    choice = choose_toolchain(evidence(), OFFERED)
    assert (choice.version, choice.satisfied, choice.image) == ("1.96", True, "rust:1.96-slim")


def test_edition_2024_needs_1_85_and_edition_2021_1_56():
    assert floors(evidence(edition="2024"))[0][0] == "1.85"
    assert floors(evidence(edition="2021"))[0][0] == "1.56"
    assert choose_toolchain(evidence(edition="2024"), ["1.63", "1.85"]).version == "1.85"
    refused = choose_toolchain(evidence(edition="2024"), ["1.63", "1.80"])
    assert refused.satisfied is False and "edition 2024" in refused.reason


def test_msrv_above_every_image_is_reported_plainly():
    choice = choose_toolchain(evidence(msrv="1.99"), OFFERED)
    assert choice.satisfied is False
    assert choice.floor == "1.99"
    assert "rust-version = 1.99" in choice.reason and "rust:1.96-slim" in choice.reason


def test_msrv_between_images_picks_the_newer_image():
    choice = choose_toolchain(evidence(msrv="1.88.0", edition="2021"), OFFERED)
    assert (choice.version, choice.satisfied) == ("1.96", True)
    assert choice.floor_why.startswith("rust-version = 1.88.0")


def test_lock_format_4_needs_cargo_1_78():
    assert floors(evidence(lock=4))[0] == ("1.78", "Cargo.lock format version 4 (needs cargo 1.78)")
    assert choose_toolchain(evidence(lock=4), ["1.63", "1.70"]).satisfied is False


def test_pinned_toolchain_exact_or_nearest_newer():
    assert choose_toolchain(evidence(channel="1.85.0"), OFFERED).version == "1.85"
    near = choose_toolchain(evidence(channel="1.90"), OFFERED)
    assert near.version == "1.96" and any("not offered" in w for w in near.warnings)


def test_nightly_channel_warns_and_no_offer_is_unsatisfied():
    choice = choose_toolchain(evidence(channel="nightly-2024-05-01"), OFFERED)
    assert choice.version == "1.96" and any("nightly" in w for w in choice.warnings)
    assert choose_toolchain(evidence(), []).version is None
