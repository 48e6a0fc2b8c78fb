"""The serving certificate: one TLS context whose certificate and key are reloaded in place when their files change.

cert-manager rotates the Secret the pod mounts; the kubelet swaps the files atomically, a hand rotation may
write one file before the other. A candidate pair is read into memory and proven to load (key matches
certificate) in a scratch context before the live context takes it, so a half-written pair never serves:
the current certificate stays until both files agree. Connections already open keep theirs; new
handshakes get the new one.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import ssl
import tempfile
from pathlib import Path

from cryptography import x509

log = logging.getLogger("apprafter.webhook")


@dataclasses.dataclass(frozen=True)
class Loaded:
    """What is serving now (for logs and readiness): serial number and validity end."""

    serial: int
    not_after: datetime.datetime


def _new_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    return context


class ReloadingCertificate:
    """A server SSLContext bound to a certificate file and a key file, reloaded by `reload_if_changed()`."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.context = _new_context()
        self._stamp = self._file_stamp()
        self.loaded = self._load()

    def _file_stamp(self) -> tuple[int, ...]:
        """Identity of both files' current content (stat follows the kubelet's ..data symlink swap)."""
        stamp: list[int] = []
        for path in (self.cert_file, self.key_file):
            st = os.stat(path)
            stamp += [st.st_ino, st.st_mtime_ns, st.st_size]
        return tuple(stamp)

    def _load(self) -> Loaded:
        """Load the pair into the live context, or raise (ssl.SSLError, ValueError, OSError) leaving it as it was."""
        cert_pem, key_pem = self.cert_file.read_bytes(), self.key_file.read_bytes()
        cert = x509.load_pem_x509_certificate(cert_pem)
        with tempfile.TemporaryDirectory(prefix="apprafter-webhook-tls-") as tmp:
            cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            for path, data in ((cert_path, cert_pem), (key_path, key_pem)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            _new_context().load_cert_chain(cert_path, key_path)  # proves the pair before the live context sees it
            self.context.load_cert_chain(cert_path, key_path)
        return Loaded(cert.serial_number, cert.not_valid_after_utc)

    def reload_if_changed(self) -> bool:
        """Reload when either file changed; True when a new certificate now serves. A pair that does not load
        (half-written, mismatched) is logged and retried on the next call; the current one keeps serving."""
        try:
            stamp = self._file_stamp()
        except OSError as e:
            log.warning("certificate files unreadable, keeping the current certificate: %s", e)
            return False
        if stamp == self._stamp:
            return False
        try:
            loaded = self._load()
        except (OSError, ValueError, ssl.SSLError) as e:
            log.warning("new certificate/key pair does not load yet, keeping serial %x: %s", self.loaded.serial, e)
            return False
        self._stamp, self.loaded = stamp, loaded
        log.info("serving certificate reloaded: serial %x, valid until %s", loaded.serial, loaded.not_after.isoformat())
        return True

    def valid(self, now: datetime.datetime | None = None) -> bool:
        """Whether the certificate serving now is still within its validity."""
        return (now or datetime.datetime.now(datetime.UTC)) < self.loaded.not_after
