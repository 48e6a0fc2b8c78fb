"""Issue 43 item 4, "no traps": each trap a user hit, run through the real CLI and cue, with the message the user now
sees. A quoted reference is warned with its unquoted form; a mistyped reference names what was typed and the
references there are; one bad port is one error; each hostname mistake names its rule; a YAML list, a duplicate
key, a second .cue file and a misspelt .apprafter/ each say their real cause, never "declare at least one
environment"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.renderer.helpers import EXAMPLES, run_cli

F = "apprafter/Application.cue"
SHOP = (EXAMPLES / "webapp" / "apprafter" / "Application.cue").read_text()


def shop(tmp_path: Path, *edits: str) -> Path:
    """examples/webapp with each (old, new) pair of `edits` replaced once (each old text must be there)."""
    text = SHOP
    for old, new in zip(edits[::2], edits[1::2], strict=True):
        assert old in text, old
        text = text.replace(old, new, 1)
    app = tmp_path / "apprafter" / "Application.cue"
    app.parent.mkdir(parents=True)
    app.write_text(text)
    return tmp_path


def failure(tmp_path: Path, *args: str) -> list[str]:
    result = run_cli(*(args or ("validate",)), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, ""), result.stderr
    return result.stderr.splitlines()


# 1. A quoted reference passed validate and lint and deployed the literal string.

def test_a_quoted_reference_is_warned_with_its_unquoted_form(tmp_path: Path) -> None:
    repo = shop(tmp_path, "DATABASE_URL: claim.pg.url", 'DATABASE_URL: "claim.pg.url"',
                'SESSION_KEY: secret: "shop-session/key"', 'SESSION_KEY: "secret: shop-session/key"')
    claim = (f"warning: {F}:22:4: spec.base.env.DATABASE_URL: 'claim.pg.url' is a quoted string, so the variable "
             "holds those characters, not the claim's url: write the reference unquoted, DATABASE_URL: claim.pg.url")
    secret = (f"warning: {F}:24:4: spec.base.env.SESSION_KEY: 'secret: shop-session/key' is a quoted string, so the "
              "variable holds those characters, not the secret's value: write the reference as a struct, "
              'SESSION_KEY: secret: "shop-session/key"')
    validated = run_cli("validate", cwd=repo)
    assert validated.returncode == 0  # a warning: the literal may be meant
    assert validated.stderr.splitlines() == [claim, secret, f"{F}: valid (prod, staging)"]
    linted = run_cli("lint", "--strict", cwd=repo)
    assert linted.returncode == 1 and linted.stderr.splitlines()[:2] == [claim, secret]
    rendered = run_cli("render", "-e", "prod", cwd=repo)
    assert rendered.returncode == 0 and rendered.stderr.splitlines() == [claim, secret]


def test_a_literal_that_only_holds_such_text_is_not_warned(tmp_path: Path) -> None:
    repo = shop(tmp_path, 'NODE_ENV:     "production"', 'NODE_ENV: "see claim.pg.url for the url"',
                'NODE_ENV: "staging"', 'NODE_ENV: "claim.nosuch.url"')
    result = run_cli("validate", cwd=repo)
    assert (result.returncode, result.stderr) == (0, f"{F}: valid (prod, staging)\n")


# 2. A mistyped reference said `reference <redacted> not found; hint: quote strings` (into trap 1).

@pytest.mark.parametrize(("typed", "expected"), [
    ("clam.pg.url", f"{F}:22:18: spec.base.env.DATABASE_URL: clam.pg.url is not a reference of this app; did you "
                    "mean claim.pg.url? (its references are claim.pg.<url|host|port|user|password|db>, "
                    "claim.redis.<url|host|port|user|password|prefix>)"),
    ("cliam.redis.uri", f"{F}:22:18: spec.base.env.DATABASE_URL: cliam.redis.uri is not a reference of this app; "
                        "did you mean claim.redis.url? (its references are claim.pg.<url|host|port|user|password|db>, "
                        "claim.redis.<url|host|port|user|password|prefix>)"),
    ("db.example.com", f"{F}:22:18: spec.base.env.DATABASE_URL: a bare dotted name is read as a reference, and no "
                       'reference has that name: a literal string is quoted, DATABASE_URL: "..."; its references are '
                       "claim.pg.<url|host|port|user|password|db>, claim.redis.<url|host|port|user|password|prefix>"),
])
def test_a_mistyped_reference_names_what_was_typed_and_the_references_there_are(tmp_path: Path, typed: str,
                                                                                 expected: str) -> None:
    assert failure(shop(tmp_path, "DATABASE_URL: claim.pg.url", f"DATABASE_URL: {typed}")) == [expected]


def test_a_mistyped_reference_hides_no_other_mistake(tmp_path: Path) -> None:
    """An unresolved reference fails the whole package in cue: the file is checked again with a string in its
    place, so the misspelt field and the refused image beside it are said in the same run."""
    repo = shop(tmp_path, "DATABASE_URL: claim.pg.url", "DATABASE_URL: clam.pg.url", "ghcr.io/acme/shop",
                "ghcr.io/Acme/shop", "replicas: 3", "replica: 3")
    lines = failure(repo)
    assert [line.split(": ", 2)[1] for line in lines] == [
        "spec.base.image", "spec.base.env.DATABASE_URL", "spec.environments.prod.replica"]
    assert lines[2].endswith("field not allowed; did you mean `replicas`?")


def test_a_bare_word_in_an_env_value_stays_unshown(tmp_path: Path) -> None:
    """A single bare word may be a value (a password written unquoted): redacted, with the quote hint."""
    lines = failure(shop(tmp_path, "DATABASE_URL: claim.pg.url", "DATABASE_URL: hunter2secret"))
    assert len(lines) == 1 and "hunter2secret" not in lines[0]
    assert lines[0].endswith('not found; hint: quote strings: "..."')


# 3. One bad port gave three errors (five in examples/webapp), one of them with wrong advice.

@pytest.mark.parametrize(("port", "expected"), [
    ('"3000"', f"{F}:10:10: spec.base.expose.port: port is a number, not a string: write it unquoted, port: 3000"),
    ("0", f"{F}:10:10: spec.base.expose.port: port 0 is out of range: a port is an integer 1-65535"),
    ("70000", f"{F}:10:10: spec.base.expose.port: port 70000 is out of range: a port is an integer 1-65535"),
    ("", f"{F}:9:3: spec.base.expose.port: missing required field expose.port (an integer 1-65535)"),
])
def test_one_bad_port_is_one_error(tmp_path: Path, port: str, expected: str) -> None:
    edit = ("port:    3000", f"port: {port}") if port else ("port:    3000\n", "")
    assert failure(shop(tmp_path, *edit)) == [expected]


# 4. Every hostname mistake got one generic sentence.

@pytest.mark.parametrize(("hostname", "expected"), [
    ("Shop.acme.example", "hostname 'Shop.acme.example' must be lowercase: use shop.acme.example"),
    ("shop.acme.example.", "hostname 'shop.acme.example.' must not end in '.' (write it without the trailing dot): "
                           "use shop.acme.example"),
    ("https://shop.acme.example", "hostname 'https://shop.acme.example' must be the name alone, without the scheme "
                                  "'https://': use shop.acme.example"),
    ("shop.acme.example:443", "hostname 'shop.acme.example:443' must be the name alone, without the port ':443' (the "
                              "Gateway serves 443 and 80): use shop.acme.example"),
    ("shop_x.acme.example", "hostname 'shop_x.acme.example' must not hold '_' (DNS-1123 names take letters, digits, "
                            "'-' and '.'): use shop-x.acme.example"),
    ("*.acme.example", "hostname '*.acme.example' must name one host, not a wildcard (an app serves the one name it "
                       "gives): name the host, e.g. www.acme.example"),
    ("shop", "hostname 'shop' is a single label: a public hostname is a fully qualified name of two labels or more "
             "(shop.example.com)"),
])
def test_each_hostname_mistake_names_the_rule_it_breaks(tmp_path: Path, hostname: str, expected: str) -> None:
    repo = shop(tmp_path, 'hostname: "shop.acme.example"', f'hostname: "{hostname}"')
    col = 12 if "." not in hostname else 22  # cue points at the value; the rules' own check (one label) at the field
    assert failure(repo) == [f"{F}:36:{col}: spec.environments.prod.expose.hostname: {expected}"]


def test_a_hostname_in_a_cr_is_worded_as_validate_words_it() -> None:
    """The webhook's and plan's path: a CR checked against the CRD's schema, no cue."""
    from compatibility.inputs import parse_cr
    from renderer.errors import UserError

    cr = ("apiVersion: apprafter.io/v1alpha1\nkind: Application\nmetadata: {name: shop}\nspec:\n  environment: prod\n"
          "  base: {image: 'ghcr.io/acme/shop:1', expose: {port: 80, network: public, hostname: Shop.example.com}}\n"
          "  environments: {prod: {}}\n")
    with pytest.raises(UserError) as refused:
        parse_cr(cr, "cr.yaml")
    assert [p.message for p in refused.value.problems] == [
        "hostname 'Shop.example.com' must be lowercase: use shop.example.com"]


