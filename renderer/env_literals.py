"""Env literals that read as a reference or an interpolation nothing substitutes (`"claim.pg.url"`,
`${claim.pg.url}`): warnings naming the form to write instead (never errors: the literal may be meant)."""

from __future__ import annotations

from renderer.errors import Problem, field_path
from renderer.redact import Redactor
from renderer.source import LoadedApp
from renderer.validate import Checker, workloads
from toolchain.regex import lazy

__all__ = ["interpolation_warnings"]

# An env literal written the way a template engine would interpolate a claim or secret (`${claim.pg.url}`,
# `{{ .secret.x }}`, `$(claim...)`): nothing substitutes it, the variable would hold those characters.
TEMPLATE = lazy(r"(?:\$\{|\$\(|\{\{)\s*\.?(?P<kind>claim|secret)\b")
# An env literal that reads exactly as a reference written in quotes: the variable would hold these characters.
QUOTED_CLAIM = lazy(r"claim\.(?P<need>[a-z][a-z0-9]*)\.(?P<field>[a-z]{1,16})")
QUOTED_SECRET = lazy(r'\{?\s*secret\s*:\s*"?(?P<ref>[a-z0-9][-a-z0-9.]*/[-._a-zA-Z0-9]+)"?\s*\}?')
WHOLE_CLAIM = lazy(r"\$\{\s*claim\.(?P<need>[a-z][a-z0-9]*)\.(?P<field>[a-z]{1,16})\s*\}")


def _quoted_reference(key: str, value: str) -> str | None:
    """The warning for an env literal that is exactly a reference in quotes (`"claim.pg.url"`), with the unquoted
    form; None for any other literal. The literal is shown: it is a reference's spelling, no secret."""
    claim = QUOTED_CLAIM.fullmatch(value) if value.startswith("claim.") else None  # the pattern's own prefix
    if claim:
        from renderer.schema_hints import need_fields

        fields = need_fields().get(claim["need"])
        if fields is None or claim["field"] not in [*fields, *(["pass"] if "password" in fields else [])]:
            return None
        return (f"{value!r} is a quoted string, so the variable holds those characters, not the claim's "
                f"{claim['field']}: write the reference unquoted, {key}: {value}")
    secret = QUOTED_SECRET.fullmatch(value) if "secret" in value else None  # a word the pattern holds
    if secret:
        return (f"{value!r} is a quoted string, so the variable holds those characters, not the secret's value: "
                f'write the reference as a struct, {key}: secret: "{secret["ref"]}"')
    return None


def interpolation_warnings(app: LoadedApp) -> list[Problem]:
    """Env literals that look like an interpolation of a claim or secret, or that are a reference in quotes, each
    naming the form to use instead.

    A warning, not an error (the literal may be meant). The value is never shown, except a literal that is exactly a
    reference (`"claim.pg.url"`), whose fix is that reference unquoted; the reference an interpolation suggests is
    spelled out only for a literal that is exactly `${claim.<need>.<field>}` of a need the app declares."""
    c = Checker(app)
    spec = app.document.get("spec", {})
    declared = {need for _, workload in workloads(spec) for need in workload.get("needs", {})}
    for scope, workload in workloads(spec):
        for key, value in workload.get("env", {}).items():
            quoted = _quoted_reference(key, value) if isinstance(value, str) else None
            if quoted is not None:
                # shown as written: the Redactor of every other literal, never of this reference's own spelling
                line, col = c.index.find((*scope, "env", key))
                others = Redactor.of(c.redactor.values - {value})
                c.problems.append(others.problem(Problem(app.source.display, line, col,
                                                         field_path((*scope, "env", key)), quoted)))
                continue
            found = TEMPLATE.search(value) if isinstance(value, str) and ("claim" in value or "secret" in value) \
                else None  # one of the two words the pattern ends with
            if found is None:
                continue
            if found["kind"] == "secret":
                c.add((*scope, "env", key), "this literal looks like an interpolation of a secret, but nothing "
                      f'substitutes it: reference the secret instead, {key}: secret: "<secret-name>/<key>"')
                continue
            whole = WHOLE_CLAIM.fullmatch(value)
            form = (f"claim.{whole['need']}.{whole['field']}" if whole and whole["need"] in declared
                    else "claim.<need>.<field>")
            c.add((*scope, "env", key), "this literal looks like an interpolation of a claim, but nothing "
                  f"substitutes it: reference the claim instead, {key}: {form}")
    return c.problems
