"""Secrets committed beside the app, sealed: each `apprafter/secrets/<environment>/<name>.yaml` is a SealedSecret
(bitnami sealed-secrets, strict scope: sealed for the environment's namespace and that name; `apprafter secret seal`
or `kubeseal` writes it). The plugin stamps their ciphertext on the Application it emits (`spec.sealedSecrets`); the
operator makes one SealedSecret child of each, whose Secret the cluster's controller unseals, granted to this app
alone (renderer.manifests.secrets). Nothing here can read a value: only the cluster's key opens them."""

from __future__ import annotations

import os
from pathlib import Path

from renderer import userfile
from renderer.errors import Problem, UserError
from renderer.locate import APP_FILE
from renderer.source import LoadedApp
from toolchain.record import TYPE_CHECKING
from toolchain.regex import lazy

if TYPE_CHECKING:
    from typing import Any

__all__ = ["API_VERSION", "DIRECTORY", "KEY_PATTERN", "KIND", "MAX_FILES", "NAME_PATTERN", "data_problems",
           "name_problem", "read_sealed", "stamped"]

API_VERSION, KIND = "bitnami.com/v1alpha1", "SealedSecret"
DIRECTORY = "secrets"
MAX_FILES = 64  # sealed secrets per environment
MAX_BYTES = 256 * 1024  # one sealed file (a Secret holds at most 1 MiB; ciphertext is larger than its value)
NAME_PATTERN = lazy(r"^[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?$")  # a Secret's name, without dots: one file, one name
KEY_PATTERN = lazy(r"^[-._a-zA-Z0-9]{1,253}$")  # a Secret's data key
_CIPHERTEXT = lazy(r"^[A-Za-z0-9+/=\s]+$")
# Wider scopes let one ciphertext be replayed into another namespace or under another name: refused.
_SCOPES = ("sealedsecrets.bitnami.com/cluster-wide", "sealedsecrets.bitnami.com/namespace-wide")
_SCOPE_FIX = "seal it again for this namespace and name (apprafter secret seal NAME KEY -e ENV)"


def _problem(display: str, field: str, message: str) -> Problem:
    return Problem(display, 1, 1, field, message)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"a key written twice: {sorted(k for k in set(keys) if keys.count(k) > 1)[0]}")
    return dict(pairs)


def _document(text: str, display: str) -> Any:
    """The file's one document: JSON (what `apprafter secret seal` and kubeseal write by default) read by the json
    module, which the plugin's start-up already has; anything else through the one YAML reader (kubeseal -o yaml),
    whose import alone costs a sync ≈ 40 ms of CPU."""
    import json

    if text.lstrip().startswith("{"):
        try:
            return json.loads(text, object_pairs_hook=_unique)
        except ValueError as e:  # JSONDecodeError is a ValueError: said where the YAML reader says it
            if not isinstance(e, json.JSONDecodeError):
                raise UserError([Problem(display, 1, 1, "", str(e))]) from None
    from renderer.yaml_input import parse

    return parse(text, display).data


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a sealed secret's (a file's and its Secret's) name, or None."""
    if NAME_PATTERN.match(name):
        return None
    return f"{name!r} is not a Secret name for a file (lowercase letters, digits and '-')"


def data_problems(encrypted: Any) -> list[tuple[str | None, str]]:
    """(key, or None for the whole, why) for encrypted data that is not a sealed secret's: every door checks the
    same (the repository's files here, an Application written by hand in renderer.validate.check_document)."""
    if not isinstance(encrypted, dict) or not encrypted:
        return [(None, "holds no key")]
    problems: list[tuple[str | None, str]] = []
    for key, value in encrypted.items():
        if not KEY_PATTERN.match(str(key)):
            problems.append((str(key), "is not a Secret key (letters, digits, '-', '_', '.')"))
        elif not isinstance(value, str) or not _CIPHERTEXT.match(value):
            problems.append((str(key), "is not sealed ciphertext (base64): never commit a value itself"))
    return problems


