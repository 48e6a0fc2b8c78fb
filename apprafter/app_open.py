"""`apprafter app open`: the app in a browser. A public app's URL as it is served; otherwise (or with --forward) a
local port carried to one ready pod's `http` port through the API server, until interrupted; headless, the URL is
printed and nothing is opened."""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.app_common import argocd_namespace_option, failure, kind, listed, one_environment
from apprafter.cluster import with_cluster
from apprafter.errors import reported
from apprafter.extras import require
from apprafter.kube_options import kube_options

if TYPE_CHECKING:
    from controller_runtime.client import Kube

__all__ = ["open_app"]


def _browse(url: str, wanted: bool) -> None:
    """Open `url` in the user's graphical browser; on a Linux machine without a display (a server, an SSH session)
    nothing is opened: the URL is printed (webbrowser would otherwise run a console browser such as lynx in the
    foreground, in front of the forward)."""
    import os
    import sys

    if not wanted or (sys.platform.startswith("linux") and not (os.environ.get("DISPLAY")
                                                                  or os.environ.get("WAYLAND_DISPLAY"))):
        return
    import webbrowser

    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return
    browser.open(url)


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def _http_port(pod: dict[str, Any]) -> int | None:
    """The container port named `http` (the rendered Service's targetPort)."""
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == "http":
                return int(port["containerPort"])
    return None


async def _target(kube: Kube, argocd: dict[str, Any]) -> tuple[str, str, int, str]:
    """(namespace, ready pod, its http port, the app's public URL or "")."""
    from renderer.crds import APPLICATION
    from renderer.names import INSTANCE_LABEL

    namespace = argocd["spec"]["destination"]["namespace"]
    name = argocd["metadata"]["labels"]["apprafter.io/app"]
    application = await kube.get(APPLICATION, name, namespace) or {}
    url = str((application.get("status") or {}).get("url") or "")
    pods = [p for p in await listed(kube, kind("v1", "Pod"), namespace, {INSTANCE_LABEL: argocd["metadata"]["name"]})
            if _ready(p) and _http_port(p) is not None]
    if not pods:
        return namespace, "", 0, url
    pod = sorted(pods, key=lambda p: p["metadata"]["name"])[0]
    return namespace, pod["metadata"]["name"], _http_port(pod) or 0, url


@click.command("open")
@click.argument("name")
@click.option("-e", "--env", "environments", multiple=True, metavar="ENV", help="The environment (needed when the "
                                                                               "app runs in several).")
@click.option("--forward", is_flag=True, help="Forward a local port even when the app is public.")
@click.option("--port", "local_port", type=click.IntRange(0, 65535), default=0, show_default="any free port",
              help="The local port to listen on.")
@click.option("--no-browser", is_flag=True, help="Print the URL only.")
@argocd_namespace_option
@kube_options
@reported
def open_app(name: str, environments: tuple[str, ...], forward: bool, local_port: int, no_browser: bool,
             argocd_namespace: str, kubeconfig: Path | None, kube_context: str | None) -> None:
    """Open app NAME: its public URL, or a local port forwarded to one of its pods (the URL is printed; Ctrl-C
    stops the forward)."""
    require("app open")

    async def run(kube: Kube, _: str) -> None:
        import asyncio

        from controller_runtime.port_forward import forward as start_forward

        argocd = await one_environment(kube, argocd_namespace, name, environments)
        namespace, pod, port, url = await _target(kube, argocd)
        if url.startswith("https://") and not forward:
            sys.stdout.write(url + "\n")
            _browse(url, not no_browser)
            return
        if not pod:
            raise failure(f"app/{name}", f"no ready pod of {argocd['metadata']['name']} to forward to "
                          f"(`apprafter app status {name}` says why)")
        errors: asyncio.Queue[BaseException] = asyncio.Queue()
        forwarding = await start_forward(kube, namespace, pod, port, local_port, errors)
        local = f"http://127.0.0.1:{forwarding.port}/"
        sys.stdout.write(local + "\n")
        sys.stdout.flush()
        click.echo(f"forwarding 127.0.0.1:{forwarding.port} to pod {pod} port {port} in {namespace}; Ctrl-C stops "
                   "it", err=True)
        _browse(local, not no_browser)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):  # a stop ends the forward and exits 0, as kubectl's does
            loop.add_signal_handler(signum, stop.set)
        try:
            while not stop.is_set():  # each failed connection said, the listener kept
                said = asyncio.ensure_future(errors.get())
                stopped = asyncio.ensure_future(stop.wait())
                await asyncio.wait([said, stopped], return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
                if said.done():
                    click.echo(f"error: {said.result()}", err=True)
                else:
                    said.cancel()
        finally:
            await forwarding.close()

    with contextlib.suppress(KeyboardInterrupt):
        with_cluster(kubeconfig, kube_context, run)
