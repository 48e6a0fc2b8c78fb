"""One reference grammar for image repositories (the classifier) and chart references (the stack)."""

from __future__ import annotations

import pytest

from platform_stack.errors import StackError
from platform_stack.oci import Reference, parse_reference
from renderer.imageref import ImageRef, parse_image, split_image

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(("ref", "expected"), [
    ("nginx", ("docker.io/library/nginx", None, None)),
    ("nginx:1.27", ("docker.io/library/nginx", "1.27", None)),
    ("acme/web:2", ("docker.io/acme/web", "2", None)),
    ("index.docker.io/library/nginx", ("docker.io/library/nginx", None, None)),
    ("ghcr.io/acme/web@" + DIGEST, ("ghcr.io/acme/web", None, DIGEST)),
    ("localhost:5000/a/b:c@" + DIGEST, ("localhost:5000/a/b", "c", DIGEST)),
    ("localhost/a", ("localhost/a", None, None)),
    ("Not A Reference", ("Not A Reference", None, None)),
])
def test_image_repositories_as_docker_reads_them(ref: str, expected: tuple[str, str | None, str | None]) -> None:
    assert split_image(ref) == expected


def test_chart_references_use_the_same_grammar_and_need_a_registry() -> None:
    assert parse_reference("oci://127.0.0.1:5000/acme/charts:0.2.0@" + DIGEST) == Reference(
        "127.0.0.1:5000", "acme/charts", "0.2.0", DIGEST)
    assert parse_image("127.0.0.1:5000/acme/charts") == ImageRef("127.0.0.1:5000", "acme/charts", None, None)
    for bad in ("oci://acme/charts", "oci://ghcr.io/Acme/charts", "oci://ghcr.io/a:b:c", "oci://ghcr.io/"):
        with pytest.raises(StackError, match="reference: expected"):
            parse_reference(bad)
