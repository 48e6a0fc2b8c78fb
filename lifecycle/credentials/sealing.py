"""SealedSecrets' format (bitnami sealed-secrets pkg/crypto, strict scope), without a cluster: a Secret's values
sealed with the controller's certificate into the SealedSecret kubeseal writes, and the objects `apprafter repo creds
add` writes beside it. Only the controller's private key opens what this makes; nothing here keeps the plaintext."""

from __future__ import annotations

import base64
import os
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from lifecycle.credentials.material import MATERIAL_KEYS
from toolchain.errors import Problem, UserError

__all__ = ["SESSION_KEY_BYTES", "certificate_key", "credential_objects", "hybrid_encrypt", "seal", "strict_label"]

SESSION_KEY_BYTES = 32  # AES-256-GCM, one fresh key per value (crypto.HybridEncrypt)
ZERO_NONCE = bytes(12)  # safe there: each session key seals exactly one value
SEALED_API = "bitnami.com/v1alpha1"
BASIC_AUTH = "kubernetes.io/basic-auth"
CREDENTIAL_API = "apprafter.io/v1alpha1"


def strict_label(namespace: str, name: str) -> bytes:
    """The OAEP label of the strict scope (the default): the Secret opens only under this namespace and name."""
    return f"{namespace}/{name}".encode()


def hybrid_encrypt(public_key: rsa.RSAPublicKey, plaintext: bytes, label: bytes,
                   random: Callable[[int], bytes] = os.urandom) -> bytes:
    """crypto.HybridEncrypt: a 2-byte big-endian length, the RSA-OAEP(SHA-256, label) of a fresh session key, then
    the AES-GCM seal of the plaintext under that key with a zero nonce and no associated data."""
    session_key = random(SESSION_KEY_BYTES)
    wrapped = public_key.encrypt(session_key, padding.OAEP(mgf=padding.MGF1(hashes.SHA256()),
                                                           algorithm=hashes.SHA256(), label=label))
    return struct.pack(">H", len(wrapped)) + wrapped + AESGCM(session_key).encrypt(ZERO_NONCE, plaintext, None)


def certificate_key(pem: bytes, where: str) -> rsa.RSAPublicKey:
    """The RSA public key of the controller's certificate (PEM), or the user's error naming where it came from."""
    try:
        key = x509.load_pem_x509_certificate(pem).public_key()
    except (ValueError, UnsupportedAlgorithm) as e:
        raise UserError([Problem(where, 0, 0, "", f"not a PEM certificate: {e}")]) from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise UserError([Problem(where, 0, 0, "", "the certificate's key is not RSA (SealedSecrets seals with RSA)")])
    return key


def seal(public_key: rsa.RSAPublicKey, namespace: str, name: str, secret_type: str,
         values: Mapping[str, str]) -> dict[str, Any]:
    """The SealedSecret kubeseal makes of a Secret `namespace/name` (strict scope): each value sealed on its own,
    the template carrying the Secret's name, namespace and type. Sealing is randomised: the same input gives
    different bytes each time (as kubeseal's)."""
    label = strict_label(namespace, name)
    encrypted = {key: base64.b64encode(hybrid_encrypt(public_key, value.encode(), label)).decode()
                 for key, value in sorted(values.items())}
    return {"apiVersion": SEALED_API, "kind": "SealedSecret", "metadata": {"name": name, "namespace": namespace},
            "spec": {"encryptedData": encrypted,
                     "template": {"metadata": {"name": name, "namespace": namespace}, "type": secret_type}}}


def credential_objects(public_key: rsa.RSAPublicKey, name: str, namespace: str, username: str, password: str,
                       git_prefixes: Sequence[str], registry_hosts: Sequence[str],
                       registry_namespaces: Sequence[str] | None = None,
                       git_projects: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """What `repo creds add` writes: the login sealed as a basic-auth Secret named after the credential, and the
    SourceCredential whose halves name it (a half for each of --git-prefix / --registry-host given; the registry
    half's namespaces and the git half's Argo CD projects as given, None: every one)."""
    username_key, password_key = MATERIAL_KEYS
    sealed = seal(public_key, namespace, name, BASIC_AUTH, {username_key: username, password_key: password})
    backend = {"sealedSecretRef": {"name": name}}
    spec: dict[str, Any] = {}
    if git_prefixes:
        spec["git"] = {"backend": backend, "repoPrefixes": list(git_prefixes)}
        if git_projects is not None:
            spec["git"]["projects"] = list(git_projects)
    if registry_hosts:
        spec["registry"] = {"backend": backend, "hosts": list(registry_hosts)}
        if registry_namespaces is not None:
            spec["registry"]["namespaces"] = list(registry_namespaces)
    credential = {"apiVersion": CREDENTIAL_API, "kind": "SourceCredential",
                  "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    return [sealed, credential]
