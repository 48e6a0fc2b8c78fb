"""Certificates and keys for the test bed made with `cryptography`: a CA, loopback serving certs, SA keys."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclasses.dataclass(frozen=True)
class ServingCert:
    """PEM files of a certificate (serving or client) and the CA that signed it."""

    ca_pem: bytes
    cert_path: Path
    key_path: Path
    ca_path: Path


class CA:
    """A throwaway certificate authority valid for one day."""

    def __init__(self, name: str = "apprafter-testbed-ca") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def serving_cert(
        self, directory: Path, stem: str, dns_names: tuple[str, ...] = ("localhost",)
    ) -> ServingCert:
        """Write <stem>.crt/.key (SAN IP 127.0.0.1 + dns_names) and ca.crt into `directory`."""
        return self.issue(directory, stem, stem, dns_names=dns_names, ips=("127.0.0.1",))

    def issue(
        self,
        directory: Path,
        stem: str,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        dns_names: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        client: bool = False,
    ) -> ServingCert:
        """Write <stem>.crt/.key and ca.crt into `directory`: a serving certificate for the SANs, or with `client`
        a client certificate (the API server reads the user from CN and the groups from O)."""
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        names.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(names))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        sans += [x509.DNSName(n) for n in dns_names]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        cert = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).sign(self.key, hashes.SHA256())
        cert_path, key_path, ca_path = (
            directory / f"{stem}.crt",
            directory / f"{stem}.key",
            directory / "ca.crt",
        )
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_pem_key(key))
        key_path.chmod(0o600)
        ca_path.write_bytes(self.pem)
        return ServingCert(self.pem, cert_path, key_path, ca_path)


def service_account_keys(directory: Path) -> tuple[Path, Path]:
    """An RSA key pair for kube-apiserver's service-account token signing: (private, public) PEM paths."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    priv, pub = directory / "sa.key", directory / "sa.pub"
    priv.write_bytes(_pem_key(key))
    priv.chmod(0o600)
    pub.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return priv, pub
