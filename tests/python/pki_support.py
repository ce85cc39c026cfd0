"""Certificates for the TLS tests, made by the openssl command in a test's temporary folder (no
key is kept in the repository): a self-signed authority and the certificates it signs."""

import subprocess
from pathlib import Path

import pytest


def openssl(*args, cwd: Path):
    done = subprocess.run(["openssl", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(f"openssl {' '.join(map(str, args))}: {done.stderr}")


def make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed authority (EC P-256): its certificate and key."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
            cwd=directory)
    return cert, key


def sign(directory: Path, ca: tuple[Path, Path], name: str, usage: str, extra: str = "") -> tuple[Path, Path]:
    """A certificate for `name` signed by `ca`, for `usage` (serverAuth or clientAuth)."""
    key, csr, cert = directory / f"{name}-key.pem", directory / f"{name}.csr", directory / f"{name}-cert.pem"
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", f"/CN={name}", cwd=directory)
    ext = directory / f"{name}.ext"
    ext.write_text(f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage={usage}\n{extra}")
    openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
            "-out", cert, "-days", "2", "-extfile", ext, cwd=directory)
    return cert, key
