"""What `apprafter lint` and `validate` add to the deploy rules (renderer.validate): warnings about what deploys but
moves under you (an untagged or `:latest` image), and the rules across apps and environments that no single render
can see (two apps with one name, one instance name `<app>-<env>` twice, one public hostname claimed twice).

Pure, over loaded apps; positions in each user's file. Imported only by `lint` and `validate`: the plugin and
`render` never pay for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

from renderer import env_literals, imageref, validate
from renderer.effective import effective_spec
from renderer.errors import Problem, field_path
from renderer.redact import Redactor
from renderer.source import LoadedApp

__all__ = ["MOVING", "Report", "collisions", "image_warnings", "lint", "warnings"]

MOVING = "pin a version tag or a digest (@sha256:...), or set imagePolicy: resolve: \"digest\" to follow it on purpose"


class Report(NamedTuple):
    """Every problem of the apps linted together: errors (what the cluster refuses) and warnings, each sorted."""

    errors: list[Problem]
    warnings: list[Problem]


def _listed(items: Sequence[str]) -> str:
    """`a, b and c`, sorted."""
    ordered = sorted(items)
    return ordered[0] if len(ordered) == 1 else f"{', '.join(ordered[:-1])} and {ordered[-1]}"


def _at(app: LoadedApp, path: tuple[str | int, ...], message: str) -> Problem:
    line, col = app.source.index.find(path)
    return Redactor.for_document(app.document).problem(Problem(app.source.display, line, col, field_path(path),
                                                               message))


def image_warnings(app: LoadedApp) -> list[Problem]:
    """An image the kubelet takes but that moves: no tag (it pulls :latest) or :latest, without a digest; none when
    imagePolicy.resolve is "digest" (following the tag is then the point) or the image is refused (an error)."""
    found: list[Problem] = []
    for env in validate.environments(app):
        eff = effective_spec(app.document["spec"], env)
        image = eff.get("image")
        if not isinstance(image, str) or eff.get("imagePolicy", {}).get("resolve") == "digest":
            continue
        parsed = imageref.normalized(image)
        if parsed is None or parsed.digest:
            continue
        if parsed.tag is None:
            what = "has no tag: the kubelet pulls :latest, which moves"
        elif parsed.tag == "latest":
            what = "uses :latest, which moves"
        else:
            continue
        found.append(_at(app, validate.written_at(app.source.index, env, ("image",)),
                         f"image {image[:100]!r} {what}; {MOVING}"))
    return sorted(set(found))


def warnings(app: LoadedApp) -> list[Problem]:
    """Every warning of one app: moving images and env literals that look like an interpolation."""
    return sorted({*image_warnings(app), *env_literals.interpolation_warnings(app)})


class _Claim(NamedTuple):
    app: LoadedApp
    environment: str
    path: tuple[str | int, ...]

    @property
    def who(self) -> str:
        return f"{self.app.name}/{self.environment}"


def _claims(apps: Sequence[LoadedApp]) -> tuple[dict[str, list[LoadedApp]], dict[str, list[_Claim]],
                                                 dict[str, list[_Claim]]]:
    """Apps by name, deployments by instance name, deployments by the public hostname they write."""
    names: dict[str, list[LoadedApp]] = defaultdict(list)
    instances: dict[str, list[_Claim]] = defaultdict(list)
    hostnames: dict[str, list[_Claim]] = defaultdict(list)
    for app in apps:
        names[app.name].append(app)
        for env in validate.environments(app):
            instances[f"{app.name}-{env}"].append(_Claim(app, env, ("spec", "environments", env)))
            expose = effective_spec(app.document["spec"], env).get("expose") or {}
            if expose.get("network") == "public" and expose.get("hostname"):
                path = validate.written_at(app.source.index, env, ("expose", "hostname"))
                hostnames[expose["hostname"]].append(_Claim(app, env, path))
    return names, instances, hostnames


def collisions(apps: Sequence[LoadedApp]) -> list[Problem]:
    """Errors across apps and environments linted together: what the cluster refuses for the second that asks."""
    names, instances, hostnames = _claims(apps)
    found: list[Problem] = []
    for name, same in names.items():
        if len(same) > 1:
            files = _listed([a.source.display for a in same])
            found += [_at(a, ("metadata", "name"), f"app name {name!r} is declared by {len(same)} apps ({files}): "
                      "each app needs its own name (its Argo CD Applications and objects are named after it)")
                      for a in same]
    for instance, claims in instances.items():
        if len({c.app.name for c in claims}) > 1:
            who = _listed([c.who for c in claims])
            found += [_at(c.app, c.path, f"instance name {instance!r} is both {who}: the operator refuses the "
                          "younger (NameConflict); rename an app or an environment") for c in claims]
    for hostname, claims in hostnames.items():
        if len(claims) > 1:
            who = _listed([c.who for c in claims])
            found += [_at(c.app, c.path, f"public hostname {hostname!r} is claimed by {who}: the cluster gives it to "
                          "the first deployment that asks and refuses the rest") for c in claims]
    return sorted(set(found))


def lint(apps: Sequence[LoadedApp], problems: Sequence[Problem] = ()) -> Report:
    """Every problem of the apps linted together: the deploy rules of every environment (renderer.validate.check),
    the collisions between them and `problems` already found (apps that did not load) as errors; the warnings."""
    errors = [*problems, *collisions(apps)]
    found_warnings: list[Problem] = []
    for app in apps:
        errors += validate.check(app)
        found_warnings += warnings(app)
    return Report(sorted(set(errors)), sorted(set(found_warnings)))
