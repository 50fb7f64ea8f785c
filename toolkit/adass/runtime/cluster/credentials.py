"""TLS credentials for Dask: generated ones for an embedded cluster, a user's files for an external one.

An embedded cluster's scheduler and workers accept only peers that present this run's certificate;
the key lives in this process's memory and in its workers', never in a file another user could read.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from distributed.security import Security

from ...failures import RunFailure
from ...registry import SpecError

__all__ = ["temporary_security", "user_security"]

_ROLES = ("client", "scheduler", "worker")


def temporary_security() -> Security:
    """A Security with a new self-signed key and certificate for every role, encryption required.

    Dask's ``Security.temporary()`` needs the ``cryptography`` package; without it the pair comes
    from the ``openssl`` command, written to a private temporary folder and read back at once.
    """
    try:
        return Security.temporary()
    except ImportError:
        pass
    with tempfile.TemporaryDirectory(prefix="adass-tls-") as folder:  # mode 0700
        key, cert = Path(folder) / "key.pem", Path(folder) / "cert.pem"
        command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                   "-days", "30", "-subj", "/CN=dask-internal", "-addext", "subjectAltName=DNS:dask-internal"]  # fmt: skip
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as err:
            raise RunFailure(f"cannot make TLS credentials for the embedded cluster (openssl: {type(err).__name__}); "
                             "install the cryptography package or openssl") from None  # fmt: skip
        key_text, cert_text = key.read_text(), cert.read_text()
    roles = {
        f"tls_{role}_{kind}": text
        for role in _ROLES
        for kind, text in (("key", key_text), ("cert", cert_text))
    }
    return Security(require_encryption=True, tls_ca_file=cert_text, **roles)


def user_security(ca: str, cert: str, key: str) -> Security | None:
    """The client's credentials for an external cluster from ``--tls-ca/--tls-cert/--tls-key`` (None if none)."""
    given = {"--tls-ca": ca, "--tls-cert": cert, "--tls-key": key}
    if not any(given.values()):
        return None
    for flag, path in given.items():
        if not path:
            raise SpecError(f"{flag}: needed with {', '.join(f for f, p in given.items() if p)}")
    for flag, path in given.items():
        if not Path(path).expanduser().is_file():
            raise SpecError(f"{flag}: {path!r} is not a readable file")
    return Security(require_encryption=True, tls_ca_file=str(Path(ca).expanduser()),
                    tls_client_cert=str(Path(cert).expanduser()), tls_client_key=str(Path(key).expanduser()))  # fmt: skip
