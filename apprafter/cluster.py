"""The CLI's cluster access: a controller_runtime client for one command (kubeconfig resolved like kubectl), run
to completion, and the API server's refusals a user can act on turned into their errors."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from toolchain.errors import Problem, UserError

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube
    from controller_runtime.errors import KubeError

__all__ = ["FIELD_MANAGER", "refused", "shown", "table", "with_cluster"]

FIELD_MANAGER = "apprafter-cli"
T = TypeVar("T")


def with_cluster(kubeconfig: Path | None, context: str | None,
                 command: Callable[[Kube, str], Awaitable[T]]) -> T:
    """Run `command(kube, default namespace)` against the configured cluster, then close the client."""
    import asyncio

    from controller_runtime.client import Kube
    from controller_runtime.kubeconfig import default_namespace, load_config

    config = load_config(kubeconfig, context)

    async def run() -> T:
        from controller_runtime.errors import KubeError

        kube = Kube(config, FIELD_MANAGER, http2=False)
        try:
            return await command(kube, default_namespace(config))
        except KubeError as e:
            if e.code != 0:
                raise
            single = config.get()
            server = single.cluster.server if single is not None else "?"
            server = re.sub(r"//[^/@]*@", "//***@", server)  # a login written into the URL is never printed
            raise KubeError(f"{e} (server {server}: check --kubeconfig and --context)", 0) from None
        finally:
            await kube.close()

    return asyncio.run(run())


def refused(error: KubeError, where: str, conflict: str) -> UserError | KubeError:
    """A refusal the user can act on as their error (409: `conflict` says what to do; 400/403/422: the cluster's
    words); anything else stays the tool failure it is (exit 2)."""
    if error.code == 409:
        return UserError([Problem(where, 0, 0, "", conflict)])
    if error.code in (400, 403, 422):
        return UserError([Problem(where, 0, 0, "", f"refused by the cluster: {error.detail}")])
    return error


def table(rows: list[list[str]]) -> str:
    """kubectl's table: columns padded to their widest cell, three spaces apart, no trailing blanks."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows)


def shown(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object as `-o json` prints it: what the server holds, without managedFields (kubectl's default)."""
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}
