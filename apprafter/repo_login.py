"""What `apprafter repo creds add` seals with: the login (from a Secret manifest or stdin, never argv; one line each,
never printed) and the SealedSecrets controller's certificate (a file, a URL, or the controller's Service through the
API server's proxy, as kubeseal fetches it); and the errors every `repo creds` command says them with."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from controller_runtime.kinds import GroupVersionKind
from lifecycle.credentials.material import MATERIAL_KEYS
from toolchain.errors import Problem, ToolFailure, UserError

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube

__all__ = ["MAX_MATERIAL", "cert_from", "cert_from_cluster", "environment", "fail", "login_from_secret", "one_line",
           "password_from_stdin"]

SERVICE = GroupVersionKind("v1", "Service")
MAX_MATERIAL = 64 * 1024  # bytes read from --from-secret, stdin or a certificate


def fail(where: str, message: str) -> UserError:
    return UserError([Problem(where, 0, 0, "", message)])


def environment(message: str, remedy: str) -> ToolFailure:
    """A failure of the cluster or the controller (exit 2), with its remedy."""
    return ToolFailure(f"{message}: {remedy}")


def one_line(value: str, where: str, key: str) -> str:
    if not value or "\n" in value or "\r" in value:
        raise fail(where, f"{key}: one non-empty line of UTF-8 (the value is not shown)")
    return value


def login_from_secret(path: Path) -> tuple[str, str]:
    """username and password from a Secret manifest (data: base64, or stringData), YAML or JSON."""
    import base64
    import binascii

    import yaml

    where = str(path)
    try:
        raw = path.read_bytes()[:MAX_MATERIAL + 1]
    except OSError as e:
        raise fail(where, f"cannot read it: {e.strerror}") from None
    if len(raw) > MAX_MATERIAL:
        raise fail(where, f"larger than {MAX_MATERIAL} bytes: not a Secret manifest")
    try:
        document = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        raise fail(where, "not a YAML or JSON Secret manifest (the content is not shown)") from None
    if not isinstance(document, Mapping) or document.get("kind") != "Secret":
        raise fail(where, "kind: a Secret manifest (kind: Secret, keys username and password)")
    values: dict[str, str] = {}
    string_data, data = document.get("stringData") or {}, document.get("data") or {}
    for key in MATERIAL_KEYS:
        if isinstance(string_data, Mapping) and isinstance(string_data.get(key), str):
            values[key] = string_data[key]
        elif isinstance(data, Mapping) and isinstance(data.get(key), str):
            try:
                values[key] = base64.b64decode(data[key], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise fail(where, f"data.{key}: not base64 of UTF-8 text (the value is not shown)") from None
        else:
            raise fail(where, f"{key}: missing (stringData.{key} or data.{key}; kubernetes.io/basic-auth's keys)")
        one_line(values[key], where, key)
    return values["username"], values["password"]


def password_from_stdin() -> str:
    raw = sys.stdin.buffer.read(MAX_MATERIAL + 1)
    if len(raw) > MAX_MATERIAL:
        raise fail("<stdin>", f"larger than {MAX_MATERIAL} bytes: not a password")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise fail("<stdin>", "password: not UTF-8 (the value is not shown)") from None
    return one_line(text.removesuffix("\n").removesuffix("\r"), "<stdin>", "password")


def cert_from(source: str) -> bytes:
    """The certificate from a file or an http(s) URL (kubeseal --cert), bounded."""
    if source.startswith(("http://", "https://")):
        import httpx

        try:
            with httpx.Client(timeout=15.0) as client, client.stream("GET", source) as response:
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_MATERIAL:
                        raise fail(source, f"larger than {MAX_MATERIAL} bytes: not a certificate")
                if response.status_code != 200:
                    raise environment(f"GET {source}: HTTP {response.status_code}",
                                      "check --cert (the controller serves /v1/cert.pem)")
                return body
        except httpx.HTTPError as e:
            raise environment(f"GET {source}: {e}", "check --cert and that the controller is reachable") from None
    try:
        return Path(source).read_bytes()[:MAX_MATERIAL]
    except OSError as e:
        raise fail(source, f"cannot read the certificate: {e.strerror}") from None


async def cert_from_cluster(kube: Kube, name: str, namespace: str) -> bytes:
    """The certificate as kubeseal fetches it: the controller's Service's first port, through the API server's
    service proxy (GET .../services/http:NAME:PORT/proxy/v1/cert.pem)."""
    service = await kube.get(SERVICE, name, namespace)
    if service is None:
        raise environment(f"no Service {namespace}/{name}: the SealedSecrets controller's certificate cannot be "
                          "fetched", "pass --controller-name/--controller-namespace, or --cert FILE|URL")
    ports = (service.get("spec") or {}).get("ports") or [{}]
    port = ports[0].get("name") or str(ports[0].get("port", ""))
    path = f"/api/v1/namespaces/{namespace}/services/http:{name}:{port}/proxy/v1/cert.pem"
    response = await kube.http.get(path)
    if response.status_code != 200:
        raise environment(f"GET {path}: HTTP {response.status_code}",
                          "is the SealedSecrets controller running? Or pass --cert FILE|URL")
    return bytes(response.content[:MAX_MATERIAL])
