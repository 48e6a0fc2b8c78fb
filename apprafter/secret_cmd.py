"""`apprafter secret seal`: a Secret's value sealed for one environment of the app, written beside it as
`apprafter/secrets/<env>/<name>.yaml` (a SealedSecret as kubeseal writes it, strict scope: that namespace and name)
for the plugin to ship with the app (renderer.sealed). The value comes from stdin or a file, never the command line,
and is printed nowhere; the cluster's certificate is fetched as kubeseal fetches it, or given (CI)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.app_common import failure
from apprafter.cluster import with_cluster
from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.repo_cmd import CONTROLLER_NAME, CONTROLLER_NAMESPACE

if TYPE_CHECKING:
    from controller_runtime.client import Kube

__all__ = ["secret"]

MAX_VALUE = 512 * 1024  # a Secret holds at most 1 MiB in all


@click.group()
def secret() -> None:
    """Secrets your app reads, committed sealed beside it (docs/user-guide.md "Secrets")."""


def _value(from_file: Path | None) -> bytes:
    if from_file is not None:
        from renderer import userfile

        return userfile.read_bytes(from_file, max_bytes=MAX_VALUE, what="the value")
    if sys.stdin.isatty():
        raise failure("<stdin>", "the value comes from stdin (printf %s VALUE | apprafter secret seal ...) or "
                                 "--from-file FILE, never the command line")
    value = sys.stdin.buffer.read(MAX_VALUE + 1)
    if len(value) > MAX_VALUE:
        raise failure("<stdin>", f"larger than {MAX_VALUE} bytes")
    return value


def _merged(target: Path, display: str, namespace: str) -> dict[str, str]:
    """The other keys already sealed in `target` (sealed for the same namespace), to keep beside the new one."""
    if not target.exists() and not target.is_symlink():
        return {}
    from renderer import userfile
    from renderer.yaml_input import parse

    data = parse(userfile.read_text(target, display=display, max_bytes=256 * 1024), display).data
    meta = (data or {}).get("metadata") or {} if isinstance(data, dict) else {}
    if meta.get("namespace") not in (None, namespace):
        raise failure(display, f"is sealed for namespace {meta.get('namespace')!r}, not {namespace!r}: remove it or "
                               "seal for its environment")
    encrypted = ((data or {}).get("spec") or {}).get("encryptedData") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in (encrypted or {}).items()}


@secret.command()
@click.argument("name")
@click.argument("key")
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@click.option("-e", "--env", "environment", required=True, metavar="ENV", help="The environment it is for.")
@click.option("-n", "--namespace", metavar="NS", help="The environment's namespace (default: <app>-<env>, as "
                                                      "`apprafter app add` deploys it).")
@click.option("--from-file", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Read the value from this file (default: stdin).")
@click.option("--cert", metavar="FILE|URL", help="The cluster's SealedSecrets certificate (default: fetched from "
                                                 "the controller, as kubeseal does; a file in CI).")
@click.option("--controller-name", default=CONTROLLER_NAME, show_default=True,
              help="The SealedSecrets controller's Service.")
@click.option("--controller-namespace", default=CONTROLLER_NAMESPACE, show_default=True,
              help="The SealedSecrets controller's namespace.")
@kube_options
@reported
def seal(name: str, key: str, path: Path, environment: str, namespace: str | None, from_file: Path | None,
         cert: str | None, controller_name: str, controller_namespace: str, kubeconfig: Path | None,
         kube_context: str | None) -> None:
    """Seal the value of KEY of Secret NAME for ENV into apprafter/secrets/ENV/NAME.yaml (other keys kept); the app
    reads it as `env: VAR: secret: "NAME/KEY"` once the file is committed and pushed."""
    from apprafter.extras import require
    from apprafter.repo_login import cert_from, cert_from_cluster
    from renderer.load import load
    from renderer.locate import locate

    require("secret seal")
    loaded = load(path)
    file, _ = locate(path)
    app = str(loaded.document["metadata"]["name"])
    declared = sorted((loaded.document.get("spec") or {}).get("environments") or {})
    if environment not in declared:
        raise failure(loaded.source.display, f"environment {environment} is not declared; declared: "
                      f"{', '.join(declared)}")
    from renderer.sealed import KEY_PATTERN, NAME_PATTERN

    if not NAME_PATTERN.match(name):
        raise failure(name, "is not a Secret name for a file (lowercase letters, digits and '-')")
    if not KEY_PATTERN.match(key):
        raise failure(key, "is not a Secret key (letters, digits, '-', '_', '.')")
    namespace = namespace or f"{app}-{environment}"
    target = file.parent / "secrets" / environment / f"{name}.yaml"
    display = f"{Path(loaded.source.display).parent.as_posix()}/secrets/{environment}/{name}.yaml"
    kept = _merged(target, display, namespace)
    value = _value(from_file)
    if cert:
        pem, source = cert_from(cert), cert
    else:
        async def fetched(kube: Kube, _: str) -> bytes:
            return await cert_from_cluster(kube, controller_name, controller_namespace)

        pem, source = with_cluster(kubeconfig, kube_context, fetched), f"service {controller_namespace}/" \
                                                                       f"{controller_name}"
    document = _sealed(pem, source, namespace, name, key, value, kept)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=2) + "\n")  # JSON, as kubeseal writes: the plugin reads it fastest
    click.echo(f"sealed {key} into {display} (namespace {namespace}; {len(document['spec']['encryptedData'])} "
               f"keys): commit it, and read it with env: VAR: secret: \"{name}/{key}\"", err=True)


def _sealed(pem: bytes, source: str, namespace: str, name: str, key: str, value: bytes,
            kept: dict[str, str]) -> dict[str, Any]:
    """The SealedSecret with `key` sealed afresh and the `kept` keys' ciphertext as it was."""
    import base64

    from lifecycle.credentials.sealing import certificate_key, hybrid_encrypt, seal, strict_label

    public = certificate_key(pem, source)
    document = seal(public, namespace, name, "Opaque", {})
    fresh = base64.b64encode(hybrid_encrypt(public, value, strict_label(namespace, name))).decode()
    document["spec"]["encryptedData"] = dict(sorted({**kept, key: fresh}.items()))
    return document
