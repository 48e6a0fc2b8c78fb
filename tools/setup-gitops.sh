#!/usr/bin/env bash
# What the GitOps loop tier (tests/argocd, scripts/demo_gitops.sh) needs beyond the pinned binaries:
#   - redis-server (Debian package, apt-get, only when missing): Argo CD's repo-server and controller cache;
#   - Argo CD's own install manifest at the pin and at the oldest supported version (manifests/install.yaml of the
#     Go module download), copied to $TOOLS_DIR/argocd-install/<version>/: the loop starts from its ConfigMaps
#     and RBAC, as a real install, and deploy/argocd is applied onto it in the tests; beside it in bin/, the
#     scripts Argo CD's image ships next to the binary (git-verify-wrapper.sh, gpg-wrapper.sh, entrypoint.sh;
#     tools/images.sh puts them into our Argo CD image).
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

# shellcheck source=argocd/lib.sh
source "$here/argocd/lib.sh"
for version in "$ARGOCD_VERSION" "$ARGOCD_OLDEST_VERSION"; do
  dest="$TOOLS_DIR/argocd-install/$version"
  if [[ -f "$dest/install.yaml" && -x "$dest/bin/git-verify-wrapper.sh" && -x "$dest/bin/entrypoint.sh" ]]; then
    log "argocd install.yaml" "$version cached"
    continue
  fi
  command -v go >/dev/null || { echo "setup: go not found: install Go >= 1.24" >&2; exit 2; }
  json=$(cd "$TOOLS_DIR" && GOTOOLCHAIN=$(argocd_toolchain "$version") \
    go mod download -json "github.com/argoproj/argo-cd/v3@$version") || {
    echo "setup: go mod download github.com/argoproj/argo-cd/v3@$version failed: $json" >&2; exit 2; }
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [[ -f "$dir/manifests/install.yaml" ]] || { echo "setup: no manifests/install.yaml in $dir" >&2; exit 2; }
  # The scripts Argo CD's image puts in /usr/local/bin beside the binary (its Dockerfile): the repo-server runs
  # git-verify-wrapper.sh on every revision from v3.6 on, GnuPG enabled or not.
  tmp="$dest.tmp.$$"; rm -rf "$tmp"; mkdir -p "$tmp/bin"
  cp "$dir/manifests/install.yaml" "$tmp/install.yaml"
  for script in hack/gpg-wrapper.sh hack/git-verify-wrapper.sh entrypoint.sh; do
    install -m 0755 "$dir/$script" "$tmp/bin/${script#hack/}"
  done
  rm -rf "$dest"; mv "$tmp" "$dest"
  log "argocd install.yaml" "$version from the Go module (and its image's scripts)"
done