# 5. Phantom "declare at least one environment": a YAML list, a duplicate key, a second .cue file.

def test_a_yaml_list_is_one_error_at_its_first_item(tmp_path: Path) -> None:
    repo = shop(tmp_path, 'paths: ["/", "/api"]', 'paths:\n - "/"\n - "/api"')
    assert failure(repo) == [f'{F}:13:2: spec.base.expose.paths: invalid operation -"/" (- string); hint: lists are '
                             "[a, b], not `- item` lines"]


def test_a_duplicate_key_says_so_and_nothing_else(tmp_path: Path) -> None:
    repo = shop(tmp_path, "replicas: 1", "replicas: 1\n\t\t\treplicas: 2")
    assert failure(repo) == [f"{F}:31:14: spec.environments.staging.replicas: conflicting values 2 and 1; replicas "
                             "is written twice (lines 31 and 32) and CUE unifies the two: keep one"]


def test_a_second_cue_file_is_named(tmp_path: Path) -> None:
    repo = shop(tmp_path)
    (repo / "apprafter" / "environments.cue").write_text("spec: environments: qa: {}\n")
    expected = ["apprafter/environments.cue: not read: an app is the one file apprafter/Application.cue (cue would "
                "not see this file's fields): move what it holds into Application.cue, or the file out of apprafter/"]
    assert failure(repo) == expected
    assert failure(repo, "render", "-e", "prod") == expected
    generated = run_cli("schema", "-o", "cue", "--package", "app").stdout  # the editors' file is no stray file
    (repo / "apprafter" / "environments.cue").unlink()
    (repo / "apprafter" / "schema_gen.cue").write_text(generated)
    assert run_cli("validate", cwd=repo).stderr == f"{F}: valid (prod, staging)\n"


def test_a_misspelt_apprafter_directory_is_refused_named_or_not(tmp_path: Path) -> None:
    repo = shop(tmp_path)
    (repo / "apprafter").rename(repo / ".apprafter")
    assert failure(repo) == [".apprafter/Application.cue: not where the plugin reads an app: the directory is named "
                             "apprafter/, not .apprafter/: git mv .apprafter apprafter"]
    assert failure(repo, "validate", ".apprafter/Application.cue") == [
        ".apprafter/Application.cue: not where the plugin reads an app: the app file is apprafter/Application.cue at "
        "the repository root (the directory is named '.apprafter'): git mv .apprafter apprafter"]
