"""A claim's bucket and S3 user on the real versitygw (reconciler/backends/s3.py; its S3Client carries out the core's
calls, and refuses a call it does not know): each user reads and writes its own
bucket and reaches no other (403 AccessDenied), creates none and lists only its own; a new secret refuses the old one;
a bucket someone else owns is neither taken nor dropped; `drop` takes objects (every version where the store keeps
versions), bucket and user, twice;
failures say what failed, never a secret, within their time bound. The users' own requests are signed with the
client's library (httpx-auth's AWS4Auth), as an app's S3 client signs them."""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest
from httpx_auth import AWS4Auth

from controller_runtime.outcomes import Requeue, Terminal, outcome_of
from lifecycle.backends.contract import Hidden
from lifecycle.backends.s3 import DropTenant, EnsureBucket, EnsureUser, TryUser
from reconciler.backend_failure import BackendFailure
from reconciler.backends import s3 as s3_admin
from reconciler.backends.s3 import TOTAL_TIMEOUT, Credentials, S3Client, drop, ensure_bucket, ensure_user, try_user
from tests.testbed.s3 import REGION, S3Server, start_s3

ADMIN = Credentials("apprafter-admin", secrets.token_urlsafe(30))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    started = start_s3(Path(tmp_path_factory.mktemp("s3")), ADMIN.access, ADMIN.secret)
    yield started
    started.stop()


def client(store: S3Server, access: str, secret: str) -> httpx.Client:
    """What an app's S3 client does: every request signed as `access`."""
    return httpx.Client(base_url=store.endpoint, auth=AWS4Auth(access, secret, REGION, "s3"), timeout=10,
                        trust_env=False)


def carried_out(*calls: object) -> None:
    """The core's calls, in order, through the client the claim reconciler hands them to."""
    async def each() -> None:
        made = S3Client()
        for call in calls:
            await made.call(call)
    asyncio.run(each())


def provisioned(store: S3Server, name: str) -> tuple[str, str, str]:
    """A claim's user and bucket as the backend makes them (the core's three calls): (access, secret, bucket)."""
    access, secret, bucket = name, Hidden(secrets.token_urlsafe(30)), f"{name}-files"
    admin = (store.endpoint, ADMIN.access, Hidden(ADMIN.secret))
    carried_out(EnsureUser(*admin, access, secret), EnsureBucket(*admin, bucket, access),
                TryUser(store.endpoint, access, secret, bucket))
    return access, secret, bucket


def code(resp: httpx.Response) -> tuple[int, str]:
    """The status and S3 error code of an answer (a HEAD's has no body: its code is "")."""
    if not resp.content:
        return resp.status_code, ""
    found = [e.text or "" for e in ElementTree.fromstring(resp.content) if e.tag.rpartition("}")[2] == "Code"]
    return resp.status_code, found[0] if found else ""


def buckets(resp: httpx.Response) -> list[str]:
    assert resp.status_code == 200, resp.text
    return sorted(e.text or "" for e in ElementTree.fromstring(resp.content).iter()
                  if e.tag.rpartition("}")[2] == "Name")


def refused(call: Coroutine[Any, Any, object]) -> BackendFailure:
    with pytest.raises(BackendFailure) as failure:
        asyncio.run(call)
    return failure.value


def test_each_user_reaches_its_own_bucket_and_nothing_else(store: S3Server) -> None:
    a, a_secret, a_bucket = provisioned(store, "team-a.shop")
    b, b_secret, b_bucket = provisioned(store, "team-b.shop")
    with client(store, a, a_secret) as as_a, client(store, b, b_secret) as as_b:
        assert as_a.put(f"/{a_bucket}/cart/1.json", content=b"a's").status_code == 200
        assert as_b.put(f"/{b_bucket}/cart/1.json", content=b"b's").status_code == 200
        assert as_a.get(f"/{a_bucket}/cart/1.json").content == b"a's"
        assert as_a.get(f"/{a_bucket}", params={"list-type": "2"}).status_code == 200
        assert as_a.delete(f"/{a_bucket}/cart/1.json").status_code == 204

        # B's bucket, its name known: A can neither list, read, write nor delete there, nor its bucket
        denied = (403, "AccessDenied")
        assert code(as_a.get(f"/{b_bucket}", params={"list-type": "2"})) == denied
        assert code(as_a.get(f"/{b_bucket}/cart/1.json")) == denied
        assert code(as_a.put(f"/{b_bucket}/cart/2.json", content=b"x")) == denied
        assert code(as_a.delete(f"/{b_bucket}/cart/1.json")) == denied
        assert code(as_a.delete(f"/{b_bucket}")) == denied
        assert code(as_a.head(f"/{b_bucket}")) == (403, "")
        # nor make a bucket of its own (role `user`: `userplus` could), and ListBuckets shows it its own alone
        assert code(as_a.put(f"/{a}-more")) == denied
        assert buckets(as_a.get("/")) == [a_bucket]
        assert buckets(as_b.get("/")) == [b_bucket]
        assert as_b.get(f"/{b_bucket}/cart/1.json").content == b"b's"  # untouched by all of the above
        # nor the admin API
        assert code(as_a.patch("/list-users")) == (403, "XAdminAccessDenied")


