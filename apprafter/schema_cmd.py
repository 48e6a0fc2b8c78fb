"""`apprafter schema`: the Application's JSON Schema, or the CUE file the language server reads, for editors."""

from __future__ import annotations

import json
import sys

import click

from apprafter.errors import reported
from apprafter.options import output_option


@click.command()
@output_option("schema", help="jsonschema: the JSON Schema of an Application (YAML and JSON editors); cue: a CUE "
                              "file to save beside Application.cue, in its package (the CUE language server).")
@click.option("--package", "package", default="app", show_default=True, metavar="NAME",
              help="With -o cue: the package clause, the same as Application.cue's (add `package NAME` on its first "
                   "line if it has none).")
@reported
def schema(output: str, package: str) -> None:
    """Print the Application's schema for editors, generated from the same CUE schema the renderer uses.

    \b
    JSON Schema:  apprafter schema > .apprafter/application.schema.json
    CUE module:   apprafter schema -o cue --package app > apprafter/schema_gen.cue   (and `cue mod init` at the
                  repository root, once); then `claim.pg.url` resolves in the editor and `cue vet -c
                  ./apprafter` reports what the schema refuses (not image references, required fields, a claim's
                  need per environment: `apprafter validate` checks those; docs/user-guide.md#editors)
    """
    from compatibility.json_schema import json_schema
    from renderer.editor_schema import editor_cue

    if output == "cue":
        try:
            text = editor_cue(package)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--package") from None
        sys.stdout.write(text)
        return
    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")
