"""The s3 backend's client: a claim's bucket and user on versitygw, over httpx signed with AWS SigV4 (httpx-auth).

As the admin (versitygw's root or an `admin`-role account) through versitygw's admin API, which answers on the S3
port: an account of role `user` (it sees and reaches only the buckets it owns and cannot create one), a bucket created
for it and owned by it; as the user: a listing of its bucket, proving its credentials. `drop` removes the user, every
object (version) of the bucket, and the bucket. Every request is bounded (connect, read/write) and so is every
exchange as a whole; the admin's and the user's secrets are passed in, never logged and never in a message (redacted
defensively). A failure is a BackendFailure: BackendUnreachable (no answer, a timeout, a 5xx) or
BackendRefused (a 4xx). What versitygw does here was found by running it: docs/test-bed.md "versitygw".
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NamedTuple, TypeVar
from urllib.parse import quote
from xml.etree import ElementTree

import httpx
from httpx_auth import AWS4Auth

from lifecycle.backends.s3 import DropTenant, EnsureBucket, EnsureUser, TryUser
from reconciler.backend_failure import REFUSED, UNREACHABLE, BackendFailure

__all__ = ["CALL_TIMEOUT", "CONNECT_TIMEOUT", "DROP_TIMEOUT", "PAGE", "REGION", "TOTAL_TIMEOUT", "Credentials",
           "S3Client", "drop", "ensure_bucket", "ensure_user", "try_user"]

CONNECT_TIMEOUT = 3.0  # seconds to open the TCP connection
CALL_TIMEOUT = 10.0  # seconds for one request's write and its answer's read
TOTAL_TIMEOUT = 20.0  # seconds for one whole exchange (the few requests of an ensure or a try)
DROP_TIMEOUT = 300.0  # seconds for a whole drop: a page of PAGE deletions per request, as many pages as it takes
PAGE = 1000  # keys per listing and per DeleteObjects (S3's maximum for both)
REGION = "us-east-1"  # versitygw's default --region; the signature's scope must name the gateway's
ROLE = "user"  # never admin (every bucket) nor userplus (creates buckets of its own)
T = TypeVar("T")


class Credentials(NamedTuple):
    """An S3 access key and its secret; its repr (and so its str) never shows the secret."""

    access: str
    secret: str

    def __repr__(self) -> str:
        return f"Credentials(access={self.access!r}, secret=<redacted>)"


class _Session:
    """One signed client on one endpoint, and what a failure message may say (never `secrets`)."""

    def __init__(self, client: httpx.AsyncClient, endpoint: str, secrets: Sequence[str]) -> None:
        self.client, self.endpoint, self.secrets = client, endpoint, secrets

    async def call(self, method: str, path: str, what: str, ok: Sequence[int] = (200,),
                   params: Mapping[str, str] | None = None, content: bytes = b"",
                   headers: Mapping[str, str] | None = None) -> httpx.Response:
        """One request; its response when its status is in `ok`, else BackendFailure naming `what`."""
        resp = await self.client.request(method, path, params=params, content=content, headers=headers)
        if resp.status_code not in ok:
            raise self.failure(resp, what)
        return resp

    def parse(self, resp: httpx.Response) -> ElementTree.Element:
        """An answer's XML document; BackendFailure (unreachable: a garbled answer may not recur) when it is none."""
        try:
            return ElementTree.fromstring(resp.content)
        except ElementTree.ParseError as e:
            raise BackendFailure(UNREACHABLE, f"{self.endpoint}: an unreadable answer to {resp.request.method} "
                                              f"{resp.request.url.path}: {e}") from e

    def failure(self, resp: httpx.Response, what: str) -> BackendFailure:
        code, message = _error(resp)
        reason = UNREACHABLE if resp.status_code >= 500 else REFUSED
        said = f"{code}: {message}" if message else code
        return BackendFailure(reason, _redacted(f"{self.endpoint} answered {what} with HTTP {resp.status_code} {said}",
                                                self.secrets))


async def _exchange(endpoint: str, creds: Credentials, what: str, work: Callable[[_Session], Awaitable[T]],
                    secrets: Sequence[str], region: str, timeout: float = TOTAL_TIMEOUT) -> T:
    """Run `work` on a client signing as `creds`, bounded by `timeout` as a whole; BackendFailure on any failure."""
    secrets = [creds.secret, *secrets]
    # trust_env off: no proxy or netrc from the operator's environment; no redirects (an S3 API answers itself).
    client = httpx.AsyncClient(base_url=endpoint, auth=AWS4Auth(creds.access, creds.secret, region, "s3"),
                               timeout=httpx.Timeout(CALL_TIMEOUT, connect=CONNECT_TIMEOUT), trust_env=False)
    try:
        async with asyncio.timeout(timeout), client:
            return await work(_Session(client, endpoint, secrets))
    except TimeoutError as e:
        raise BackendFailure(UNREACHABLE, f"{endpoint} did not answer {what} within {timeout:g} s") from e
    except httpx.TimeoutException as e:
        raise BackendFailure(UNREACHABLE, f"{endpoint} did not answer {what} in time ({type(e).__name__})") from e
    except (httpx.HTTPError, OSError) as e:
        detail = _redacted(str(e), secrets) or type(e).__name__
        raise BackendFailure(UNREACHABLE, f"{endpoint} could not be reached for {what}: {detail}") from e


