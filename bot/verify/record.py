"""The machine-readable verification record of one run: checks, charges, rulings, verdict,
sibling outcomes and per-test results with and without the siblings."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import safefs
from bot.redact import global_redactor

RECORD_VERSION = 1


@dataclass
class VerificationRecord:
    image: str
    repo: str
    started: float = field(default_factory=time.time)
    seconds: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)
    services: list[dict[str, Any]] = field(default_factory=list)
    siblings: list[dict[str, Any]] = field(default_factory=list)
    wired_env: list[str] = field(default_factory=list)  # names only: values may be credentials
    tests_without_siblings: dict[str, Any] | None = None
    tests_with_siblings: dict[str, Any] | None = None
    tests_from: str = ""  # where those results come from when this verification did not run them
    attribution: dict[str, Any] | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    charges: list[dict[str, Any]] = field(default_factory=list)
    rulings: list[dict[str, Any]] = field(default_factory=list)
    mutation: dict[str, Any] | None = None
    verdict: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"version": RECORD_VERSION, **self.__dict__}

    def write(self, path: Path, *, repo: Path | None = None) -> Path:
        """Write the record to ``path``. With ``repo`` the path is inside the repository under
        test and goes through the one safe writer: only below .setupbot/, never through a
        symlinked file or folder (a committed `.setupbot/verification.json -> <host file>`
        is refused, SECURITY.md S13). Without it, ``path`` is the operator's own choice."""
        text = global_redactor()(json.dumps(self.to_json(), indent=2, sort_keys=False, default=str)) + "\n"
        if repo is not None:
            root = Path(repo).resolve()
            target = Path(path) if Path(path).is_absolute() else root / path
            rel = Path(os.path.normpath(target.absolute())).relative_to(root).as_posix()
            return safefs.write_text(root, rel, text, allowed=[safefs.RECORDS_DIR])
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    @property
    def tier(self) -> str:
        return str(self.verdict.get("tier", ""))
