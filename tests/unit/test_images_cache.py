"""The image cache's keys (bot.engine.images): the debootstrap tarball and the kept image
archives are named by the recipe hash of what they hold, so a changed recipe never reuses a
stale file and an unchanged one always finds its own."""

from __future__ import annotations

from bot.config import load_settings
from bot.engine.images import image_archive, rootfs_key, rootfs_tarball


def _settings(tmp_path, **images):
    return load_settings(None, environ={}, overrides={"images": {"cache_dir": str(tmp_path), **images}})


def test_the_rootfs_key_follows_what_shapes_the_tree(tmp_path):
    plain = _settings(tmp_path)
    assert rootfs_key(plain, "bookworm") == rootfs_key(_settings(tmp_path / "elsewhere"), "bookworm")
    assert rootfs_key(plain, "bookworm") != rootfs_key(plain, "trixie")
    mirrored = _settings(tmp_path, mirror="http://deb.example/debian")
    assert rootfs_key(mirrored, "bookworm") != rootfs_key(plain, "bookworm")
    assert len(rootfs_key(plain, "bookworm")) == 16


def test_a_cached_tarball_of_the_current_recipe_is_reused_without_debootstrap(tmp_path, monkeypatch):
    from bot.engine import images

    settings = _settings(tmp_path)
    cached = tmp_path / f"bookworm-{rootfs_key(settings, 'bookworm')}.tar"
    cached.write_bytes(b"tar")
    monkeypatch.setattr(images, "DEBOOTSTRAP", str(tmp_path / "no-debootstrap-here"))
    assert rootfs_tarball(settings, "bookworm") == cached


def test_a_tarball_of_another_recipe_is_not_reused(tmp_path, monkeypatch):
    import pytest

    from bot.engine import images
    from bot.errors import ImageUnavailableError

    settings = _settings(tmp_path)
    (tmp_path / "bookworm.tar").write_bytes(b"made before tarballs carried their recipe hash")
    other = _settings(tmp_path, mirror="http://deb.example/debian")
    (tmp_path / f"bookworm-{rootfs_key(other, 'bookworm')}.tar").write_bytes(b"another mirror's")
    monkeypatch.setattr(images, "DEBOOTSTRAP", str(tmp_path / "no-debootstrap-here"))
    with pytest.raises(ImageUnavailableError, match="no cached rootfs"):
        rootfs_tarball(settings, "bookworm")


def test_archives_are_named_by_image_and_recipe_hash(tmp_path):
    settings = _settings(tmp_path)
    one = image_archive(settings, "python:3.13-slim", "abc123")
    assert one == tmp_path / "images" / "python_3.13-slim@abc123.tar"
    assert image_archive(settings, "python:3.13-slim", "def456") != one
    assert image_archive(settings, "setupbot/rootfs:bookworm", "abc123").name == "setupbot_rootfs_bookworm@abc123.tar"
