"""Errors that teach, on the exact text the real cue and `apprafter validate` print: one test per YAML habit,
"did you mean" from the schema's own field names, the user's own words shown (env values never), and literals
that look like an interpolation."""

from __future__ import annotations

from pathlib import Path

from renderer.hints import BOOLEAN, COMMENT, DOCUMENT, LIST, NEST, known_fields
from tests.renderer.helpers import assert_clean_failure, run_cli, write_app

F = "apprafter/Application.cue"
HEAD = 'apiVersion: "apprafter.io/v1alpha1"\nkind:       "Application"\n'
APP = HEAD + 'metadata: name: "shop"\n'


def problems(tmp_path: Path, text: str) -> list[str]:
    write_app(tmp_path, text)
    return assert_clean_failure(run_cli("validate", ".", cwd=tmp_path), 1)


def test_a_hash_comment_hears_that_cue_comments_are_slashes(tmp_path: Path) -> None:
    assert problems(tmp_path, "# my app\n" + APP) == [
        f"{F}:1:3: expected label or ':', found 'IDENT' my; hint: {COMMENT}"]
    assert problems(tmp_path, HEAD + 'metadata: name: "shop"  # the name\n') == [
        f"{F}:3:25: missing ',' in struct literal; hint: {COMMENT}"]
    assert COMMENT == "CUE comments are //, not #"


def test_a_dash_item_hears_that_lists_are_brackets(tmp_path: Path) -> None:
    text = APP + 'spec: base: {\n\timage: "x"\n\tcommand:\n\t\t- "run"\n}\n'
    assert problems(tmp_path, text) == [f"{F}:4:1: spec.environments: declare at least one environment",
                                        f"{F}:7:3: spec.base.command: invalid operation -\"run\" (- string); "
                                        f"hint: {LIST}"]  # and what the rest says, in the same run
    assert LIST == "lists are [a, b], not `- item` lines"


def test_nesting_by_indentation_hears_to_nest_with_braces(tmp_path: Path) -> None:
    text = APP + 'spec:\n  base:\n    image: "x"\n    replicas: 2\n  environments:\n    prod: {}\n'
    top = "field not allowed at top level (an Application has apiVersion, kind, metadata, spec)"
    assert problems(tmp_path, text) == [f"{F}:7:5: replicas: {top}; hint: {NEST}",
                                        f"{F}:8:3: environments: {top}; hint: {NEST}"]
    assert NEST == 'nest with braces, not indentation: spec: {base: {image: "..."}}'


def test_yes_and_no_hear_that_cue_booleans_are_true_and_false(tmp_path: Path) -> None:
    text = APP + 'spec: {\n\tbase: {image: "x", expose: {port: 80, websocket: yes}}\n\tenvironments: prod: {}\n}\n'
    assert problems(tmp_path, text) == [f'{F}:5:51: spec.base.expose.websocket: reference "yes" not found; '
                                        f"hint: {BOOLEAN}"]
    assert BOOLEAN == "CUE booleans are true and false; YAML's yes, no, on and off are not"


def test_a_document_separator_hears_there_is_none(tmp_path: Path) -> None:
    assert problems(tmp_path, "---\n" + APP) == [f"{F}:2:11: missing ',' in struct literal; hint: {DOCUMENT}"]
    assert DOCUMENT == "CUE files have no --- separator: one file holds one Application"


def test_a_bare_word_is_the_users_own_and_shown_with_how_to_quote_it(tmp_path: Path) -> None:
    """`name: shop` printed `reference <redacted> not found`: the redaction meant for env values hid the user's
    own word. An env value written bare stays redacted, and hears the hint without it."""
    text = HEAD + "metadata: name: shop\nspec: {\n\tbase: {image: \"x\", env: TOKEN: hunter2secret}\n" \
        "\tenvironments: prod: {}\n}\n"
    assert problems(tmp_path, text) == [
        f'{F}:3:17: metadata.name: reference "shop" not found; hint: quote strings: name: "shop"',
        f'{F}:5:33: spec.base.env.TOKEN: reference <redacted sha256:{_digest("hunter2secret")}> not found; '
        'hint: quote strings: "..."']


