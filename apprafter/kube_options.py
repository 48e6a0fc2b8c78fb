"""The options every command that talks to a cluster shares: --kubeconfig and --context, resolved like kubectl."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def kube_options(func: F) -> F:
    """Add --kubeconfig PATH and --context NAME (reconciler.kube.load_config resolves them)."""
    func = click.option("--context", "kube_context", metavar="NAME",
                        help="kubeconfig context to use (default: the current context).")(func)
    return click.option("--kubeconfig", type=click.Path(path_type=Path, dir_okay=False), metavar="PATH",
                        help="kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then in-cluster).")(func)
