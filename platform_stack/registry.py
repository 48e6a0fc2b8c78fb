"""All registry I/O, through oras-py: token (and Basic) challenges answered with the user's credentials, every
call bounded in time and size, every reply checked, and one clear line for each failure (exit 2).

oras-py's own request loop retries any failure five times with sleeps up to 81 s, sends no timeout and reuses
a token whose scope is too narrow; RegistryClient keeps its token flow (TokenAuth) and replaces that loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urljoin, urlsplit

import oras.provider
import requests

from platform_stack.credentials import Credential, DockerConfig, config_paths, credential_for, local_configs
from renderer.yaml_input import Limits, parse
from toolchain.errors import ToolFailure, UserError

__all__ = ["MANIFEST_MEDIA_TYPE", "RegistryClient", "RegistryFailure", "connect"]

MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONNECT_TIMEOUT, READ_TIMEOUT = 5.0, 30.0  # per request: connecting, and each wait for bytes
DEADLINE = 300.0  # per command: every request of it, token requests included
MAX_BODY = 4 << 20  # a manifest is at most 4 MiB (OCI distribution); blobs are streamed with their own cap
MAX_TAGS = 10_000  # tags read from one repository (pages of TAG_PAGE)
TAG_PAGE = 1000
_MANIFEST_LIMITS = Limits(max_bytes=MAX_BODY, max_depth=16, max_nodes=100_000)
_PRINTABLE = re.compile(r"[^\x20-\x7e]")


class RegistryFailure(ToolFailure):
    """The registry refused, failed, timed out or replied with nonsense; the message names what to do."""


def _short(text: Any, limit: int = 120) -> str:
    """A registry's words, made safe to print on one line."""
    return _PRINTABLE.sub("?", str(text))[:limit]


class _BoundedSession(requests.Session):
    """Every request with connect/read timeouts, under one deadline, and bodies read up to MAX_BODY."""

    def __init__(self, host: str, seconds: float) -> None:
        super().__init__()
        self.host, self.seconds, self.deadline = host, seconds, time.monotonic() + seconds

    def request(self, method: str, url: Any, *args: Any, **kwargs: Any) -> requests.Response:
        if time.monotonic() > self.deadline:
            raise RegistryFailure(f"registry {self.host}: not done within the {self.seconds:g}s deadline: retry later")
        kwargs["timeout"] = (CONNECT_TIMEOUT, READ_TIMEOUT)
        wants_stream = kwargs.get("stream", False)
        kwargs["stream"] = True
        response = super().request(method, url, *args, **kwargs)
        if not wants_stream:
            body = bytearray()
            for chunk in response.iter_content(1 << 16):
                body += chunk
                if len(body) > MAX_BODY:
                    response.close()
                    raise RegistryFailure(f"registry {self.host}: a reply larger than {MAX_BODY} bytes: refused")
                if time.monotonic() > self.deadline:
                    raise RegistryFailure(f"registry {self.host}: a reply not done within the {self.seconds:g}s "
                                          "deadline: retry later")
            response._content = bytes(body)  # what requests does after a read, with the cap applied
        return response


def _what(method: str, url: str) -> str:
    """`GET manifest 0.2.0`, `POST blob upload`, ...: the request in a user's words (never a query string)."""
    path = urlsplit(url).path
    if "/manifests/" in path:
        return f"{method} manifest {path.rsplit('/manifests/', 1)[1]}"
    if "/blobs/uploads" in path:
        return f"{method} blob upload"
    if "/blobs/" in path:
        return f"{method} blob"
    return f"{method} {path or '/'}"


