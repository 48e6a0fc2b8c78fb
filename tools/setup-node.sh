#!/usr/bin/env bash
# What the node tier (tests/testbed/node.py) needs beyond the pinned Kubernetes binaries:
#   - containerd, the CNI plugins, iptables (kube-proxy's, inside the bed's network namespace), iproute2 and
#     util-linux's nsenter: Debian packages (NODE_TOOLS in versions.env), apt-get, only what is missing;
#   - the pod sandbox image: the static pause binary tools/setup.sh built, committed with buildah into
#     podman's storage as localhost/apprafter-pause:<source hash> (the bed imports it into its containerd).
# Idempotent; called by tools/setup.sh as `setup-node.sh $TOOLS_DIR` after setup-images.sh. One line per part.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
TOOLS_DIR=${1:-${APPRAFTER_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/apprafter/tools}}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
log() { printf 'setup: %-22s %s\n' "$1" "$2"; }

# NODE_TOOLS (versions.env): command:package:minimum; a command may be a path (the CNI plugins are off PATH).
missing=()
IFS=, read -ra entries <<<"$NODE_TOOLS"
for entry in "${entries[@]}"; do
  IFS=: read -r cmd package _ <<<"$entry"
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  start=$SECONDS
  # containerd's package ships a systemd unit only: nothing starts it here (the bed runs its own).
  "$here/apt-install.sh" "node tier" $(printf '%s\n' "${missing[@]}" | sort -u)
  log "node tools" "installed $(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')in $((SECONDS - start))s"
else
  log "node tools" "present (containerd $(dpkg-query -W -f '${Version}' containerd), CNI plugins $(dpkg-query -W -f '${Version}' containernetworking-plugins))"
fi

key=$(cat "$here/pause/main.go" "$here/pause/go.mod" | sha256sum | cut -c1-12)
binary="$TOOLS_DIR/pause/$key/pause"
image="localhost/apprafter-pause:$key"
[[ -x "$binary" ]] || { echo "setup: pause binary $binary missing: run tools/setup.sh pause" >&2; exit 2; }
if podman image exists "$image"; then
  log "pause image" "cached $image"
else
  start=$SECONDS
  ctr=$(buildah from scratch)
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  buildah copy --quiet --chmod 0755 "$ctr" "$binary" /pause >/dev/null
  # uid 65535 as Kubernetes' own pause image; the timestamp keeps the image ID the same on every machine.
  buildah config --entrypoint '["/pause"]' --user 65535:65535 --label org.opencontainers.image.title=apprafter-pause "$ctr"
  buildah commit --quiet --timestamp 1747699200 "$ctr" "$image" >/dev/null
  log "pause image" "built $image in $((SECONDS - start))s"
fi
