"""The one image-reference parser, held to the kubelet's own (tools/kube/imageref: k8s.io/kubernetes/pkg/util/parsers at
the Kubernetes pin): the same references taken and refused, read as the same repository, tag and digest; and the words
of each refusal."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from renderer.imageref import ImageRef, normalized, parse_image, refusal, split_image
from toolchain.tools import tools_dir

DIGEST = "sha256:" + "a" * 64
# What people write, and every rule of the grammar at its edge.
CORPUS = [
    "blog", "blog:latest", "blog:2.0.1", "acme/blog", "ghcr.io/acme/blog:2.0.1", "ghcr.io/acme/Blog:2.0.1",
    "https://ghcr.io/acme/blog:2.0.1", "http://blog", "oci://ghcr.io/a/b", "blog@sha256:abc", "blog:v1:2",
    f"blog@{DIGEST}", f"blog:1@{DIGEST}", f"blog@sha256:{'A' * 64}", f"blog@sha512:{'b' * 128}",
    f"blog@sha384:{'c' * 96}", f"blog@md5:{'d' * 32}", f"blog@sha256:{'e' * 63}", f"blog@{DIGEST}@{DIGEST}",
    "a" * 64, "b" * 63, "index.docker.io/nginx", "docker.io/nginx", "docker.io/library/nginx",
    "registry-1.docker.io/nginx", "localhost/a", "localhost:5000/a/b:c", "localhost", "[::1]:5000/a",
    "[fe80::1]/a", "127.0.0.1:5000/acme/charts", "Foo/bar", "FOO", "a_b.c/x", "a__b/c", "a___b/c", "a--b/c",
    "a-/c", "-a/c", "a/.b", "a//b", "a/b/", "/a", "a:", "a:-x", "a:.x", "a:_x", f"a:{'x' * 128}", f"a:{'x' * 129}",
    "ghcr.io:/a", "ghcr.io:x/a", "gh_cr.io/a", "-gh.io/a", "gh-.io/a", "x" * 256, f"x/{'y' * 254}",
    f"x/{'y' * 253}", f"ghcr.io/{'y' * 255}", f"ghcr.io/{'y' * 256}", "a b", "a\n", " a", "", "a:é", "é/a",
    "ghcr.io/acme/blog:2.0.1\n", "UPPER.io/a:B", "a.b.c/d.e/f_g/h-i:J.k-L_m",
]
ALPHABET = ["a", "b", "Z", "0", "9", ".", "_", "__", "-", "/", ":", "@", "sha256:", "a" * 64, "localhost", "[::1]",
            "5000", "io", " ", "é", "A"]


def kubelet(refs: list[str]) -> list[dict[str, str]]:
    """What the kubelet's parser says of each reference, one process for all."""
    binary = tools_dir() / "bin" / "imageref"
    assert binary.exists(), "the kubelet's image-reference parser is missing: run `tools/setup.sh imageref`"
    stdin = "".join(json.dumps(r) + "\n" for r in refs)
    out = subprocess.run([str(binary)], input=stdin, capture_output=True, text=True, check=True, timeout=120).stdout
    return [json.loads(line) for line in out.splitlines()]


def generated(count: int) -> list[str]:
    """References built from the grammar's significant pieces (seeded: the same every run)."""
    rng = random.Random(33)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 9))) for _ in range(count)]


def test_the_kubelet_takes_and_refuses_exactly_what_the_parser_does() -> None:
    refs = CORPUS + generated(4000)
    verdicts = kubelet(refs)
    assert len(verdicts) == len(refs)
    taken = 0
    for ref, verdict in zip(refs, verdicts, strict=True):
        ours = normalized(ref)
        assert (ours is None) == ("error" in verdict), (ref, verdict, ours)
        assert (refusal(ref) is None) == (ours is not None), ref
        if ours is None:
            continue
        taken += 1
        tag = ours.tag or ("" if ours.digest else "latest")  # the kubelet pulls :latest when neither is written
        assert (ours.repository, tag, ours.digest or "") == (verdict["repository"], verdict.get("tag", ""),
                                                             verdict.get("digest", "")), ref
    assert taken > 200 and len(refs) - taken > 200  # both sides of the grammar are exercised


@pytest.mark.parametrize(("ref", "reason"), [
    ("ghcr.io/acme/Blog:2.0.1", "the repository 'acme/Blog' must be lowercase: 'acme/blog'"),
    ("https://ghcr.io/acme/blog:2.0.1", "an image reference has no scheme: write 'ghcr.io/acme/blog:2.0.1'"),
    ("blog@sha256:abc", "a sha256 digest has 64 hex digits, this one 3"),
    ("blog:v1:2", "it holds more than one ':' after the repository (one tag at most: repository:tag)"),
    (f"blog@sha256:{'A' * 64}", "a sha256 digest is 64 lowercase hex digits (0-9, a-f)"),
    (f"blog@md5:{'d' * 32}", "digest algorithm 'md5' is not sha256, sha384 or sha512"),
    ("blog@latest", "a digest is <algorithm>:<hex digits>, e.g. @sha256:<64 hex digits>"),
    ("a:.x", "tag '.x' is not a tag (letters, digits, '_', '.' and '-', not starting with '.' or '-', at most 128 "
             "characters)"),
    ("a//b", "the repository 'a//b' is not one: lowercase letters and digits, '/' between components, joined inside "
             "one by '.', '_', '__' or '-'"),
    ("gh_cr.io:x/a", "the registry 'gh_cr.io:x' is not a host[:port]"),
    ("a" * 64, "64 hex digits are an image ID, not a reference: write repository@sha256:<hex>"),
    ("ghcr.io/acme/blog:2.0.1\n", "it holds blanks or line breaks"),
    (f"ghcr.io/{'y' * 256}", "the repository is longer than 255 characters"),
])
def test_each_refusal_says_what_to_change(ref: str, reason: str) -> None:
    assert refusal(ref) == reason
    assert "error" in kubelet([ref])[0]


def test_the_classifier_and_the_charts_read_the_same_grammar() -> None:
    assert split_image("nginx") == ("docker.io/library/nginx", None, None)
    assert split_image("registry-1.docker.io/nginx:1") == ("docker.io/library/nginx", "1", None)  # Hub's host
    assert split_image("Not A Reference") == ("Not A Reference", None, None)  # its own repository: fail closed
    assert parse_image("127.0.0.1:5000/acme/charts:0.2") == ImageRef("127.0.0.1:5000", "acme/charts", "0.2", None)
    assert parse_image("acme/charts") == ImageRef(None, "acme/charts", None, None)  # no Docker Hub default
    assert parse_image("ghcr.io/Acme/charts") is None
