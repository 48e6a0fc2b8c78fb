"""Platform-stack releases as the release pipeline makes them, for the tests that consume them (the PlatformStack
controller, Argo CD pulling the umbrella): charts built with `apprafter stack build --version` from one source moved
release by release, cosign key pairs made by cosign, and a Publisher that pushes (`stack push`) and signs
(`stack sign`) them into a loopback registry, or moves a tag as someone with push rights could."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from platform_stack.credentials import Credential
from platform_stack.oci import (
    CHART_LAYER_MEDIA_TYPE,
    CONFIG_MEDIA_TYPE,
    config_json,
    manifest_annotations,
    read_archive,
)
from platform_stack.registry import RegistryClient
from platform_stack.source import SOURCE_DIR, evaluate
from tests.platform_stack.conftest import cli as stack_cli
from tests.platform_stack.conftest import ok
from tests.testbed.distribution import AuthRegistry
from toolchain.tools import resolve, tools_dir

# A release: its version, the component field it moves (component, text before, text after) or None, and the class
# its compatibility entry gives each component it names (the others: safe).
Release = tuple[str, tuple[str, str, str] | None, dict[str, str]]
KeyPair = tuple[Path, Path, str]  # private key, public key, password
OWN_REGISTRY = "ghcr.io/apprafter"  # where platform_stack/components/ names this project's charts and images


def build_releases(root: Path, releases: Sequence[Release], minimums: Mapping[str, str] | None = None,
                   registry: str | None = None) -> dict[str, Path]:
    """version -> chart .tgz, each built from one source copy moved release by release (a compatibility entry per
    version, written before the first build; its minimumKubernetesVersion from `minimums`, else 1.30.0). With
    `registry`, the copy names that registry for this project's charts and images instead of ghcr.io/apprafter, as
    a fork publishing to its own registry would build its stack."""
    source = root / "source"
    shutil.copytree(SOURCE_DIR, source, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    if registry is not None:
        for path in source.rglob("*.cue"):
            text = path.read_text()
            if OWN_REGISTRY in text:
                path.write_text(text.replace(f'"{OWN_REGISTRY}', f'"{registry}'))
    names = sorted(evaluate(SOURCE_DIR, "all")["values"]["components"])
    entries = []
    for version, _, classes in releases:
        components = ", ".join(f'"{n}": "{classes.get(n, "safe")}"' for n in names)
        minimum = (minimums or {}).get(version, "1.30.0")
        entries.append(f'compatibilityTable: "{version}": {{minimumKubernetesVersion: "{minimum}", '
                       f"components: {{{components}}}}}")
    compat = source / "compatibility.cue"
    compat.write_text(compat.read_text() + "\n" + "\n".join(entries) + "\n")
    out: dict[str, Path] = {}
    for version, move, _ in releases:
        if move is not None:
            component, before, after = move
            path = source / "components" / f"{component}.cue"
            path.write_text(path.read_text().replace(before, after))
        line = ok(stack_cli("stack", "build", "--out", str(root / version), "--source", str(source),
                            "--version", version)).strip()
        out[version] = Path(line.split("  ", 1)[1])
    return out


def key_pairs(where: Path, names: Sequence[str]) -> dict[str, KeyPair]:
    """One cosign key pair per name, made by the real cosign (`cosign generate-key-pair`)."""
    made = {}
    for name in names:
        password = f"pw-{name}"
        subprocess.run([str(resolve("cosign")), "generate-key-pair", "--output-key-prefix", name], cwd=where,
                       env={"PATH": os.environ["PATH"], "HOME": str(where), "COSIGN_PASSWORD": password},
                       check=True, capture_output=True, timeout=60)
        made[name] = (where / f"{name}.key", where / f"{name}.pub", password)
    return made


class Publisher:
    """Pushes and signs charts as the release pipeline does (`apprafter stack push` / `stack sign`)."""

    def __init__(self, registry: AuthRegistry, charts: dict[str, Path], keys: dict[str, KeyPair],
                 workdir: Path) -> None:
        self.registry, self.charts, self.keys = registry, charts, keys
        self.env = {**os.environ, "DOCKER_CONFIG": str(registry.docker_config(workdir / "docker")),
                    "APPRAFTER_TOOLS_DIR": str(tools_dir())}
        self.digests: dict[tuple[str, str], str] = {}

    def publish(self, repo: str, releases: list[tuple[str, str | None]]) -> str:
        """Push each version to <repo>/platform-stack and sign it with the named key (None: unsigned)."""
        def push(item: tuple[str, str | None]) -> None:
            version = item[0]
            ref = ok(stack_cli("stack", "push", str(self.charts[version]), "--to", f"oci://{self.registry.url}/{repo}",
                               "--plain-http", env=self.env)).strip()
            self.digests[(repo, version)] = ref.rsplit("@", 1)[1]

        def sign(item: tuple[str, str | None]) -> None:
            version, key = item
            push(item)
            if key is not None:
                self.sign(repo, version, key)

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(sign, releases))
        return repo

    def sign(self, repo: str, version: str, key: str) -> None:
        """`stack sign` of a pushed version by its digest with the named key (a release signed after its push)."""
        private, _, password = self.keys[key]
        ref = f"{self.registry.url}/{repo}/platform-stack@{self.digests[(repo, version)]}"
        ok(stack_cli("stack", "sign", ref, "--key", str(private), "--plain-http",
                     env={**self.env, "COSIGN_PASSWORD": password}))

    def digest(self, repo: str, version: str) -> str:
        return self.digests[(repo, version)]

    def move_tag(self, repo: str, tag: str, chart: Path) -> str:
        """Push `chart` under an existing tag, as someone with push rights and another client could (our push
        refuses to); the digest the tag names afterwards."""
        archive = read_archive(chart)
        client = RegistryClient(self.registry.url, True, Credential(self.registry.user, self.registry.password,
                                                                    "test"), [])
        with tempfile.TemporaryDirectory() as tmp:
            layer, config = Path(tmp) / chart.name, Path(tmp) / "config.json"  # as `stack push` names them
            layer.write_bytes(archive.data)
            config.write_bytes(config_json(archive))
            client.push_artifact(f"{self.registry.url}/{repo}/platform-stack:{tag}",
                                 [f"{layer}:{CHART_LAYER_MEDIA_TYPE}"], f"{config}:{CONFIG_MEDIA_TYPE}",
                                 manifest_annotations(archive))
        found = client.manifest(f"{repo}/platform-stack", tag)
        assert found is not None
        return found[0]
