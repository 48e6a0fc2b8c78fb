#!/usr/bin/env bash
# Installs the container tools that `make images`, `make publish` and the image tests run (Debian packages,
# apt-get, only what is missing), then builds the local base image once (tools/base-image.sh, cached by
# its recipe). Idempotent; called by tools/setup.sh. Prints one line per step, like setup.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf 'setup: %-22s %s\n' "$1" "$2"; }

# shellcheck source=versions.env
source "$here/versions.env"
# CONTAINER_TOOLS (versions.env): command:package:minimum. newuidmap (uidmap) maps users for buildah and
# podman; runc is the runtime podman is told to use here (tools/containers.conf).
missing=()
IFS=, read -ra entries <<<"$CONTAINER_TOOLS"
for entry in "${entries[@]}"; do
  IFS=: read -r cmd package _ <<<"$entry"
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$package")
done

if ((${#missing[@]})); then
  start=$SECONDS
  "$here/apt-install.sh" --with-recommends "container tools" "${missing[@]}"
  log "container tools" "installed ${missing[*]} in $((SECONDS - start))s"
else
  log "container tools" "present ($(podman --version | awk '{print $NF}') podman, $(buildah --version | awk '{print $3}') buildah)"
fi

"$here/base-image.sh" >/dev/null
# The bases with more packages (versions.env): built here once rather than by the first `make images` or test.
for packages in "$GITOPS_PACKAGES" "postgresql-$POSTGRES_MAJOR,$POSTGRES_EXTRA_PACKAGES" "$SHOP_PACKAGES"; do
  start=$SECONDS
  "$here/base-image.sh" --with "$packages" >/dev/null
  log "base image" "with $packages ($((SECONDS - start))s)"
done
