#!/usr/bin/env bash
# What the GitOps loop tier (tests/argocd, scripts/demo_gitops.sh) needs beyond the pinned binaries:
#   - redis-server (Debian package, apt-get, only when missing): Argo CD's repo-server and controller cache;
#   - Argo CD's own install manifest at the pinned version (manifests/install.yaml of the Go module download),
#     copied to $TOOLS_DIR/argocd-install/<version>/: the loop starts from its ConfigMaps, as a real install.
# Idempotent; called by tools/setup.sh as `setup-gitops.sh $TOOLS_DIR`. Prints one line per part.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
TOOLS_DIR=${1:-${APPRAFTER_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/apprafter/tools}}
log() { printf 'setup: %-22s %s\n' "$1" "$2"; }
redis_version() { redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'; }

if command -v redis-server >/dev/null 2>&1; then
  log "redis-server" "present ($(redis_version))"
else
  start=$SECONDS
  # The tests start redis-server themselves on a free loopback port; the package's own service is not used.
  "$here/apt-install.sh" "redis-server" redis-server
  log "redis-server" "installed $(redis_version) in $((SECONDS - start))s"
fi

dest="$TOOLS_DIR/argocd-install/$ARGOCD_VERSION"
if [[ -f "$dest/install.yaml" ]]; then
  log "argocd install.yaml" "cached"
else
  command -v go >/dev/null || { echo "setup: go not found: install Go >= 1.24" >&2; exit 2; }
  json=$(cd "$TOOLS_DIR" && go mod download -json "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION") || {
    echo "setup: go mod download github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION failed: $json" >&2; exit 2; }
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [[ -f "$dir/manifests/install.yaml" ]] || { echo "setup: no manifests/install.yaml in $dir" >&2; exit 2; }
  mkdir -p "$dest"
  cp "$dir/manifests/install.yaml" "$dest/install.yaml.tmp.$$" && mv "$dest/install.yaml.tmp.$$" "$dest/install.yaml"
  log "argocd install.yaml" "$ARGOCD_VERSION from the Go module"
fi
