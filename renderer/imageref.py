"""Image references as the kubelet reads them (distribution/reference's grammar and ParseNormalizedNamed, go-digest's
check): the one parser, and why a reference is refused, in words that say what to change.

The kubelet parses a container's image with k8s.io/kubernetes/pkg/util/parsers.ParseImageName (distribution/reference
v0.6.0 at Kubernetes v1.34) and leaves a Pod it cannot parse in InvalidImageName (containerd's CRI plugin, which pulls
what the kubelet took, normalises it with the same grammar: ParseDockerRef, docs/dependencies.md); the API server takes
any string. So a reference it refuses is an error in every edge (renderer.validate.check_environment); ':latest' and
untagged are lint's warnings (renderer.lint). The classifier (same repository?) and the stack's chart references
(`oci://`) read the same grammar. tests/renderer/test_imageref.py holds the decision to the kubelet's own parser
(tools/kube/imageref). `is_loopback`: whether the registry host a reference names is this machine's, the one such
rule (every registry client asks a loopback registry over plain HTTP).
"""

from __future__ import annotations

import functools
import re

from toolchain.record import Record

__all__ = ["DOCKER_HUB", "ImageRef", "is_digest_pinned", "is_loopback", "normalized", "parse_image", "refusal",
           "split_image"]

DOCKER_HUB = "docker.io"
_HUB_ALIASES = ("registry-1.docker.io",)  # Docker Hub's host: the classifier's "same repository" reads it as docker.io
_LIBRARY = "library/"
MAX_REPOSITORY = 255  # distribution's RepositoryNameTotalLengthMax, counted on the path (not the registry)
# go-digest's algorithms (the kubelet links sha256 and sha512) and their lowercase hex lengths.
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")

# distribution/reference's regexp.go, term by term (Go's \w and [[:xdigit:]] are ASCII: re.ASCII).
_ALNUM = "[a-z0-9]+"
_COMPONENT = f"{_ALNUM}(?:(?:[._]|__|[-]+){_ALNUM})*"
_PATH = f"{_COMPONENT}(?:/{_COMPONENT})*"
_DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_TAG = r"\w[\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_TAIL = rf"(?P<path>{_PATH})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?"
_PATTERNS = {"reference": rf"(?:(?P<domain>{_DOMAIN})/)?{_TAIL}", "remote": _TAIL, "domain": _DOMAIN, "path": _PATH,
             "tag": _TAG, "identifier": "[a-f0-9]{64}", "scheme": "[A-Za-z][A-Za-z0-9+.-]*"}


@functools.cache
def _compiled(name: str) -> re.Pattern[str]:
    """A pattern compiled on first use: render needs two, and compiling all costs the plugin's start-up ~1 ms."""
    return re.compile(_PATTERNS[name], re.ASCII)


def _full(name: str, text: str) -> re.Match[str] | None:
    return _compiled(name).fullmatch(text)


class ImageRef(Record):  # a Record, not a dataclass or typing.NamedTuple: start-up (toolchain.record)
    """A parsed reference: the registry (None when none is written: raw parses only), the repository path, the tag
    and the digest (None when not written)."""

    domain: str | None
    path: str
    tag: str | None
    digest: str | None

    @property
    def repository(self) -> str:
        return f"{self.domain}/{self.path}" if self.domain else self.path


def _split_docker_domain(name: str) -> tuple[str, str]:
    """(registry, rest) as distribution's splitDockerDomain: the first component is a registry when it is
    localhost, holds '.' or ':', or has an uppercase letter (repositories are lowercase); else Docker Hub, where a
    one-component name is an official image (library/)."""
    first, sep, rest = name.partition("/")
    if not sep:
        return DOCKER_HUB, _LIBRARY + name
    if first == "index.docker.io":
        domain, rest = DOCKER_HUB, rest
    elif first == "localhost" or "." in first or ":" in first or first.lower() != first:
        domain = first
    else:
        domain, rest = DOCKER_HUB, name
    if domain == DOCKER_HUB and "/" not in rest:
        rest = _LIBRARY + rest
    return domain, rest


def _digest_problem(digest: str) -> str | None:
    """go-digest's Validate, in words: None when the digest is one the kubelet takes."""
    algorithm, _, hex_digits = digest.partition(":")
    want = DIGEST_HEX.get(algorithm)
    if want is None:
        return f"digest algorithm {algorithm!r} is not sha256, sha384 or sha512"
    if len(hex_digits) != want:
        return f"a {algorithm} digest has {want} hex digits, this one {len(hex_digits)}"
    if not re.fullmatch(f"[a-f0-9]{{{want}}}", hex_digits):
        return f"a {algorithm} digest is {want} lowercase hex digits (0-9, a-f)"
    return None


