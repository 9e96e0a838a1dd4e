"""Extra CA certificates (setting ``ca.file``).

Behind a TLS-intercepting proxy nothing inside a container can reach PyPI until it trusts the
proxy's CA. The engine injects the bundle into runner containers, image builds and stand-in
images, and never into a Dockerfile that setupbot writes for a repository (the bundle is a
property of this machine, not of the project).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.errors import ConfigError
from bot.paths import templates_dir

# Where the bundle lives inside a container, and the variables that point tools at it.
CONTAINER_EXTRA = "/usr/local/share/ca-certificates/setupbot-extra-ca.crt"
CONTAINER_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
CA_ENV = {
    "SSL_CERT_FILE": CONTAINER_BUNDLE,
    "REQUESTS_CA_BUNDLE": CONTAINER_BUNDLE,
    "PIP_CERT": CONTAINER_BUNDLE,
    "CURL_CA_BUNDLE": CONTAINER_BUNDLE,
    "NODE_EXTRA_CA_CERTS": CONTAINER_EXTRA,
}
CA_LABEL = "setupbot.ca"
MERGE_SCRIPT = "ca-merge.sh"


@dataclass(frozen=True)
class CABundle:
    path: Path
    pem: bytes

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.pem).hexdigest()[:16]

    def write_context(self, directory: Path) -> None:
        """Put the bundle and the merge script into a build context directory."""
        (directory / "setupbot-extra-ca.crt").write_bytes(self.pem)
        shutil.copyfile(templates_dir() / "images" / MERGE_SCRIPT, directory / "setupbot-ca-merge.sh")


def resolve_ca_bundle(setting: str, environ: Mapping[str, str] | None = None) -> CABundle | None:
    """``"auto"``: the host's SSL_CERT_FILE, else REQUESTS_CA_BUNDLE, when set (even when it is
    the distribution path: behind a proxy the distribution bundle is where its CA was added).
    ``""``: no extra CA. Anything else: a PEM file path."""
    environ = os.environ if environ is None else environ
    setting = (setting or "").strip()
    if not setting:
        return None
    if setting == "auto":
        for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
            candidate = environ.get(name, "").strip()
            if candidate and Path(candidate).is_file():
                return _load(Path(candidate), f"{name} (ca.file: auto)")
        return None
    return _load(Path(setting).expanduser(), "ca.file")


def _load(path: Path, origin: str) -> CABundle:
    try:
        pem = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{origin}: cannot read the CA bundle {path}: {exc.strerror}",
            'Point ca.file at a readable PEM file, or set ca.file to "" to disable.',
        ) from exc
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise ConfigError(
            f"{origin}: {path} holds no PEM certificate",
            'Point ca.file at a PEM bundle, or set ca.file to "" to disable.',
        )
    return CABundle(path=path, pem=pem)
