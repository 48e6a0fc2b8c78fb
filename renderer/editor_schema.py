"""The CUE file editors read (the language server, `cue vet`): in the user's package, the schema and the names the
renderer injects (`claim`, `ipv6`, `ipv4`), so that `claim.pg.url` resolves in an editor as it does in `apprafter
render`. (The JSON Schema is compatibility.json_schema: cue's own jsonschema encoder, experimental in the pinned cue,
closes a struct against the fields of a definition it embeds, so it refuses every valid Application.)"""

from __future__ import annotations

import re

from renderer.load import inject_text, schema_text
from renderer.locate import EDITOR_HEADER

__all__ = ["editor_cue"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def editor_cue(package: str) -> str:
    """One CUE file to put beside Application.cue (same package clause; a cue.mod above it): the schema's
    definitions, `claim`, `ipv6` and `ipv4` as the renderer injects them, and the document checked against
    #Application in a hidden field, so that `cue vet` and the language server report what `validate` would."""
    if not _IDENTIFIER.fullmatch(package):
        raise ValueError(f"not a CUE package name: {package!r}")
    inject = inject_text().replace("schema.#", "#")
    check = ("// The document checked against the schema, in a hidden field (not part of what is exported); the lets\n"
             "// name the package's own fields (inside the struct the same names would be the struct's).\n"
             "let _apprafterAPIVersion = apiVersion\nlet _apprafterKind = kind\nlet _apprafterMetadata = metadata\n"
             "let _apprafterSpec = spec\n"
             "_apprafterDocument: #Application & {apiVersion: _apprafterAPIVersion, kind: _apprafterKind, metadata: "
             "_apprafterMetadata, spec: _apprafterSpec}\n")
    return (f"{EDITOR_HEADER} for editors and `cue vet`; apprafter render ignores this file\n"
            f"// (it injects the same definitions itself). Keep the package clause equal to Application.cue's.\n"
            f"package {package}\n\n{schema_text()}\n{inject}\n{check}")