def normalized(ref: str) -> ImageRef | None:
    """The reference as the kubelet reads it (registry and path normalised: `blog` is docker.io/library/blog), or
    None when the kubelet refuses it. The tag stays None when none is written (the kubelet then pulls :latest)."""
    if _full("identifier", ref):
        return None  # an image ID, which distribution refuses as a name
    domain, rest = _split_docker_domain(ref)
    if rest.split(":", 1)[0].lower() != rest.split(":", 1)[0]:
        return None
    m = _full("reference", f"{domain}/{rest}")
    if m is None or len(m["path"]) > MAX_REPOSITORY:
        return None
    if m["digest"] is not None and _digest_problem(m["digest"]) is not None:
        return None
    return ImageRef(m["domain"], m["path"], m["tag"], m["digest"])


def refusal(ref: str) -> str | None:
    """Why the kubelet refuses `ref` (a phrase to follow "is not a valid image reference: "), or None when it takes
    it. The decision is normalized()'s; this only finds the words for the part that is wrong."""
    if normalized(ref) is not None:
        return None
    return _reason(ref)


def _reason(ref: str) -> str:
    if any(ch.isspace() for ch in ref):
        return "it holds blanks or line breaks"
    scheme, sep, rest = ref.partition("://")
    if sep and _full("scheme", scheme):
        return f"an image reference has no scheme: write {rest!r}"
    if _full("identifier", ref):
        return "64 hex digits are an image ID, not a reference: write repository@sha256:<hex>"
    name, at, digest = ref.partition("@")
    if at:
        if "@" in digest:
            return "it holds more than one '@' (one digest at most: @sha256:<64 hex digits>)"
        if ":" not in digest:
            return "a digest is <algorithm>:<hex digits>, e.g. @sha256:<64 hex digits>"
        if (wrong := _digest_problem(digest)) is not None:
            return wrong
    domain, rest = _split_docker_domain(name)
    written = rest.removeprefix(_LIBRARY) if domain == DOCKER_HUB and "/" not in name else rest
    path, colon, tag = written.partition(":")
    if ":" in tag:
        return "it holds more than one ':' after the repository (one tag at most: repository:tag)"
    if colon and not _full("tag", tag):
        return (f"tag {tag!r} is not a tag (letters, digits, '_', '.' and '-', not starting with '.' or '-', at most "
                "128 characters)")
    if path.lower() != path:
        return f"the repository {path!r} must be lowercase: {path.lower()!r}"
    if not _full("path", path):
        return (f"the repository {path!r} is not one: lowercase letters and digits, '/' between components, "
                "joined inside one by '.', '_', '__' or '-'")
    if not _full("domain", domain):
        return f"the registry {domain!r} is not a host[:port]"
    if len(rest.partition(":")[0]) > MAX_REPOSITORY:
        return f"the repository is longer than {MAX_REPOSITORY} characters"
    return "not [registry/]repository[:tag][@sha256:<hex>]"


def parse_image(ref: str) -> ImageRef | None:
    """The parts of a reference as written, or None when it is not one: no Docker Hub defaults (`oci://` chart
    references must name their registry). The first component is the registry as distribution decides."""
    first, sep, rest = ref.partition("/")
    domain = None
    if sep and (first == "localhost" or "." in first or ":" in first or first.lower() != first):
        if not _full("domain", first):
            return None
        domain, ref = first, rest
    m = _full("remote", ref)
    if m is None or len(m["path"]) > MAX_REPOSITORY or not _digest_ok(m["digest"]):
        return None
    return ImageRef(domain, m["path"], m["tag"], m["digest"])


def _digest_ok(digest: str | None) -> bool:
    return digest is None or _digest_problem(digest) is None


def split_image(ref: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference, the repository as the kubelet normalises it (Docker Hub's
    other hosts read as docker.io). Text that is not a reference is its own repository (so a change of it reads as a
    change of repository: fail closed)."""
    parsed = normalized(ref)
    if parsed is None:
        return ref, None, None
    domain, path = parsed.domain, parsed.path
    if domain in _HUB_ALIASES:
        domain, path = DOCKER_HUB, path if "/" in path else _LIBRARY + path
    return (f"{domain}/{path}" if domain else path), parsed.tag, parsed.digest


def is_digest_pinned(ref: str) -> bool:
    return split_image(ref)[2] is not None


def is_loopback(host: str) -> bool:
    """Whether a registry host (`localhost:5000`, `[::1]:5000`) is this machine's: asked over plain HTTP without
    being told (as cosign, go-containerregistry, does)."""
    return host.rsplit(":", 1)[0] in LOOPBACK_HOSTS if not host.startswith("[") else host.startswith("[::1]")
