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
    from compatibility.application import Deployment
    from compatibility.monorepo import Entry
    from renderer.errors import Problem
    from renderer.load import LoadedApp

GATED_EXIT = 2  # under --detailed-exitcode, and nothing else exits 2 there


@click.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--from", "from_", metavar="OLD",
              help="The applied version: a directory, a .cue file, a YAML/JSON Application CR, or git:<rev>[:<path>] "
                   "(with PATH: git:<rev> or a directory). Default: git:<the merge-base of HEAD and the default "
                   "branch> (origin/HEAD, else main, else master).")
@click.option("--to", "to", metavar="NEW", help="One app's candidate version (same forms), with one --env: prints "
                                                "that environment's MigrationPlan (not with PATH).")
@click.option("--all", "all_dir", type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="Same as PATH DIR (kept for scripts).")
@env_option("Environment whose effective spec is compared (repeatable with PATH: only these; default all).",
            multiple=True, complete=environment_names)
@output_option("plan", help="text (like terraform plan), json, yaml, or markdown (a pull-request comment).")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 2 when a change is gated, and only then (0 not gated; 1 any error, usage and tool "
                   "failures included).")
@namespace_option("The app's namespace (for the MigrationPlan, with --to; default metadata.namespace).")
@click.option("--domain", help="Platform domain of default hostnames {app}.{env}.{domain}.")
@click.option("--approver", "approvers", multiple=True, help="spec.approvers of the MigrationPlan (with --to; "
                                                             "repeatable).")
@no_color_option()
def plan(path: Path | None, from_: str | None, to: str | None, all_dir: Path | None, environment: tuple[str, ...],
         output: str, detailed_exitcode: bool, namespace: str | None, domain: str | None, approvers: tuple[str, ...],
         no_color: bool) -> None:
    """Classify the change from OLD to PATH (default .), like `terraform plan` (docs/plan.md): every app below a
    directory, or the app of a file, in every environment; --to NEW --env ENV for one app's MigrationPlan."""
    # Usage errors exit 1 (apprafter.cli), never the gated code.
    if path is not None and all_dir is not None:
        raise click.UsageError("give PATH or --all DIR, not both")
    if to is not None and (path is not None or all_dir is not None):
        raise click.UsageError("--to NEW plans one app: not with PATH or --all")
    if to is not None and len(environment) != 1:
        raise click.UsageError("--to NEW wants one --env ENV")
    if to is None and (namespace or approvers):
        raise click.UsageError("--namespace and --approver are for one app's MigrationPlan: with --to NEW --env ENV")
    colour = colour_wanted(no_color, sys.stdout.isatty())
    try:
        from apprafter.budget import limit_own_memory

        limit_own_memory()
        target = Path(to) if to is not None and not to.startswith("git:") else (path or all_dir or Path("."))
        if from_ is None:
            from apprafter.plan_base import default_base

            base = default_base(target)
            from_ = base.spec
            click.echo(f"apprafter plan: comparing with {base.spec} ({base.how})", err=True)
        if to is not None:
            gated = _plan_one(from_, to, environment[0], output, namespace, domain, approvers, colour)
        else:
            gated = _plan_tree(from_, path or all_dir or Path("."), environment, output, domain, colour)
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
    from compatibility.monorepo import Entry, first_deployment, moved, removal, renamed
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
    if before is not None and after is not None and moved(before, after):
        return _write_entries(renamed(shown.source.display, environment, before, after, domain), output, colour)
    if after is None:
        assert before is not None
        result, status = removal(before, domain), "removed"
        header = (f"apprafter plan: {before.app}, environment {environment} is gone in {to}: removed, nothing in "
                  "the cluster holds a deletion (no MigrationPlan); classified as the app scaled to zero, holding "
                  "nothing")
    elif before is None:
        result, status = first_deployment(after, domain), "first-deployment"
        header = (f"apprafter plan: {after.app}, environment {environment} is new in {to}: first deployment of "
                  f"{after.spec['image']}, no baseline to compare")
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
        _write(render_text(result, colour=colour, header=header, migration_plan=status != "removed",
                           first=status == "first-deployment", in_force=_in_force(loaded["old"], before)))
    return result.gated


def _in_force(app: LoadedApp | None, before: Deployment | None) -> tuple[str, str] | None:
    """(image, digest) when the old side is a CR read back from the cluster whose status says its image's tag runs
    as a digest (imagePolicy.resolve: "digest", lifecycle.image_digest)."""
    from lifecycle.image_digest import in_force

    data = getattr(app.source.positions, "data", None) if app is not None else None
    image = before.spec.get("image") if before is not None else None
    digest = in_force(data.get("status") if isinstance(data, dict) else None, image)
    return (image, digest) if isinstance(image, str) and digest else None


def _write_entries(entries: list[Entry], output: str, colour: bool) -> bool:
    """Plan entries as `plan PATH` prints them (also a rename with --to: the removal of the old app and the first
    deployment of the new, never a MigrationPlan: the cluster will create none); whether one is gated."""
    from compatibility.monorepo import plan_document
    from compatibility.text import render_entries

    if output == "markdown":
        _write(_markdown(entries))
    elif output == "json":
        _write(json.dumps(plan_document(entries), indent=2) + "\n")
    else:
        _write(render_entries(entries, colour))
    return any(e.gated for e in entries)


def _nothing(from_: str, to: str) -> Problem:
    from renderer.errors import Problem

    return Problem(to, 1, 1, "", f"neither {from_} nor {to} has an Application: nothing to plan")


def _plan_tree(from_: str, path: Path, environments: tuple[str, ...], output: str, domain: str | None,
               colour: bool) -> bool:
    """Every app below the directory PATH (or the app of the file PATH), every environment (or those asked),
    against the same place at --from; an app gone from PATH is removed, one new in it a first deployment."""
    from apprafter.plan_sides import CR_SUFFIXES, keyed, load_side, load_tree
    from compatibility.application import DEFAULT_DOMAIN
    from compatibility.monorepo import plan_all
    from renderer.errors import Problem, UserError
    from renderer.load import APP_DIR
    from renderer.render import discover, load_many

    problems: list[Problem] = []
    if path.is_file() or path.name == APP_DIR or path.suffix in (".cue", *CR_SUFFIXES):  # one app, keyed "."
        after: dict[str, LoadedApp] = {}
        before: dict[str, LoadedApp] = {}
        for side, spec, other in ((after, str(path), None), (before, from_, str(path))):
            if side is after and not path.exists():  # gone: the app's removal
                continue
            try:
                app = load_side(spec, other)
            except UserError as e:
                problems += e.problems
                continue
            if app is not None:
                side["."] = app
    else:  # a directory (possibly gone: the last app removed)
        new, problems = load_many(discover(path), path) if path.is_dir() else ([], [])
        after = keyed(new, path)
        before, old_problems = load_tree(from_, path)
        problems += old_problems
    if not problems and not before and not after:
        raise UserError([Problem(str(path), 0, 0, "", f"no app to plan: no {APP_DIR}/Application.cue below it, "
                                 f"neither here nor in {from_}")])
    try:
        entries = plan_all(before, after, set(environments) or None, domain or DEFAULT_DOMAIN)
    except UserError as e:
        problems += e.problems
        entries = []
    if problems:
        raise UserError(problems)
    return _write_entries(entries, output, colour)
