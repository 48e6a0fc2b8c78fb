"""Debian's `docker-registry` (distribution 2.8) on loopback, requiring credentials the way real registries do.

Two flavours: `htpasswd` (HTTP Basic, as the Debian package ships it) and `token` (the Docker token protocol
ghcr.io, Docker Hub and Harbor speak: a 401 with `Bearer realm=...`, a token service that checks the Basic
credentials (GET) or the OAuth2 password grant (POST, what containerd sends with a login) and issues a JWT the
registry verifies). The registry is the real one; the token service is a
small one of ours that signs tokens with a certificate the registry trusts (distribution ships none).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import http.server
import json
import secrets
import shutil
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from platform_stack.docker_config import parse_docker_config
from platform_stack.registry.client import connect
from tests.testbed.procs import BedError, ManagedProcess, free_port, tool, wait_for

SERVICE = "apprafter-testbed-registry"
ISSUER = "apprafter-testbed-token-issuer"


@dataclasses.dataclass
class AuthRegistry:
    """A running registry that wants credentials: `user`/`password` may push and pull, `reader` only pull."""

    flavour: str
    host: str
    port: int
    user: str
    password: str
    reader: str
    reader_password: str
    process: ManagedProcess
    token_server: http.server.ThreadingHTTPServer | None = None
    restarts: int = 0
    config: Path | None = None  # the registry's config.yml
    token_handler: type | None = None  # the token service's handler (its signer and users), to serve it elsewhere

    @property
    def url(self) -> str:
        return f"{self.host}:{self.port}"

    def docker_config(self, directory: Path, user: str | None = None, password: str | None = None) -> Path:
        """A DOCKER_CONFIG directory whose config.json holds a login for this registry (as `docker login` writes)."""
        directory.mkdir(parents=True, exist_ok=True)
        auth = base64.b64encode(f"{user or self.user}:{password or self.password}".encode()).decode()
        (directory / "config.json").write_text(json.dumps({"auths": {self.url: {"auth": auth}}}))
        return directory

    def pull_secret(self, name: str, namespace: str) -> dict[str, Any]:
        """A kubernetes.io/dockerconfigjson Secret holding the pull-only login (what a cluster's consumers get)."""
        login = base64.b64encode(f"{self.reader}:{self.reader_password}".encode()).decode()
        config = json.dumps({"auths": {self.url: {"auth": login}}}).encode()
        return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
                "metadata": {"name": name, "namespace": namespace},
                "data": {".dockerconfigjson": base64.b64encode(config).decode()}}

    def down(self) -> None:
        """Stop the registry process (the token service and the stored data stay)."""
        self.process.stop()

    def up(self, timeout: float = 20.0) -> None:
        """Start the registry again as it was (same port, configuration and data) and wait until it challenges."""
        old = self.process
        self.restarts += 1
        self.process = ManagedProcess(old.name, old.argv, old.log_path.with_suffix(f".{self.restarts}.log"),
                                      env=old.env)
        wait_for(f"{old.name} to challenge on /v2/ again",
                 lambda: httpx.get(f"http://{self.url}/v2/", timeout=2).status_code == 401 or None, timeout,
                 self.process)

    def stop(self) -> None:
        self.process.stop()
        if self.token_server is not None:
            self.token_server.shutdown()
            self.token_server.server_close()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class _Signer:
    """An RSA key with a self-signed certificate (no extended key usage: Go accepts it for any use)."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .sign(self.key, hashes.SHA256()))

    def token(self, subject: str, access: list[dict[str, Any]]) -> str:
        header = {"typ": "JWT", "alg": "RS256",
                  "x5c": [base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()]}
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": subject, "aud": SERVICE, "exp": now + 300, "nbf": now - 10, "iat": now,
                  "jti": secrets.token_hex(8), "access": access}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"


def _token_handler(signer: _Signer, users: dict[str, tuple[str, tuple[str, ...]]]) -> type:
    def grant(subject: str, allowed: tuple[str, ...], scopes: list[str]) -> list[dict[str, Any]]:
        access = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": [a for a in actions.split(",") if a in allowed]})
        return access

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            """The OAuth2 password grant (distribution's docs/spec/auth/oauth.md), which containerd tries first when
            it has a login: form fields grant_type, username, password, scope (space-separated), service."""
            length = min(int(self.headers.get("Content-Length") or 0), 65536)
            form = urllib.parse.parse_qs(self.rfile.read(length).decode(errors="replace"))
            user, password = (form.get("username") or [""])[0], (form.get("password") or [""])[0]
            if (form.get("grant_type") or [""])[0] != "password" or user not in users or users[user][0] != password:
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            scopes = [s for field in form.get("scope") or [] for s in field.split()]
            token = signer.token(user, grant(user, users[user][1], scopes))
            body = json.dumps({"access_token": token, "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            query = urllib.parse.urlparse(self.path).query
            scopes = urllib.parse.parse_qs(query).get("scope", [])
            who = self.headers.get("Authorization", "")
            subject = ""
            allowed: tuple[str, ...] = ()
            if who.startswith("Basic "):
                user, _, password = base64.b64decode(who[6:]).decode().partition(":")
                if user not in users or users[user][0] != password:
                    self.send_response(401)
                    self.end_headers()
                    return
                subject, allowed = user, users[user][1]
            body = json.dumps({"token": signer.token(subject, grant(subject, allowed, scopes)),
                               "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextlib.contextmanager
def distribution(workdir: Path, flavour: str) -> Iterator[AuthRegistry]:
    """A registry for the length of the block (a module fixture's): started, then stopped."""
    registry = start_distribution(workdir, flavour)
    try:
        yield registry
    finally:
        registry.stop()


def start_distribution(workdir: Path, flavour: str, timeout: float = 20.0) -> AuthRegistry:
    """Start docker-registry on 127.0.0.1 with `htpasswd` or `token` auth and wait for it to challenge."""
    workdir.mkdir(parents=True, exist_ok=True)
    user, password = "alice", secrets.token_hex(8)
    reader, reader_password = "bob", secrets.token_hex(8)
    port = free_port()
    token_server, handler = None, None
    if flavour == "htpasswd":
        lines = [f"{u}:{bcrypt.hashpw(p.encode(), bcrypt.gensalt(rounds=4)).decode()}"
                 for u, p in ((user, password), (reader, reader_password))]
        (workdir / "htpasswd").write_text("\n".join(lines) + "\n")
        auth = {"htpasswd": {"realm": "apprafter-testbed", "path": str(workdir / "htpasswd")}}
    else:
        signer = _Signer()
        (workdir / "token.crt").write_bytes(signer.cert.public_bytes(serialization.Encoding.PEM))
        users = {user: (password, ("pull", "push")), reader: (reader_password, ("pull",))}
        handler = _token_handler(signer, users)
        token_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=token_server.serve_forever, daemon=True).start()
        realm = f"http://127.0.0.1:{token_server.server_address[1]}/token"
        auth = {"token": {"realm": realm, "service": SERVICE, "issuer": ISSUER,
                          "rootcertbundle": str(workdir / "token.crt")}}
    config = {"version": 0.1, "log": {"level": "warn", "accesslog": {"disabled": True}},
              "storage": {"filesystem": {"rootdirectory": str(workdir / "data")}, "delete": {"enabled": True}},
              "http": {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)}, "auth": auth}
    (workdir / "config.yml").write_text(json.dumps(config))  # JSON is YAML
    proc = ManagedProcess(f"docker-registry-{flavour}", [tool("docker-registry"), "serve", workdir / "config.yml"],
                          workdir / "registry.log")
    registry = AuthRegistry(flavour, "127.0.0.1", port, user, password, reader, reader_password, proc, token_server,
                            config=workdir / "config.yml", token_handler=handler)
    try:
        wait_for(f"docker-registry ({flavour}) to challenge on /v2/",
                 lambda: httpx.get(f"http://{registry.url}/v2/", timeout=2).status_code == 401 or None, timeout, proc)
        return registry
    except BaseException:
        registry.stop()
        raise


def delete_tag(registry: AuthRegistry, repository: str, tag: str) -> None:
    """What a tag deletion does to distribution's storage (its tag link goes, the manifests stay): the bed's
    distribution 2.8 has no tag-delete API (it came with distribution 3), and deleting the manifest would take
    the running digest with it."""
    assert registry.config is not None
    tags = registry.config.parent / "data/docker/registry/v2/repositories" / repository / "_manifests/tags"
    shutil.rmtree(tags / tag)


def tag_digest(registry: AuthRegistry, repository: str, tag: str, workdir: Path) -> str:
    """The digest `repository:tag` names in the registry now (asked with the pusher's login)."""
    config = parse_docker_config((registry.docker_config(workdir / "digest-login") / "config.json").read_bytes(),
                                 "the pusher's config")
    client = connect(registry.url, True, [config], helpers=False)
    try:
        found = client.digest(repository, tag)
    finally:
        client.close()
    if found is None:
        raise BedError(f"{registry.url}/{repository}:{tag} is not in the registry")
    return found