async def ensure_user(endpoint: str, admin: Credentials, access: str, secret: str, *, region: str = REGION) -> None:
    """As the admin: account `access` of role `user` whose secret is `secret`: created when absent, else its secret
    and role set again (one write either way: comparing would need list-users, which answers every account's
    secret)."""
    account = _xml("Account", Access=access, Secret=secret, Role=ROLE)
    props = _xml("MutableProps", Secret=secret, Role=ROLE)

    async def work(s: _Session) -> None:
        resp = await s.call("PATCH", "/create-user", f"the admin's create-user {access}", (201, 409), content=account)
        if resp.status_code == 409:
            if _error(resp)[0] != "XAdminUserExists":
                raise s.failure(resp, f"the admin's create-user {access}")
            await s.call("PATCH", "/update-user", f"the admin's update-user {access}", params={"access": access},
                         content=props)

    await _exchange(endpoint, admin, f"the admin's ensure of user {access}", work, [secret], region)


async def ensure_bucket(endpoint: str, admin: Credentials, bucket: str, owner: str, *, region: str = REGION) -> None:
    """As the admin: bucket `bucket` exists, owned by account `owner` (which must exist). A bucket of that name owned
    by another account is refused, never taken over: its data is someone else's."""
    what = f"the admin's create of bucket {bucket} for {owner}"

    async def work(s: _Session) -> None:
        resp = await s.call("PATCH", f"/{_segment(bucket)}/create", what, (201, 409), headers={"x-vgw-owner": owner})
        if resp.status_code == 201 or _error(resp)[0] == "BucketAlreadyOwnedByYou":  # "you": x-vgw-owner
            return
        if _error(resp)[0] != "BucketAlreadyExists":
            raise s.failure(resp, what)
        holder = await _owner(s, bucket)
        if holder != owner:
            raise BackendFailure(REFUSED, f"{endpoint}: bucket {bucket} exists and is owned by {holder}, not {owner}")

    await _exchange(endpoint, admin, what, work, [], region)


async def try_user(endpoint: str, access: str, secret: str, bucket: str, *, region: str = REGION) -> None:
    """As user `access`: list (at most one key of) `bucket`: its credentials work on it."""
    what = f"user {access}'s listing of bucket {bucket}"

    async def work(s: _Session) -> None:
        await s.call("GET", f"/{_segment(bucket)}", what, params={"list-type": "2", "max-keys": "1"})

    await _exchange(endpoint, Credentials(access, secret), what, work, [], region)


async def drop(endpoint: str, admin: Credentials, access: str, bucket: str, *, region: str = REGION,
               timeout: float = DROP_TIMEOUT) -> int:
    """As the admin: delete user `access` (first, so that nothing lands in the bucket while it empties), every object
    version and delete marker of `bucket` in pages, then the bucket; how many object versions went (objects, where
    versioning is off). Open multipart uploads go with the bucket (versitygw's posix backend keeps them inside the
    bucket's directory, and its emptiness check skips them). A missing user or bucket is fine; a bucket owned by
    another account is refused untouched."""
    gone = 0

    async def work(s: _Session) -> None:
        nonlocal gone
        path = f"/{_segment(bucket)}"
        holder = await _owner(s, bucket)
        if holder is not None and holder != access:
            raise BackendFailure(REFUSED, f"{endpoint}: bucket {bucket} is owned by {holder}, not {access}: not "
                                          "dropped")
        await s.call("PATCH", "/delete-user", f"the admin's delete-user {access}", params={"access": access})
        if holder is None:
            return
        gone = await _delete_versions(s, bucket)
        await s.call("DELETE", path, f"the admin's delete of bucket {bucket}", (204, 404))

    await _exchange(endpoint, admin, f"the admin's drop of bucket {bucket} and user {access}", work, [], region,
                    timeout)
    return gone


async def _owner(s: _Session, bucket: str) -> str | None:
    """The account that owns `bucket` (its ACL's Owner), None when there is no such bucket."""
    resp = await s.call("GET", f"/{_segment(bucket)}", f"the admin's read of bucket {bucket}'s owner", (200, 404),
                        params={"acl": ""})
    if resp.status_code == 404:
        return None
    owner = _find(s.parse(resp), "Owner")
    return _text(owner, "ID") if owner is not None else ""