def _digest(value: str) -> str:
    import hashlib

    return hashlib.sha256(value.encode()).hexdigest()[:8]


def test_a_misspelt_field_hears_the_schemas_own_name(tmp_path: Path) -> None:
    text = APP + ('spec: {\n\tbase: {image: "x", replica: 2, expose: {port: 80, netwrk: "public"}, '
                  'needs: pg: {sise: "small"}}\n\tenvironments: prod: {imag: "y"}\n\tenviroments: dev: {}\n}\n')
    assert problems(tmp_path, text) == [
        f"{F}:5:21: spec.base.replica: field not allowed; did you mean `replicas`?",
        f"{F}:5:52: spec.base.expose.netwrk: field not allowed; did you mean `network`?",
        f"{F}:5:83: spec.base.needs.pg.sise: field not allowed; did you mean `size`?",
        f"{F}:6:23: spec.environments.prod.imag: field not allowed; did you mean `image`?",
        f"{F}:7:2: spec.enviroments: field not allowed; did you mean `environments`?"]
    nothing_close = problems(tmp_path, APP + 'spec: {\n\tbase: {image: "x", zzzz: 1}\n\tenvironments: prod: {}\n}\n')
    assert nothing_close == [f"{F}:5:21: spec.base.zzzz: field not allowed"]


def test_the_names_come_from_the_schema() -> None:
    """Read from the OpenAPI cue generates from renderer/schema/application.cue, not from a list of ours."""
    schema = (Path(__file__).resolve().parents[2] / "renderer" / "schema" / "application.cue").read_text()
    assert known_fields(()) == ["apiVersion", "kind", "metadata", "spec"]
    workload = known_fields(("spec", "base"))
    assert "replicas" in workload and all(f"\t{name}?:" in schema for name in workload)
    assert known_fields(("spec", "environments", "prod")) == workload
    assert known_fields(("spec", "base", "env")) == []  # the user's own keys: nothing to suggest


def test_a_misspelt_field_in_a_cr_file_hears_the_same(tmp_path: Path) -> None:
    write_app(tmp_path / "a", APP + 'spec: {base: image: "x", environments: prod: {}}\n')
    cr = tmp_path / "app.yaml"
    cr.write_text(run_cli("render", str(tmp_path / "a"), "-e", "prod").stdout.replace("image: x", "imgae: x"))
    result = run_cli("plan", "--from", str(cr), "--to", str(tmp_path / "a"), "-e", "prod")
    assert result.returncode == 1
    assert result.stderr.endswith("spec.base.imgae: field not allowed; did you mean `image`?\n"), result.stderr


def test_a_literal_that_looks_like_an_interpolation_is_a_warning_naming_the_form(tmp_path: Path) -> None:
    text = APP + ('spec: {\n\tbase: {\n\t\timage: "x"\n\t\tneeds: pg: {}\n\t\tenv: {\n'
                  '\t\t\tURL: "${claim.pg.url}"\n\t\t\tDSN: "postgres://${claim.pg.host}/db"\n'
                  '\t\t\tKEY: "${secret.vendor/key}"\n\t\t\tLEVEL: "info"\n\t\t}\n\t}\n\tenvironments: prod: {}\n}\n')
    write_app(tmp_path, text)
    result = run_cli("validate", ".", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == ""
    claim = "this literal looks like an interpolation of a claim, but nothing substitutes it: reference the claim " \
            "instead"
    assert result.stderr.splitlines() == [
        f"warning: {F}:9:4: spec.base.env.URL: {claim}, URL: claim.pg.url",
        f"warning: {F}:10:4: spec.base.env.DSN: {claim}, DSN: claim.<need>.<field>",
        f"warning: {F}:11:4: spec.base.env.KEY: this literal looks like an interpolation of a secret, but nothing "
        'substitutes it: reference the secret instead, KEY: secret: "<secret-name>/<key>"',
        f"{F}: valid (prod)"]
    assert "postgres" not in result.stderr and "vendor" not in result.stderr  # the value itself is never shown
    rendered = run_cli("render", ".", "-e", "prod", cwd=tmp_path)
    assert rendered.returncode == 0 and rendered.stderr.splitlines() == result.stderr.splitlines()[:3]
