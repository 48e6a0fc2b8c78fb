"""Errors that teach, on the exact text the real cue and `apprafter validate` print: one test per YAML habit,
"did you mean" from the schema's own field names, the user's own words shown (env values never), and literals
that look like an interpolation."""

from __future__ import annotations

from pathlib import Path

from renderer.hints import BOOLEAN, COMMENT, DOCUMENT, LIST, NEST, YAML_FILE, known_fields
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
    text = APP + ('spec: {\n\tbase: {\n\t\timage: "x:1"\n\t\tneeds: pg: {}\n\t\tenv: {\n'
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


UNQUOTED = 'looks like YAML, and CUE is not YAML: quote the string, image: "..."'
BLOG = HEAD + ('metadata: name: "blog"\nspec: {\n\tbase: {\n\t\timage: "ghcr.io/acme/blog:2.0.1"\n'
               '\t\texpose: port: 8080\n\t}\n\tenvironments: prod: {}\n}\n')


def test_an_unquoted_image_hears_to_quote_it_and_nothing_the_parser_made_of_it(tmp_path: Path) -> None:
    """cue says `missing ','` and then `expected '}', found 'EOF'` at the end of the file: the second is the parser
    lost after the first, never the user's; only the first is shown, with what to do."""
    text = BLOG.replace('"ghcr.io/acme/blog:2.0.1"', "ghcr.io/acme/blog:2.0.1")
    assert problems(tmp_path, text) == [f"{F}:6:27: missing ',' in struct literal; hint: {UNQUOTED}"]
    env = BLOG.replace("expose: port: 8080", "expose: port: 8080\n\t\tenv: DSN: postgres://app:hunter2@db/app")
    assert problems(tmp_path, env) == [f"{F}:9:2: expected operand, found '}}'; hint: looks like YAML, and CUE is "
                                       'not YAML: quote the string, DSN: "..."']  # the value itself is never shown


def test_a_pasted_yaml_document_hears_that_cue_is_not_yaml(tmp_path: Path) -> None:
    text = ("apiVersion: apprafter.io/v1alpha1\nkind: Application\nmetadata:\n  name: blog\nspec:\n  base:\n"
            "    image: ghcr.io/acme/blog:2.0.1\n  environments:\n    prod: {}\n")
    assert problems(tmp_path, text) == [f"{F}:7:29: missing ',' in struct literal; hint: {YAML_FILE}"]
    assert YAML_FILE == ('this file looks like YAML, and CUE is not YAML: quote strings and nest with braces, '
                         'spec: {base: {image: "ghcr.io/acme/blog:2.0.1"}} (docs/user-guide.md)')


def test_a_missing_required_field_is_named_with_what_it_takes(tmp_path: Path) -> None:
    text = BLOG.replace("expose: port: 8080", 'expose: network: "public"\n\t\tautoscale: on: "cpu"')
    assert problems(tmp_path, text.replace('metadata: name: "blog"\n', "")) == [
        f"{F}:1:1: metadata.name: missing required field metadata.name (a DNS-1035 label (a lowercase letter, then "
        "lowercase letters, digits and '-', at most 63 characters))",
        f"{F}:6:3: spec.base.expose.port: missing required field expose.port (an integer 1-65535)",
        f"{F}:7:3: spec.base.autoscale.max: missing required field autoscale.max (an integer 1-1000)",
        f"{F}:7:3: spec.base.autoscale.min: missing required field autoscale.min (an integer 0-1000)"]


def test_an_unknown_need_hears_the_needs_there_are(tmp_path: Path) -> None:
    text = BLOG.replace("expose: port: 8080", "expose: port: 8080\n\t\tneeds: {postgress: {}, queue: {}, mongo: {}}")
    needs = "needs are clickhouse, disk, jetstream, pg, redis, s3"
    assert problems(tmp_path, text) == [
        f"{F}:8:11: spec.base.needs.postgress: field not allowed; {needs}; did you mean `pg`?",
        f"{F}:8:26: spec.base.needs.queue: field not allowed; {needs}; did you mean `jetstream`?",
        f"{F}:8:37: spec.base.needs.mongo: field not allowed; {needs}"]


def test_a_claim_without_its_need_hears_which_need_to_add(tmp_path: Path) -> None:
    text = BLOG.replace("expose: port: 8080", "expose: port: 8080\n\t\tenv: {DATABASE_URL: claim.pg.url, "
                        "CACHE: claim.postgres.url}")
    assert problems(tmp_path, text) == [
        f"{F}:8:29: spec.base.env.DATABASE_URL: claim.pg is used in env.DATABASE_URL but needs has no pg: add "
        "needs: pg: {}",
        f"{F}:8:50: spec.base.env.CACHE: claim.postgres: there is no need 'postgres' (needs are clickhouse, disk, "
        "jetstream, pg, redis, s3; did you mean `pg`?)"]


def test_a_misplaced_app_file_is_named_where_it_is_and_where_it_must_be(tmp_path: Path) -> None:
    (tmp_path / "Application.cue").write_text(BLOG)
    for argv in (["validate"], ["render", ".", "-e", "prod"], ["lint"]):
        assert assert_clean_failure(run_cli(*argv, cwd=tmp_path), 1)[0] == (
            "Application.cue: misplaced: the app file is apprafter/Application.cue, in an apprafter/ directory at the "
            "repository root (where the plugin looks): mkdir -p apprafter && git mv Application.cue apprafter/")
    (tmp_path / "Application.cue").unlink()
    write_app(tmp_path, BLOG).rename(tmp_path / "apprafter" / "application.cue")
    assert assert_clean_failure(run_cli("validate", cwd=tmp_path), 1) == [
        "apprafter: no Application.cue here (found application.cue): the app file is named Application.cue"]
    assert assert_clean_failure(run_cli("validate", "nothing.cue", cwd=tmp_path), 1) == ["nothing.cue: no such file"]


def test_every_problem_of_a_file_in_one_run_across_cue_and_the_renderers_rules(tmp_path: Path) -> None:
    """cue keeps only its gravest class of error (a bound hides an unknown field, which hides an undefined claim), and
    the renderer's rules run only on what evaluates: each further pass leaves out what was reported
    (renderer.recovery), so one run says all. `image is empty` is not said beside `imge`: it follows from it."""
    text = BLOG.replace('image: "ghcr.io/acme/blog:2.0.1"', 'imge: "x"\n\t\treplicas: 5000').replace(
        "expose: port: 8080", "expose: port: 8080\n\t\tenv: DB: claim.pg.url").replace(
        "prod: {}", 'prod: {image: "https://ghcr.io/acme/blog:2"}, budget: qa: "small"')
    assert problems(tmp_path, text) == [
        f"{F}:6:3: spec.base.imge: field not allowed; did you mean `image`?",
        f"{F}:7:13: spec.base.replicas: invalid value 5000 (out of bound <=1000)",
        f"{F}:9:18: spec.base.env.DB: claim.pg is used in env.DB but needs has no pg: add needs: pg: {{}}",
        f"{F}:11:23: spec.environments.prod.image: image 'https://ghcr.io/acme/blog:2' is not a valid image reference: "
        "an image reference has no scheme: write 'ghcr.io/acme/blog:2'",
        f"{F}:11:70: spec.budget.qa: budget for undeclared environment 'qa'"]
    # Where CUE makes it impossible: a syntax error stops everything (nothing evaluates), so the rest waits for it.
    assert problems(tmp_path, text.replace("replicas: 5000", "replicas: 5000,,")) == [
        f"{F}:7:18: expected operand, found ','"]