class RegistryClient(oras.provider.Registry):  # type: ignore[misc]  # oras-py ships no type information
    """oras-py's registry client for one host, with the caller's credential and bounded requests."""

    def __init__(self, host: str, plain_http: bool, credential: Credential | None, searched: Sequence[str],
                 deadline_s: float | None = None) -> None:
        super().__init__(hostname=host, insecure=plain_http, auth_backend="token")
        self.host, self.plain_http, self.credential, self.searched = host, plain_http, credential, searched
        self.session = self.auth.session = _BoundedSession(host, DEADLINE if deadline_s is None else deadline_s)
        self.auth.load_configs = lambda *args, **kwargs: None  # credentials come from platform_stack.credentials
        if credential is not None:
            self.auth.set_basic_auth(credential.username, credential.password)
        self.last_failure: requests.Response | None = None

    # -- oras-py's request loop, bounded ------------------------------------------------------------------
    def do_request(self, url: str, method: str = "GET", data: Any = None, headers: dict[str, str] | None = None,
                   json: Any = None, stream: bool = False) -> requests.Response:
        """One attempt, and one more after answering a 401 challenge; failures a caller cannot use are raised."""
        headers = dict(headers or {})
        headers.update(self.auth.get_auth_header())
        if self.credential is not None and self.basic_only:
            headers["Authorization"] = f"Basic {self.credential.basic()}"
        with self.guard(_what(method, url)):
            response = self.session.request(method, url, data=data, json=json, headers=headers, stream=stream,
                                            verify=self._tls_verify)
            if response.status_code == 401:
                challenge = response.headers.get("Www-Authenticate", "")
                retry = False
                if challenge.lower().startswith("basic") and self.credential is not None:
                    self.basic_only, retry = True, True
                    headers["Authorization"] = f"Basic {self.credential.basic()}"
                elif challenge.lower().startswith("bearer"):
                    # Always a new token: the cached one may lack this request's scope (pull vs push).
                    headers, retry = self.auth.authenticate_request(response, headers, refresh=True)
                if retry:
                    response = self.session.request(method, url, data=data, json=json, headers=headers,
                                                    stream=stream, verify=self._tls_verify)
        self.check_status(response, _what(method, url))
        return response

    basic_only = False

    def check_status(self, response: requests.Response, what: str) -> None:
        """Raise for the statuses no caller can use; leave 2xx, 404 and other 4xx to the caller."""
        status = response.status_code
        if status < 400 or status == 404:
            return
        self.last_failure = response
        challenge = response.headers.get("Www-Authenticate", "")
        if status == 401 and 'error="insufficient_scope"' in challenge and self.credential is not None:
            scope = re.search(r'scope="([^"]*)"', challenge)
            wanted = _short(scope.group(1), 160) if scope else "this"
            raise RegistryFailure(f"registry {self.host}: {what}: 401 Unauthorized (insufficient_scope): the "
                                  f"credentials from {self.credential.source} may not do {wanted}")
        if status == 401:
            if self.credential is None:
                where = ", ".join(self.searched) or "no Docker or Helm registry config"
                remedy = (f"no credentials for {self.host} (looked in {where}): run `docker login {self.host}` "
                          f"or `helm registry login {self.host}`")
            else:
                remedy = (f"the credentials for {self.host} from {self.credential.source} were refused: log in "
                          "again")
            raise RegistryFailure(f"registry {self.host}: {what}: 401 Unauthorized: {remedy}")
        if status == 403:
            who = f"the credentials from {self.credential.source}" if self.credential else "anonymous access"
            raise RegistryFailure(f"registry {self.host}: {what}: 403 Forbidden: {who} may not do this (check the "
                                  "account's access to the repository)")
        if status == 429:
            raise RegistryFailure(f"registry {self.host}: {what}: 429 Too Many Requests: rate limited, retry later")
        if status >= 500:
            raise RegistryFailure(f"registry {self.host}: {what}: HTTP {status} {_short(response.reason, 40)}: the "
                                  "registry failed, retry later")

    @contextlib.contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Transport failures and oras-py's bare exceptions as one RegistryFailure line."""
        scheme = "http" if self.plain_http else "https"
        try:
            yield
        except (RegistryFailure, UserError):
            raise
        except requests.exceptions.SSLError:
            raise RegistryFailure(f"registry {self.host}: TLS handshake failed (a plain-HTTP registry? then "
                                  "--plain-http)") from None
        except requests.exceptions.Timeout:
            raise RegistryFailure(f"registry {self.host}: {what}: no answer within {READ_TIMEOUT:g}s: retry when it "
                                  "answers") from None
        except requests.exceptions.RequestException as e:
            raise RegistryFailure(f"registry {self.host} unreachable over {scheme} ({type(e).__name__}): start the "
                                  "registry or check --plain-http") from None
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
            # oras-py raises bare exceptions (a failed upload, a token reply that is not JSON, ...).
            raise RegistryFailure(f"registry {self.host}: {what}: {self.failure_words(e)}") from None

    def failure_words(self, error: Exception) -> str:
        response = self.last_failure
        if response is None:
            return f"the reply could not be used ({type(error).__name__})"
        detail = ""
        with contextlib.suppress(UserError):
            body = parse(response.content, "reply", json_only=True, limits=_MANIFEST_LIMITS).data
            errors = body.get("errors") if isinstance(body, dict) else None
            if isinstance(errors, list) and errors and isinstance(errors[0], dict):
                detail = f": {_short(errors[0].get('message', ''))}"
        return f"HTTP {response.status_code} {_short(response.reason, 40)}{detail}"

    def _check_200_response(self, response: requests.Response) -> None:
        if response.status_code not in (200, 201, 202):
            self.last_failure = response
        super()._check_200_response(response)

    # -- what the stack commands do -----------------------------------------------------------------------
    def check(self) -> None:
        """Fail fast (exit 2) when the registry does not answer, or refuses the credentials."""
        scheme = "http" if self.plain_http else "https"
        self.do_request(f"{scheme}://{self.host}/v2/")

    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None:
        """(digest, manifest) of a tag or digest, None when the registry has no such manifest.

        The digest is the sha256 of the bytes received, and must equal the one the registry names (if any):
        the registry is not trusted to name the content it serves.
        """
        scheme = "http" if self.plain_http else "https"
        url = f"{scheme}://{self.host}/v2/{repository}/manifests/{reference}"
        response = self.do_request(url, "GET", headers={"Accept": MANIFEST_MEDIA_TYPE})
        what = f"GET manifest {reference}"
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            self.last_failure = response
            raise RegistryFailure(f"registry {self.host}: {what}: {self.failure_words(ValueError())}")
        digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
        named = response.headers.get("Docker-Content-Digest")
        if named is not None and named != digest:
            raise RegistryFailure(f"registry {self.host}: {what}: the reply's Docker-Content-Digest "
                                  f"{_short(named, 80)} is not the digest of its content ({digest})")
        if reference.startswith("sha256:") and reference != digest:
            raise RegistryFailure(f"registry {self.host}: {what}: served content with digest {digest}")
        return digest, self.parse_manifest(response.content, what)

    def parse_manifest(self, body: bytes, what: str) -> dict[str, Any]:
        """An OCI image manifest, or RegistryFailure saying what is wrong with the reply."""
        try:
            data = parse(body, "reply", json_only=True, limits=_MANIFEST_LIMITS).data
        except UserError as e:
            raise RegistryFailure(f"registry {self.host}: {what}: the reply is not JSON "
                                  f"({_short(e.lines()[0].removeprefix('reply:'))})") from None
        layers = data.get("layers") if isinstance(data, dict) else None
        config = data.get("config") if isinstance(data, dict) else None
        shaped = isinstance(layers, list) and all(isinstance(x, dict) and isinstance(x.get("digest"), str)
                                                  for x in layers)
        if not (shaped and isinstance(config, dict) and isinstance(config.get("digest"), str)):
            raise RegistryFailure(f"registry {self.host}: {what}: the reply is not an OCI image manifest "
                                  "(config and layers with digests)")
        assert isinstance(data, dict)
        return data

    def tags(self, repository: str, page: int = TAG_PAGE) -> list[str] | None:
        """Every tag of `repository` (following the registry's pages of `page` tags), None when the registry has no
        such repository."""
        scheme = "http" if self.plain_http else "https"
        base = f"{scheme}://{self.host}"
        url: str | None = f"{base}/v2/{repository}/tags/list?n={page}"
        found: list[str] = []
        while url is not None:
            response = self.do_request(url, "GET")
            if response.status_code == 404:
                return None
            what = "GET tag list"
            if response.status_code != 200:
                self.last_failure = response
                raise RegistryFailure(f"registry {self.host}: {what}: {self.failure_words(ValueError())}")
            try:
                body = parse(response.content, "reply", json_only=True, limits=_MANIFEST_LIMITS).data
            except UserError:
                raise RegistryFailure(f"registry {self.host}: {what}: the reply is not JSON") from None
            tags = body.get("tags") if isinstance(body, dict) else None
            if tags is None:
                tags = []  # distribution answers `"tags": null` for a repository whose tags were all deleted
            if not isinstance(tags, list) or not all(isinstance(x, str) for x in tags):
                raise RegistryFailure(f"registry {self.host}: {what}: the reply has no list of tags")
            found += tags
            if len(found) > MAX_TAGS:
                raise RegistryFailure(f"registry {self.host}: {what}: more than {MAX_TAGS} tags in {repository}")
            link = response.links.get("next", {}).get("url")
            url = urljoin(base, link) if link else None
            if url is not None and urlsplit(url).netloc != self.host:
                raise RegistryFailure(f"registry {self.host}: {what}: the next page is on another host: refused")
        return found

    def blob(self, repository: str, digest: str, max_bytes: int) -> bytes:
        """The blob `digest` of `repository`, read up to `max_bytes`; its sha256 must be `digest`."""
        scheme = "http" if self.plain_http else "https"
        url = f"{scheme}://{self.host}/v2/{repository}/blobs/{digest}"
        what = f"GET blob {digest}"
        response = self.do_request(url, "GET", stream=True)
        try:
            if response.status_code != 200:
                self.last_failure = response
                detail = "not found" if response.status_code == 404 else f"HTTP {response.status_code}"
                raise RegistryFailure(f"registry {self.host}: {what}: {detail}")
            data = bytearray()
            with self.guard(what):
                for chunk in response.iter_content(1 << 16):
                    data += chunk
                    if len(data) > max_bytes:
                        raise RegistryFailure(f"registry {self.host}: {what}: larger than {max_bytes} bytes: refused")
                    if time.monotonic() > self.session.deadline:
                        raise RegistryFailure(f"registry {self.host}: {what}: not done within the deadline: retry")
        finally:
            response.close()
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise RegistryFailure(f"registry {self.host}: {what}: served content with another digest")
        return bytes(data)

    def push_artifact(self, target: str, files: list[str], config: str, annotations: dict[str, str]) -> None:
        """oras-py's push (blobs, config, manifest) under this client's bounds and credential."""
        with self.guard("push"), contextlib.redirect_stdout(io.StringIO()):
            self.push(target=target, files=files, manifest_config=config, manifest_annotations=annotations,
                      disable_path_validation=True, quiet=True)


def connect(host: str, plain_http: bool, configs: Sequence[DockerConfig] | None = None, *, helpers: bool = True,
            deadline_s: float | None = None) -> RegistryClient:
    """A client for host with the credential the user's Docker/Helm config holds for it (if any); the controller
    passes the configs of a Secret and no credential helpers."""
    logging.getLogger("oras").setLevel(logging.CRITICAL)  # its log lines would echo URLs and reasons
    if configs is None:
        configs, searched = local_configs(), [str(p) for p in config_paths()]
    else:
        searched = [c.display for c in configs]
    return RegistryClient(host, plain_http, credential_for(configs, host, helpers=helpers), searched, deadline_s)
