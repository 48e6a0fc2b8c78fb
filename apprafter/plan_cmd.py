"""`apprafter plan`: read both sides (CUE, CR, git:<rev>; or a whole monorepo with --all), classify, print the plan."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from apprafter.complete import environment_names
from apprafter.convention import colour_wanted
from apprafter.errors import report
from apprafter.options import env_option, namespace_option, no_color_option, output_option
from toolchain.errors import USER_EXIT, AppRafterError

if TYPE_CHECKING:
    from compatibility.monorepo import Entry
    from renderer.errors import Problem
    from renderer.load import LoadedApp

GATED_EXIT = 2  # under --detailed-exitcode, and nothing else exits 2 there


@click.command()
@click.option("--from", "from_", metavar="OLD",
              help="The applied version: .cue file or dir, YAML/JSON Application CR, or git:<rev>[:<path>]; with "
                   "--all, git:<rev> or a directory.")
@click.option("--to", "to", metavar="NEW", help="The candidate version (same forms; not with --all).")
@click.option("--all", "all_dir", type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="Plan every app under DIR (the candidate, in this working tree) against --from.")
@env_option("Environment whose effective spec is compared (repeatable with --all: only these; default all).",
            multiple=True, complete=environment_names)
@output_option("plan", help="text (like terraform plan), json, yaml, or markdown (a pull-request comment).")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 2 when a change is gated, and only then (0 not gated; 1 any error, usage and tool "
                   "failures included).")
@namespace_option("The app's namespace (for the MigrationPlan; default metadata.namespace).")
@click.option("--domain", help="Platform domain of default hostnames {app}.{env}.{domain}.")
@click.option("--approver", "approvers", multiple=True, help="spec.approvers of the MigrationPlan (repeatable).")
@no_color_option()
def plan(from_: str | None, to: str | None, all_dir: Path | None, environment: tuple[str, ...], output: str,
         detailed_exitcode: bool, namespace: str | None, domain: str | None, approvers: tuple[str, ...],
         no_color: bool) -> None:
    """Classify the change from OLD to NEW, like `terraform plan` (docs/plan.md): one app with --to and --env, or
    every app of a monorepo with --all DIR."""
    # Usage errors exit 1 (apprafter.cli), never the gated code.
    if from_ is None:
        raise click.UsageError("Missing option '--from'.")
    if all_dir is None and (to is None or len(environment) != 1):
        raise click.UsageError("Want --to NEW and one --env ENV (or --all DIR).")
    if all_dir is not None and (to is not None or namespace or approvers):
        raise click.UsageError("--all DIR plans DIR against --from: --to, --namespace and --approver are for one "
                               "app.")
    colour = colour_wanted(no_color, sys.stdout.isatty())
    try:
        from apprafter.budget import limit_own_memory

        limit_own_memory()
        if all_dir is not None:
            gated = _plan_all(from_, all_dir, environment, output, domain, colour)
        else:
            assert to is not None
            gated = _plan_one(from_, to, environment[0], output, namespace, domain, approvers, colour)
    except (AppRafterError, MemoryError) as error:
        code = report(error)
        sys.exit(USER_EXIT if detailed_exitcode else code)  # with it, 2 means only "gated"
    sys.exit(GATED_EXIT if detailed_exitcode and gated else 0)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _markdown(entries: list[Entry]) -> str:
    from compatibility.markdown import render_markdown
    from compatibility.monorepo import plan_document

    return render_markdown(plan_document(entries))


def _plan_one(from_: str, to: str, environment: str, output: str, namespace: str | None, domain: str | None,
              approvers: tuple[str, ...], colour: bool) -> bool:
    from apprafter.plan_sides import load_side
    from compatibility.application import DEFAULT_DOMAIN
    from compatibility.application import plan as make_plan
    from compatibility.migrationplan import migration_plan
    from compatibility.monorepo import Entry, first_deployment, removal
    from compatibility.plan import plan_json
    from compatibility.sides import side
    from compatibility.text import render_text
    from renderer.errors import UserError

    problems: list[Problem] = []
    loaded: dict[str, LoadedApp | None] = {}
    for key, spec, other in (("old", from_, to), ("new", to, from_)):
        try:
            loaded[key] = load_side(spec, other)
        except UserError as e:
            problems += e.problems
            loaded[key] = None
    before = after = None
    for key, required in (("old", False), ("new", True)):
        app = loaded[key]
        try:
            found = side(app, environment, required=required) if app is not None else None
        except UserError as e:
            problems += e.problems
            continue
        before, after = (found, after) if key == "old" else (before, found)
    if problems:
        raise UserError(problems)
    if before is None and after is None:
        raise UserError([_nothing(from_, to)])
    if after is not None and namespace:
        after = dataclasses.replace(after, namespace=namespace)
    header = ""
    domain = domain or DEFAULT_DOMAIN
    shown = loaded["new"] or loaded["old"]
    assert shown is not None
    if after is None:
        assert before is not None
        result, status = removal(before, domain), "removed"
        header = (f"apprafter plan: {before.app}, environment {environment} is gone in {to}: removed, nothing in "
                  "the cluster holds a deletion (no MigrationPlan); classified as the app scaled to zero, holding "
                  "nothing")
    elif before is None:
        result, status = first_deployment(after), "first-deployment"
        header = (f"apprafter plan: {after.app}, environment {environment} is new in {to}: first deployment, "
                  "no baseline to compare")
    else:
        result = make_plan(before, after, domain)
        status = "changed" if result.changes else "unchanged"
    entry = Entry(shown.source.display, result.subject.name, environment, status, result)  # type: ignore[arg-type]
    if output == "markdown":
        _write(_markdown([entry]))
    elif output == "json":
        obj = migration_plan(result, approvers=approvers) if entry.migration_plan else None
        document = plan_json(result, obj)
        document["approvedSpecHash"] = entry.approved_spec_hash
        _write(json.dumps(document, indent=2, sort_keys=False) + "\n")
    else:
        _write(render_text(result, colour=colour, header=header, migration_plan=status != "removed"))
    return result.gated


def _nothing(from_: str, to: str) -> Problem:
    from renderer.errors import Problem

    return Problem(to, 1, 1, "", f"neither {from_} nor {to} has an Application: nothing to plan")


def _plan_all(from_: str, directory: Path, environments: tuple[str, ...], output: str, domain: str | None,
              colour: bool) -> bool:
    from apprafter.plan_sides import keyed, load_tree
    from compatibility.application import DEFAULT_DOMAIN
    from compatibility.monorepo import plan_all, plan_document
    from compatibility.text import render_entries
    from renderer.errors import UserError
    from renderer.render import load_all

    new, problems = load_all(directory)
    after = keyed(new, directory)
    before, old_problems = load_tree(from_, directory)
    problems += old_problems
    try:
        entries = plan_all(before, after, set(environments) or None, domain or DEFAULT_DOMAIN)
    except UserError as e:
        problems += e.problems
        entries = []
    if problems:
        raise UserError(problems)
    if output == "markdown":
        _write(_markdown(entries))
    elif output == "json":
        _write(json.dumps(plan_document(entries), indent=2) + "\n")
    else:
        _write(render_entries(entries, colour))
    return any(e.gated for e in entries)

