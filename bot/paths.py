"""Where the packaged resources live, for editable and regular installs alike."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def templates_dir() -> Path:
    """The Jinja templates: ``templates/`` in a checkout, ``bot/templates`` when installed."""
    checkout = PACKAGE_DIR.parent / "templates"
    if checkout.is_dir():
        return checkout
    import bot.templates  # installed through package-dir mapping

    return Path(bot.templates.__file__).resolve().parent
