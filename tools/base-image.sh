#!/usr/bin/env bash
# Builds the local base image the images are built on, from Debian packages and this machine's apt sources
# (no container registry needed): mmdebstrap --variant=minbase with python3, python3-venv, ca-certificates,
# slimmed of docs, man pages and locales, committed into podman's storage. Built once per recipe: the name
# carries a hash of this script, the suite and the apt sources, and the root filesystem tarball is cached
# under $APPRAFTER_TOOLS_DIR/base-image/<hash>/ so a wiped image store re-imports in seconds.
#
#   tools/base-image.sh            ensure the image exists; print its name (localhost/apprafter-base:...)
#   tools/base-image.sh --name     print the name only (build nothing)
#   tools/base-image.sh --rebuild  rebuild from the mirror now (e.g. to pick up Debian security updates)
#   tools/base-image.sh --with PKG,PKG [--name|--rebuild]
#                                  the same base with more Debian packages (its own name and cache entry: the
#                                  list is part of the recipe); tools/images.sh asks for it per image (the Argo CD
#                                  and Redis images: git, tini, gpg, openssh-client, redis-server)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS_DIR=${APPRAFTER_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/apprafter/tools}
# podman's flags for this machine live in one file; buildah reads it too.
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}

# The recipe: ROOTFS (mmdebstrap's arguments), CONFIG (the image's), EPOCH, the architecture and the apt
# sources. Changing any of them changes the image name, so the next set-up builds a new base; editing the
# rest of this script does not.
SUITE=$(. /etc/os-release && echo "${VERSION_CODENAME:?/etc/os-release has no VERSION_CODENAME}")
PACKAGES=python3,python3-venv,ca-certificates
if [[ "${1:-}" == --with ]]; then
  [[ "${2:-}" =~ ^[a-z0-9][a-z0-9+.,-]*$ ]] || { echo "usage: tools/base-image.sh --with PKG,PKG [--name|--rebuild]" >&2; exit 2; }
  PACKAGES+=",$2"
  shift 2
fi
# Mtimes in the tarball and the image's creation time (not the package versions: those are the mirror's).
EPOCH=1747699200 # 2025-05-20T00:00:00Z
SLIM=(
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-include=/usr/share/locale/locale.alias'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/lintian/*'
)
# The host's resolver and hostname must not end up in a published base (nor break reproducibility).
# shellcheck disable=SC2016 # $1 is the chroot: mmdebstrap's hook shell expands it, not this one
HOOK='rm -f "$1/etc/resolv.conf" && echo localhost > "$1/etc/hostname"'
ROOTFS=(--variant=minbase --include="$PACKAGES" "${SLIM[@]}" --customize-hook="$HOOK" "$SUITE")
CONFIG=(
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 --cmd /bin/bash
  --label org.opencontainers.image.title=apprafter-base
  --label "org.opencontainers.image.description=Debian $SUITE minbase with $PACKAGES (built by tools/base-image.sh)"
)

# apt reads only *.list and *.sources (and sources.list); so do we, in a fixed order.
sources=()
[[ -s /etc/apt/sources.list ]] && sources+=(/etc/apt/sources.list)
while IFS= read -r -d '' f; do sources+=("$f"); done \
  < <(find /etc/apt/sources.list.d -maxdepth 1 -type f \( -name '*.list' -o -name '*.sources' \) -print0 2>/dev/null | sort -z)
if ((${#sources[@]} == 0)); then
  echo "base-image: no apt sources in /etc/apt/sources.list{,.d/}: configure a Debian mirror" >&2
  exit 2
fi

key=$( { printf '%s\n' "${ROOTFS[@]}" "${CONFIG[@]}" "$EPOCH" "$(dpkg --print-architecture)"; cat "${sources[@]}"; } \
      | sha256sum | cut -c1-12)
NAME="localhost/apprafter-base:$SUITE-$key"

case "${1:-}" in
  --name) echo "$NAME"; exit 0 ;;
  --rebuild) rebuild=1 ;;
  "") rebuild=0 ;;
  *) echo "usage: tools/base-image.sh [--name|--rebuild]" >&2; exit 2 ;;
esac

for cmd in mmdebstrap buildah podman; do
  command -v "$cmd" >/dev/null || { echo "base-image: $cmd not found: run \`make setup\` (tools/setup-images.sh)" >&2; exit 2; }
done

cache="$TOOLS_DIR/base-image/$key"
mkdir -p "$cache"
# One build at a time on this machine (engineers share it); the second waits and then finds the image.
exec 9>"$cache/.lock"
flock 9

log() { printf 'setup: %-22s %s\n' "$1" "$2" >&2; }

if ((rebuild == 0)) && podman image exists "$NAME"; then
  log "base image" "cached $NAME"
  echo "$NAME"
  exit 0
fi

if ((rebuild == 1)) || [[ ! -s "$cache/rootfs.tar" ]]; then
  start=$SECONDS
  tmp="$cache/tmp.$$.rootfs.tar"  # the .tar suffix selects the tar format
  trap 'rm -rf "$tmp"' EXIT
  SOURCE_DATE_EPOCH=$EPOCH mmdebstrap --quiet "${ROOTFS[@]}" "$tmp" "${sources[@]}" \
    || { echo "base-image: mmdebstrap failed (see above): check the apt sources and the network" >&2; exit 2; }
  mv "$tmp" "$cache/rootfs.tar"
  trap - EXIT
  log "base rootfs" "built in $((SECONDS - start))s ($(du -m "$cache/rootfs.tar" | cut -f1) MB)"
fi

start=$SECONDS
ctr=$(buildah from --quiet scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah add --quiet "$ctr" "$cache/rootfs.tar" / >/dev/null
buildah config "${CONFIG[@]}" --label "org.opencontainers.image.version=$SUITE-$key" "$ctr"
buildah commit --quiet --timestamp "$EPOCH" --rm "$ctr" "$NAME" >/dev/null
trap - EXIT
log "base image" "imported $NAME in $((SECONDS - start))s ($(podman image inspect --format '{{.Size}}' "$NAME" | awk '{printf "%d MB", $1/1e6}'))"
echo "$NAME"
