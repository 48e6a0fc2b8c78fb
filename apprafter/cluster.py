"""The CLI's cluster access: a controller_runtime client for one command (kubeconfig resolved like kubectl), run
to completion, waiting on an object through the runtime's informer, and the API server's refusals a user can act on
turned into their errors."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from toolchain.errors import Problem, UserError

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube
    from controller_runtime.errors import KubeError
    from controller_runtime.kinds import KindLike

__all__ = ["FIELD_MANAGER", "print_objects", "refused", "shown", "table", "wait_for", "with_cluster"]

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


async def wait_for(kube: Kube, kind: KindLike, name: str, namespace: str,
                   done: Callable[[dict[str, Any] | None], bool], timeout: float) -> dict[str, Any] | None:
    """The object `namespace/name` once `done(the object, None while there is none)` holds ({} when it is none), as
    the runtime's informer sees it (a list, then its watch, resumed and listed again as the controllers' are); None
    when `timeout` seconds pass first. A list that failed until then raises its error."""
    import asyncio

    from controller_runtime.errors import KubeError
    from controller_runtime.informer import Informer

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    cache = Informer(kube, kind, (namespace,))
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()

    def seen(obj: dict[str, Any] | None) -> None:
        if not answer.done() and done(obj):
            answer.set_result(obj or {})

    cache.handlers.append(lambda event, obj: seen(None if event == "DELETED" else obj)
                          if obj.get("metadata", {}).get("name") == name else None)
    running = asyncio.create_task(cache.run())
    try:
        async with asyncio.timeout_at(deadline):  # never asyncio.wait_for: see controller_runtime.client.watch
            await cache.synced.wait()
            if cache.not_served is not None:
                raise KubeError(cache.not_served, 404)
            if cache.get(namespace, name) is None:
                seen(None)
            return await answer
    except TimeoutError:
        if cache.failure is not None:
            raise cache.failure from None
        return None
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


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


def print_objects(objects: Sequence[Mapping[str, Any]], output: str, header: list[str],
                  row: Callable[[Mapping[str, Any]], list[str]], empty: str) -> None:
    """What a `list` command prints: `-o json` a v1 List of the objects as the server holds them (yaml: the same,
    through apprafter.options), else kubectl's table on stdout, or `empty` on stderr when there is none."""
    import json
    import sys

    if output == "json":
        sys.stdout.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": [shown(o) for o in objects]},
                                    indent=2) + "\n")
    elif not objects:
        sys.stderr.write(empty + "\n")
    else:
        sys.stdout.write(table([header, *map(row, objects)]))


def shown(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object as `-o json` prints it: what the server holds, without managedFields (kubectl's default)."""
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}
