"""Why a hostname is not one: each rule it breaks (a scheme, a port, a path, uppercase, a trailing dot, '_', a
wildcard, a single label) named, with the name that would be, for the one message every edge shows.

Pure; the rule itself is the schema's `_dnsName` (renderer.patterns), this only says which part of it was broken.
"""

from __future__ import annotations

from renderer import patterns
from toolchain.regex import lazy

__all__ = ["SINGLE_LABEL", "hostname_problem"]

SINGLE_LABEL = ("is a single label: a public hostname is a fully qualified name of two labels or more "
                "(shop.example.com)")
_SCHEME = lazy(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_PORT = lazy(r":[0-9]*$")


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 100 else repr(value[:100]) + "..."


def hostname_problem(value: str) -> str | None:
    """`hostname '<value>' <what is wrong>` for a hostname an Application may not carry, else None."""
    if patterns.dns_name(value):
        return None if "." in value else f"hostname {_shown(value)} {SINGLE_LABEL}"
    broken: list[str] = []
    name = value.strip()
    if name != value:
        broken.append("must hold no whitespace")
    extra: list[str] = []  # what a URL adds to the name: scheme, path, port
    if (scheme := _SCHEME.match(name)) is not None:
        extra.append(f"the scheme {scheme.group()!r}")
        name = name[scheme.end():]
    if "/" in name:
        name, path = name.split("/", 1)
        extra.append(f"the path {'/' + path!r}")
    if (port := _PORT.search(name)) is not None:
        extra.append(f"the port {port.group()!r} (the Gateway serves 443 and 80)")
        name = name[:port.start()]
    if extra:
        broken.append(f"must be the name alone, without {' and '.join(extra)}")
    wildcard = name.startswith("*.")
    if wildcard:
        broken.append("must name one host, not a wildcard (an app serves the one name it gives)")
        name = name[2:]
    if name != name.lower():
        broken.append("must be lowercase")
        name = name.lower()
    if name.endswith(".") and len(name) > 1:
        broken.append("must not end in '.' (write it without the trailing dot)")
        name = name.rstrip(".")
    if "_" in name:
        broken.append("must not hold '_' (DNS-1123 names take letters, digits, '-' and '.')")
        name = name.replace("_", "-")
    if not broken:  # none of the common mistakes: the rule as the schema words it
        return f"hostname {_shown(value)} is not {patterns.RULES['_dnsName']}"
    if not (patterns.dns_name(name) and "." in name):
        fix = " (DNS-1123 labels joined by '.', at most 253 characters)"
    else:
        fix = f": name the host, e.g. www.{name}" if wildcard else f": use {name}"
    return f"hostname {_shown(value)} {'; '.join(dict.fromkeys(broken))}{fix}"