async def _delete_versions(s: _Session, bucket: str) -> int:
    """Delete every version and delete marker of `bucket`, PAGE per DeleteObjects, listing from the start each round
    (what went is no longer listed); how many versions (not markers) went."""
    listed, deleted = f"the admin's listing of bucket {bucket}'s versions", f"the admin's DeleteObjects in {bucket}"
    gone = 0
    previous: frozenset[tuple[str, str]] = frozenset()
    while True:
        listing = s.parse(await s.call("GET", f"/{_segment(bucket)}", listed, params={"versions": "",
                                                                                      "max-keys": str(PAGE)}))
        versions = [(_text(v, "Key"), _text(v, "VersionId")) for v in _all(listing, "Version")]
        markers = [(_text(m, "Key"), _text(m, "VersionId")) for m in _all(listing, "DeleteMarker")]
        page = frozenset(versions + markers)
        if not page:
            return gone
        if page == previous:
            raise BackendFailure(REFUSED, f"{s.endpoint} lists again the {len(page)} objects it said it deleted from "
                                          f"bucket {bucket}")
        body = _delete_body(sorted(page))
        resp = await s.call("POST", f"/{_segment(bucket)}", deleted, params={"delete": ""}, content=body,
                            headers={"Content-MD5": _md5(body)})
        result = s.parse(resp)
        errors = _all(result, "Error")
        if errors:
            first = errors[0]
            raise BackendFailure(REFUSED, _redacted(
                f"{s.endpoint} refused {deleted}: {len(errors)} of {len(page)} objects, the first "
                f"{_text(first, 'Key')!r}: {_text(first, 'Code')}: {_text(first, 'Message')}", s.secrets))
        done = {(_text(d, "Key"), _text(d, "VersionId")) for d in _all(result, "Deleted")}
        gone += len(done & set(versions))
        previous = page


def _delete_body(entries: Sequence[tuple[str, str]]) -> bytes:
    root = ElementTree.Element("Delete")
    ElementTree.SubElement(root, "Quiet").text = "false"  # each Deleted is listed: what is counted
    for key, version in entries:
        entry = ElementTree.SubElement(root, "Object")
        ElementTree.SubElement(entry, "Key").text = key
        if version:
            ElementTree.SubElement(entry, "VersionId").text = version
    return _bytes(root)


def _xml(tag: str, **fields: str) -> bytes:
    """A versitygw admin body: Go's encoding/xml of its struct, one element per field (names as Go spells them)."""
    root = ElementTree.Element(tag)
    for name, value in fields.items():
        ElementTree.SubElement(root, name).text = value
    return _bytes(root)


def _bytes(root: ElementTree.Element) -> bytes:
    text: bytes = ElementTree.tostring(root, encoding="utf-8")  # typeshed says Any for a named encoding
    return text


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]  # S3's answers carry a namespace; versitygw's admin answers do not


def _all(root: ElementTree.Element, name: str) -> list[ElementTree.Element]:
    return [child for child in root if _local(child.tag) == name]


def _find(root: ElementTree.Element, name: str) -> ElementTree.Element | None:
    found = _all(root, name)
    return found[0] if found else None


def _text(root: ElementTree.Element, name: str) -> str:
    found = _find(root, name)
    return (found.text or "") if found is not None else ""


def _error(resp: httpx.Response) -> tuple[str, str]:
    """An S3 error answer's Code and Message (a HEAD's has no body: its status stands for the code)."""
    try:
        root = ElementTree.fromstring(resp.content)
    except ElementTree.ParseError:
        return f"(no S3 error in {len(resp.content)} bytes)" if resp.content else "(no body)", ""
    return _text(root, "Code") or "(no code)", _text(root, "Message")


def _md5(body: bytes) -> str:
    """DeleteObjects' Content-MD5, which versitygw requires (an integrity check, not a security one)."""
    return base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()


def _segment(bucket: str) -> str:
    return quote(bucket, safe="")  # a name with "/" or "?" stays one path segment (versitygw refuses it as a name)


def _redacted(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "<redacted>")
    return text


class S3Client:
    """Carries out the s3 core's calls (lifecycle.backends.s3) as the gateway's admin, or as the claim's user."""

    async def call(self, call: object) -> None:
        if isinstance(call, EnsureUser):
            admin = Credentials(call.admin_access, call.admin_secret)
            await ensure_user(call.endpoint, admin, call.access, call.secret)
        elif isinstance(call, EnsureBucket):
            await ensure_bucket(call.endpoint, Credentials(call.admin_access, call.admin_secret), call.bucket,
                                call.owner)
        elif isinstance(call, TryUser):
            await try_user(call.endpoint, call.access, call.secret, call.bucket)
        elif isinstance(call, DropTenant):
            await drop(call.endpoint, Credentials(call.admin_access, call.admin_secret), call.access, call.bucket)
        else:
            raise TypeError(f"not a versitygw call: {type(call).__name__}")