def _one(path: Path, display: str, namespace: str | None) -> tuple[str, dict[str, str], list[Problem]]:
    """The name and encrypted data of one sealed file, and its problems."""
    data = _document(userfile.read_text(path, display=display, root=path.parent.parent.parent, max_bytes=MAX_BYTES,
                                        what="the sealed secret"), display)
    name = path.name.removesuffix(".yaml")
    if not isinstance(data, dict) or data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        return name, {}, [_problem(display, "", f"not a SealedSecret ({API_VERSION}): apprafter/secrets/<env>/ holds "
                                   "only what `apprafter secret seal` or `kubeseal` writes")]
    problems: list[Problem] = []
    meta, spec = data.get("metadata") or {}, data.get("spec") or {}
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return name, {}, [_problem(display, "", "metadata and spec are mappings")]
    if (wrong := name_problem(name)) is not None:
        problems.append(_problem(display, "metadata.name", wrong))
    if meta.get("name", name) != name:
        problems.append(_problem(display, "metadata.name", f"is {meta.get('name')!r}, the file says {name!r}: "
                                 "one file per Secret, named after it"))
    if namespace and meta.get("namespace", namespace) != namespace:
        problems.append(_problem(display, "metadata.namespace", f"sealed for namespace {meta.get('namespace')!r}; "
                                 f"this environment deploys to {namespace!r}: {_SCOPE_FIX}"))
    annotations = meta.get("annotations") or {}
    for scope in _SCOPES:
        if isinstance(annotations, dict) and str(annotations.get(scope, "")).lower() == "true":
            problems.append(_problem(display, f"metadata.annotations.{scope}", f"a wider scope than strict is "
                                     f"refused (its ciphertext could be replayed elsewhere): {_SCOPE_FIX}"))
    encrypted = spec.get("encryptedData")
    problems.extend(_problem(display, "spec.encryptedData" + (f".{key}" if key is not None else ""), why)
                    for key, why in data_problems(encrypted))
    encrypted = encrypted if isinstance(encrypted, dict) else {}
    extra = sorted(set(spec) - {"encryptedData", "template"})
    if extra:
        problems.append(_problem(display, "spec", f"carries {', '.join(extra)}: only encryptedData (and the template "
                                 "kubeseal writes) are read"))
    return name, {str(k): "".join(str(v).split()) for k, v in sorted(encrypted.items())}, problems


def read_sealed(app: LoadedApp, environment: str, namespace: str | None) -> dict[str, dict[str, str]]:
    """The sealed secrets of `environment` beside the app's file, by name (none: {}); UserError with a problem per
    file that is not one this environment may ship."""
    if app.source.path.name != APP_FILE:
        return {}
    directory = app.source.path.parent / DIRECTORY / environment
    if not directory.is_dir() or directory.is_symlink():
        return {}
    display_dir = f"{Path(app.source.display).parent.as_posix()}/{DIRECTORY}/{environment}"
    names = sorted(os.listdir(directory))
    files = [n for n in names if n.endswith(".yaml")]
    problems = [_problem(f"{display_dir}/{n}", "", "not a sealed secret's file (<name>.yaml): move it out of "
                         f"{DIRECTORY}/{environment}/") for n in names if not n.endswith(".yaml")]
    if len(files) > MAX_FILES:
        problems.append(_problem(display_dir, "", f"{len(files)} sealed secrets; at most {MAX_FILES} per environment"))
        files = files[:MAX_FILES]
    sealed: dict[str, dict[str, str]] = {}
    for file in files:
        try:
            name, data, found = _one(directory / file, f"{display_dir}/{file}", namespace)
        except UserError as e:
            problems.extend(e.problems)
            continue
        problems.extend(found)
        sealed[name] = data
    if problems:
        raise UserError(problems)
    return sealed


def stamped(app: LoadedApp, environment: str, namespace: str | None) -> LoadedApp:
    """The app with its environment's sealed secrets on spec.sealedSecrets (as the plugin emits it); an app from the
    cluster (a CR) already carries them and is returned as it is."""
    if app.source.path.name != APP_FILE:
        return app
    written = app.document.get("spec", {}).get("sealedSecrets")
    if written is not None:
        line, col = app.source.index.find(("spec", "sealedSecrets"))
        raise UserError([Problem(app.source.display, line, col, "spec.sealedSecrets", "is the plugin's, stamped from "
                                 "apprafter/secrets/<environment>/: seal with `apprafter secret seal`")])
    sealed = read_sealed(app, environment, namespace)
    if not sealed:
        return app
    document: dict[str, Any] = {**app.document, "spec": {**app.document["spec"], "sealedSecrets": sealed}}
    return app._replace(document=document)