def test_ensuring_again_is_idempotent_and_a_new_secret_refuses_the_old_one(store: S3Server) -> None:
    access, first, bucket = provisioned(store, "team-c.shop")
    with client(store, access, first) as old:
        assert old.put(f"/{bucket}/kept", content=b"1").status_code == 200
        asyncio.run(ensure_user(store.endpoint, ADMIN, access, first))  # the same again: nothing changes
        asyncio.run(ensure_bucket(store.endpoint, ADMIN, bucket, access))
        assert old.get(f"/{bucket}/kept").content == b"1"

        second = secrets.token_urlsafe(30)
        asyncio.run(ensure_user(store.endpoint, ADMIN, access, second))
        assert code(old.get(f"/{bucket}/kept")) == (403, "SignatureDoesNotMatch")
    failure = refused(try_user(store.endpoint, access, first, bucket))
    assert failure.reason == "BackendRefused" and not failure.retryable
    assert str(failure) == (f"{store.endpoint} answered user {access}'s listing of bucket {bucket} with HTTP 403 "
                            "SignatureDoesNotMatch: The request signature we calculated does not match the signature "
                            "you provided. Check your key and signing method.")
    asyncio.run(try_user(store.endpoint, access, second, bucket))
    with client(store, access, second) as new:
        assert new.get(f"/{bucket}/kept").content == b"1"  # the data stays with the account


def test_a_bucket_someone_else_owns_is_neither_taken_nor_dropped(store: S3Server) -> None:
    a, a_secret, a_bucket = provisioned(store, "team-d.shop")
    b, b_secret, b_bucket = provisioned(store, "team-e.shop")
    with client(store, b, b_secret) as as_b:
        assert as_b.put(f"/{b_bucket}/data", content=b"b's").status_code == 200
        taken = refused(ensure_bucket(store.endpoint, ADMIN, b_bucket, a))
        assert str(taken) == f"{store.endpoint}: bucket {b_bucket} exists and is owned by {b}, not {a}"
        dropped = refused(drop(store.endpoint, ADMIN, a, b_bucket))
        assert str(dropped) == f"{store.endpoint}: bucket {b_bucket} is owned by {b}, not {a}: not dropped"
        assert taken.reason == dropped.reason == "BackendRefused"
        assert as_b.get(f"/{b_bucket}/data").content == b"b's"
    asyncio.run(try_user(store.endpoint, a, a_secret, a_bucket))  # A's own stay too


