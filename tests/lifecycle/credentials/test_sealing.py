"""SealedSecrets' format as lifecycle.credentials.sealing writes it, opened by a decryption written out from the
controller's pkg/crypto (singleDecrypt) with the private key the test generates; the real controller and kubeseal are
the twin (tests/reconciler/test_repo_creds_cluster.py)."""

from __future__ import annotations

import base64
import datetime
import struct

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509.oid import NameOID

from lifecycle.credentials.sealing import certificate_key, credential_objects, seal
from lifecycle.credentials.spec import check
from toolchain.errors import UserError


def _certificate(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sealed-secret")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=4096)  # the controller's default size


def _open(key: rsa.RSAPrivateKey, sealed: str, label: bytes) -> bytes:
    """singleDecrypt: 2-byte length, RSA-OAEP(SHA-256, label) session key, AES-256-GCM with a zero nonce."""
    data = base64.b64decode(sealed)
    (length,) = struct.unpack(">H", data[:2])
    session = key.decrypt(data[2:2 + length], padding.OAEP(mgf=padding.MGF1(hashes.SHA256()),
                                                            algorithm=hashes.SHA256(), label=label))
    assert len(session) == 32
    return AESGCM(session).decrypt(bytes(12), data[2 + length:], None)


def test_each_value_opens_with_the_private_key_under_the_strict_label_only(private_key: rsa.RSAPrivateKey) -> None:
    public = certificate_key(_certificate(private_key), "cert.pem")
    sealed = seal(public, "apprafter-system", "myorg", "kubernetes.io/basic-auth",
                  {"username": "deploy", "password": "s3cret\u00e9"})
    assert sealed["metadata"] == {"name": "myorg", "namespace": "apprafter-system"}
    assert sealed["spec"]["template"] == {"metadata": {"name": "myorg", "namespace": "apprafter-system"},
                                          "type": "kubernetes.io/basic-auth"}
    encrypted = sealed["spec"]["encryptedData"]
    assert _open(private_key, encrypted["username"], b"apprafter-system/myorg") == b"deploy"
    assert _open(private_key, encrypted["password"], b"apprafter-system/myorg") == "s3cret\u00e9".encode()
    assert struct.unpack(">H", base64.b64decode(encrypted["password"])[:2]) == (512,)  # a 4096-bit key's block
    with pytest.raises(ValueError):  # another name (or namespace) does not open it: the strict scope
        _open(private_key, encrypted["password"], b"apprafter-system/other")
    again = seal(public, "apprafter-system", "myorg", "kubernetes.io/basic-auth", {"password": "s3cret\u00e9"})
    assert again["spec"]["encryptedData"]["password"] != encrypted["password"]  # a fresh session key each time
    assert "s3cret" not in str(sealed)


def test_add_writes_a_credential_the_rules_accept_and_naming_the_sealed_secret(private_key: rsa.RSAPrivateKey) -> None:
    public = certificate_key(_certificate(private_key), "cert.pem")
    sealed, credential = credential_objects(public, "myorg", "apprafter-system", "deploy", "pw", ["github.com/myorg/"],
                                            ["ghcr.io/myorg/"])
    assert sealed["kind"] == "SealedSecret" and sealed["metadata"]["name"] == "myorg"
    assert credential["spec"] == {"git": {"backend": {"sealedSecretRef": {"name": "myorg"}},
                                          "repoPrefixes": ["github.com/myorg/"]},
                                  "registry": {"backend": {"sealedSecretRef": {"name": "myorg"}},
                                               "hosts": ["ghcr.io/myorg/"]}}
    assert check(credential, "apprafter-system") == []
    _, git_only = credential_objects(public, "g", "apprafter-system", "u", "p", ["github.com/o/"], [])
    assert set(git_only["spec"]) == {"git"}


def test_a_certificate_that_is_not_one_or_not_rsa_is_the_users_error() -> None:
    with pytest.raises(UserError, match=r"^cert.pem: not a PEM certificate"):
        certificate_key(b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n", "cert.pem")
    with pytest.raises(UserError, match="is not RSA"):
        certificate_key(_certificate(ec.generate_private_key(ec.SECP256R1())), "cert.pem")