def test_drop_takes_objects_an_open_upload_bucket_and_user_and_a_second_drop_is_fine(
        store: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    access, secret, bucket = provisioned(store, "team-f.shop")
    keys = ["a", "b/c/d.json", "b/e", "odd & <key> é", "z" * 200]
    with client(store, access, secret) as user:
        for key in keys:
            assert user.put(f"/{bucket}/{key}", content=key.encode()).status_code == 200, key
        upload = user.post(f"/{bucket}/big", params={"uploads": ""})
        assert upload.status_code == 200, upload.text
    monkeypatch.setattr(s3_admin, "PAGE", 2)  # three pages of listings and deletions
    assert asyncio.run(drop(store.endpoint, ADMIN, access, bucket)) == len(keys)
    with client(store, ADMIN.access, ADMIN.secret) as admin:
        assert code(admin.head(f"/{bucket}")) == (404, "")
    assert not (store.data / bucket).exists()
    with client(store, access, secret) as user:
        assert code(user.get("/")) == (403, "InvalidAccessKeyId")
    assert refused(try_user(store.endpoint, access, secret, bucket)).reason == "BackendRefused"
    assert asyncio.run(drop(store.endpoint, ADMIN, access, bucket)) == 0
    carried_out(DropTenant(store.endpoint, ADMIN.access, Hidden(ADMIN.secret), access, bucket))  # the client's


def test_the_client_drops_through_the_cores_call_and_refuses_a_call_it_does_not_know(store: S3Server) -> None:
    access, secret, bucket = provisioned(store, "team-h.shop")
    with client(store, access, secret) as user:
        assert user.put(f"/{bucket}/x", content=b"x").status_code == 200
        carried_out(DropTenant(store.endpoint, ADMIN.access, Hidden(ADMIN.secret), access, bucket))
        assert code(user.get(f"/{bucket}/x")) == (403, "InvalidAccessKeyId")
    assert not (store.data / bucket).exists()
    with pytest.raises(TypeError, match="not a versitygw call: tuple"):
        carried_out((store.endpoint, access))


def test_failures_name_what_failed_never_a_secret(store: S3Server) -> None:
    user_secret, wrong = secrets.token_urlsafe(30), Credentials(ADMIN.access, secrets.token_urlsafe(30))
    failures = [refused(ensure_user(store.endpoint, wrong, "team-g.shop", user_secret)),
                refused(ensure_bucket(store.endpoint, wrong, "team-g.shop-files", "team-g.shop")),
                refused(drop(store.endpoint, wrong, "team-g.shop", "team-g.shop-files")),
                refused(ensure_bucket(store.endpoint, ADMIN, "team-g.shop-files", "no-such-user"))]
    asyncio.run(ensure_user(store.endpoint, ADMIN, "team-g.shop", user_secret))
    failures += [refused(ensure_bucket(store.endpoint, ADMIN, "Not_A_Bucket", "team-g.shop")),
                 refused(try_user(store.endpoint, "team-g.shop", user_secret, "team-g.shop-files")),
                 refused(try_user(store.endpoint, "team-g.shop", wrong.secret, "team-g.shop-files"))]
    assert [f.reason for f in failures] == ["BackendRefused"] * len(failures)
    assert str(failures[0]) == (f"{store.endpoint} answered the admin's create-user team-g.shop with HTTP 403 "
                                "SignatureDoesNotMatch: The request signature we calculated does not match the "
                                "signature you provided. Check your key and signing method.")
    assert str(failures[3]) == (f"{store.endpoint} answered the admin's create of bucket team-g.shop-files for "
                                "no-such-user with HTTP 404 XAdminUserNotFound: No user exists with the provided "
                                "access key ID.")
    assert str(failures[4]).endswith(" with HTTP 400 InvalidBucketName: The specified bucket is not valid.")
    assert str(failures[5]).endswith(" with HTTP 404 NoSuchBucket: The specified bucket does not exist.")
    assert " with HTTP 403 SignatureDoesNotMatch: " in str(failures[6])
    for failure in failures:
        said = f"{failure} {failure!r} {failure.__cause__!r}"
        assert ADMIN.secret not in said and wrong.secret not in said and user_secret not in said
    assert repr(ADMIN) == f"Credentials(access='{ADMIN.access}', secret=<redacted>)" == str(ADMIN)
    # the root's secret reached versitygw through its environment: neither its command line nor its log shows one
    shown = Path(f"/proc/{store.process.popen.pid}/cmdline").read_bytes().decode() + store.process.log_text()
    assert ADMIN.secret not in shown and user_secret not in shown and "--quiet" in shown


def test_no_answer_is_unreachable_within_the_bound_and_requeued() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        quiet = refused(try_user(endpoint, "u", "p", "b"))
        assert time.monotonic() - started < TOTAL_TIMEOUT + 2
    assert quiet.reason == "BackendUnreachable" and quiet.retryable and endpoint in str(quiet)
    closed = refused(ensure_user(endpoint, ADMIN, "u", "secret"))  # the socket is closed: connection refused
    assert closed.reason == "BackendUnreachable" and str(closed).startswith(f"{endpoint} could not be reached for ")
    assert isinstance(outcome_of(closed), Requeue)
    assert isinstance(outcome_of(BackendFailure("BackendRefused", "no")), Terminal)


def test_drop_takes_every_version_and_delete_marker_where_the_store_keeps_versions(tmp_path: Path) -> None:
    versioned = start_s3(tmp_path, ADMIN.access, ADMIN.secret, versioning=True)
    try:
        access, secret, bucket = provisioned(versioned, "team-h.shop")
        with client(versioned, access, secret) as user:
            on = b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"
            assert user.put(f"/{bucket}", params={"versioning": ""}, content=on).status_code == 200
            for body in (b"1", b"2", b"3"):
                assert user.put(f"/{bucket}/cart", content=body).status_code == 200
            assert user.put(f"/{bucket}/other", content=b"x").status_code == 200
            assert user.delete(f"/{bucket}/cart").status_code == 204  # a delete marker over three versions
            assert code(user.get(f"/{bucket}/cart")) == (404, "NoSuchKey")
        assert asyncio.run(drop(versioned.endpoint, ADMIN, access, bucket)) == 4
        with client(versioned, ADMIN.access, ADMIN.secret) as admin:
            assert code(admin.head(f"/{bucket}")) == (404, "")
        assert [p.name for p in (tmp_path / "versions").iterdir()] == []
    finally:
        versioned.stop()
