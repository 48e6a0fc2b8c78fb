#!/usr/bin/env bash
# Builds and publishes the project's OCI images and its Helm charts (docs/images.md):
# buildah builds into podman's storage, skopeo copies, `apprafter stack push` pushes the chart, cosign signs
# (through `apprafter stack sign|verify`, the platform chart's signing code).
#
#   tools/images.sh build [NAME...]            build $IMAGE_PREFIX/<name>:<version> (default: every image;
#                                              `argocd` and `traefik` are tagged with their pins); an image whose inputs
#                                              did not change is kept, not rebuilt
#   tools/images.sh publish REPO [TARGET...]   push each image (default: the release's, argocd-cue-cmp and
#                                              apprafter-operator) to REPO/<name>:<version> and the charts (target
#                                              `chart`: every chart of deploy/charts/) to
#                                              REPO/charts/<chart>:<version>, sign each by digest, verify; prints
#                                              REPO/...:<version>@sha256:<digest> per image and chart
#
# Environment: PYTHON (default .venv/bin/python), IMAGE_PREFIX (default localhost), BASE (default: the
# local base from tools/base-image.sh; the images with more Debian packages always use theirs), CA_BUNDLE (the build secret pip trusts, default the system bundle),
# SOURCE_DATE_EPOCH (default: the last commit's time). publish: COSIGN_KEY (private key), COSIGN_PASSWORD,
# COSIGN_PUBLIC_KEY (default: COSIGN_KEY with .pub), PLAIN_HTTP=1 for a registry without TLS. Registry
# credentials: `skopeo login --authfile ~/.docker/config.json HOST` (cosign and the chart push read it too).
# Exit 1: a problem with the input (stale lock, moved tag); 2: a tool or the environment, with the remedy.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=versions.env
source tools/versions.env
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/tools/containers.conf}
PYTHON=${PYTHON:-$root/.venv/bin/python}
PREFIX=${IMAGE_PREFIX:-localhost}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

# name -> Dockerfile; the pinned tools its venv ships (into /opt/apprafter/bin); files of the repository it
# COPYs. Each image gets a build context of its own (see stage()), so its inputs hash covers only what it uses.
declare -A DOCKERFILE=([argocd-cue-cmp]=Dockerfile [apprafter-operator]=deploy/images/operator.Dockerfile
                       [argocd]=deploy/images/argocd.Dockerfile [redis]=deploy/images/redis.Dockerfile
                       [cnpg]=deploy/images/cnpg.Dockerfile [postgresql]=deploy/images/postgresql.Dockerfile
                       [pgbouncer]=deploy/images/pgbouncer.Dockerfile
                       [traefik]=deploy/images/traefik.Dockerfile [versitygw]=deploy/images/versitygw.Dockerfile)
declare -A SHIPS=([argocd-cue-cmp]="cue" [apprafter-operator]="cue cosign" [argocd]="argocd helm kustomize" [redis]=""
                  [cnpg]="cnpg-manager" [postgresql]="" [pgbouncer]="" [traefik]="traefik" [versitygw]="versitygw")
declare -A COPIES=([argocd-cue-cmp]="plugin.yaml" [apprafter-operator]="" [argocd]="" [redis]="" [cnpg]="" [postgresql]="" [pgbouncer]=""
                   [traefik]="" [versitygw]="")
# The images with our Python package in a venv (deploy/images/install-venv.sh: the wheel and the lock staged).
declare -A VENV=([argocd-cue-cmp]=1 [apprafter-operator]=1)
# Argo CD's image and its Redis share one base, CloudNativePG's operand has its own (GITOPS_PACKAGES and
# POSTGRES_MAJOR, POSTGRES_EXTRA_PACKAGES: tools/versions.env, which tools/setup-images.sh builds them from too).
declare -A BASE_WITH=([argocd]=$GITOPS_PACKAGES [redis]=$GITOPS_PACKAGES
                      [postgresql]=postgresql-$POSTGRES_MAJOR,$POSTGRES_EXTRA_PACKAGES [pgbouncer]=pgbouncer)
ALL=(argocd-cue-cmp apprafter-operator argocd redis cnpg postgresql pgbouncer traefik versitygw)
RELEASE=(argocd-cue-cmp apprafter-operator)  # what `publish` pushes by default
# The project's Helm charts: every directory of deploy/charts (versioned with the package), in name order;
# `publish` pushes and signs them after the images (target name `chart`). The platform stack names each.
CHARTS=()
for chart_dir in deploy/charts/*/; do chart_dir=${chart_dir%/}; CHARTS+=("${chart_dir##*/}"); done

log() { printf 'images: %s\n' "$*" >&2; }
die() { local code=$1; shift; printf 'images: %s\n' "$*" >&2; exit "$code"; }

[[ -x "$PYTHON" ]] || die 2 "$PYTHON not found: run \`make setup\`"
for cmd in buildah podman skopeo; do
  command -v "$cmd" >/dev/null || die 2 "$cmd not found: run \`make setup\` (tools/setup-images.sh)"
done
VERSION=$("$PYTHON" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')

names() {
  if (($# == 0)); then printf '%s\n' "${ALL[@]}"; return; fi
  local n; for n in "$@"; do [[ -n "${DOCKERFILE[$n]:-}" ]] || die 1 "unknown image $n (known: ${ALL[*]})"; echo "$n"; done
}

# wheel DIR: this package as a wheel in DIR (hatchling honours SOURCE_DATE_EPOCH: same source, same wheel).
wheel() {
  rm -rf "$1"; mkdir -p "$1"
  SOURCE_DATE_EPOCH=$SDE "$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$1" . >&2 \
    || die 2 "building the package wheel failed (see above)"
}

# tag NAME: the image's tag (Argo CD's and Traefik's images carry the version they are built from).
# CloudNativePG's image carries its version as upstream tags it (1.26.1), the PostgreSQL image its major.
tag() {
  case "$1" in
    argocd) echo "$ARGOCD_VERSION" ;;
    traefik) echo "$TRAEFIK_VERSION" ;;
    versitygw) echo "${VERSITYGW_VERSION#v}" ;;
    cnpg) echo "${CNPG_VERSION#v}" ;;
    postgresql) echo "$POSTGRES_MAJOR" ;;
    *) echo "$VERSION" ;;
  esac
}

# stage NAME DIR WHEELS: the build context of one image: the wheel, the pinned dependencies, the venv script
# (venv images), the pinned tools it ships (bin/) and the files its Dockerfile copies.
stage() {
  local name=$1 ctx=$2 wheels=$3
  rm -rf "$ctx"; mkdir -p "$ctx/bin"
  if [[ -n "${VENV[$name]:-}" ]]; then
    cp -r "$wheels" "$ctx/wheels"
    cp deploy/images/requirements.txt deploy/images/install-venv.sh "$ctx/"
  fi
  local tool path file
  for tool in ${SHIPS[$name]}; do
    path=$("$PYTHON" -c 'import sys; from toolchain.tools import check; print(check(sys.argv[1]))' "$tool") \
      || die 2 "the pinned $tool is missing: run \`make setup\`"
    cp "$path" "$ctx/bin/$tool"
  done
  for file in ${COPIES[$name]}; do cp "$file" "$ctx/"; done
  if [[ "$name" == argocd ]]; then
    # The scripts upstream's image has beside the binary, from the Argo CD module (tools/setup-gitops.sh).
    local scripts; scripts=$("$PYTHON" -c 'from toolchain.tools import tools_dir; print(tools_dir())')/argocd-install/$ARGOCD_VERSION/bin
    for file in gpg-wrapper.sh git-verify-wrapper.sh entrypoint.sh; do
      [[ -x "$scripts/$file" ]] || die 2 "$scripts/$file is missing: run \`make setup\` (tools/setup-gitops.sh)"
      cp "$scripts/$file" "$ctx/bin/"
    done
  fi
}

# base_for NAME: the base image NAME builds on (built by tools/base-image.sh when missing).
base_for() {
  local with=${BASE_WITH[$1]:-}
  if [[ -z "$with" && -n "${BASE:-}" ]]; then echo "$BASE"; return; fi
  tools/base-image.sh ${with:+--with "$with"} || die 2 "the base image could not be built (see above)"
}

build() {
  "$PYTHON" scripts/lock_image_requirements.py --check || exit 1
  [[ -r "$CA_BUNDLE" ]] || die 2 "CA bundle $CA_BUNDLE not readable: set CA_BUNDLE to the bundle pip should trust"
  SDE=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
  local revision; revision=$(git rev-parse HEAD)
  [[ -z "$(git status --porcelain)" ]] || revision="$revision-dirty"
  local wheeled="" name
  for name in $(names "$@"); do
    local tag="$PREFIX/$name:$(tag "$name")" dockerfile=${DOCKERFILE[$name]} ctx=build/images/$name
    local base; base=$(base_for "$name") || exit 2
    podman image exists "$base" || die 2 "base image $base not in podman's storage: run tools/base-image.sh or set BASE"
    local base_id; base_id=$(podman image inspect --format '{{.Id}}' "$base")
    if [[ -n "${VENV[$name]:-}" && -z "$wheeled" ]]; then wheel build/images/wheels; wheeled=1; fi
    stage "$name" "$ctx" build/images/wheels
    # An image without our package is stamped with the last commit of its own recipe, not the checkout's, so a
    # commit elsewhere does not rebuild it (its inputs hash still covers every file it is made of).
    local sde=$SDE rev=$revision
    if [[ -z "${VENV[$name]:-}" ]]; then
      sde=$(git log -1 --format=%ct -- "$dockerfile" tools/images.sh); sde=${sde:-$SDE}
      rev=$(git log -1 --format=%H -- "$dockerfile" tools/images.sh); rev=${rev:-$revision}
      [[ -z "$(git status --porcelain -- "$dockerfile" tools/images.sh)" ]] || rev="${rev%-dirty}-dirty"
    fi
    # Everything the image is made of; an image carrying the same hash is up to date.
    local inputs; inputs=$( { echo "$name $VERSION $rev $sde $base_id"; cat "$dockerfile";
                              (cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum); } | sha256sum | cut -c1-64)
    local old; old=$(podman image inspect --format '{{.Id}} {{index .Labels "dev.apprafter.inputs"}}' "$tag" 2>/dev/null || true)
    if [[ "${old#* }" == "$inputs" ]]; then
      log "$tag up to date (${old:0:12})"
      continue
    fi
    local start=$SECONDS
    buildah bud --quiet --isolation chroot --timestamp "$sde" --secret "id=ca,src=$CA_BUNDLE" \
      --build-arg "BASE=$base" --build-arg "VERSION=$VERSION" --build-arg "REVISION=$rev" \
      --build-arg "SOURCE_DATE_EPOCH=$sde" --build-arg "ARGOCD_VERSION=$ARGOCD_VERSION" \
      --build-arg "CNPG_VERSION=$CNPG_VERSION" --build-arg "TRAEFIK_VERSION=$TRAEFIK_VERSION" \
      --build-arg "VERSITYGW_VERSION=$VERSITYGW_VERSION" \
      --label "dev.apprafter.inputs=$inputs" \
      -f "$dockerfile" -t "$tag" "$ctx" >/dev/null || die 2 "buildah failed building $tag (see above)"
    local id size base_size; id=$(podman image inspect --format '{{.Id}}' "$tag")
    size=$(podman image inspect --format '{{.Size}}' "$tag"); base_size=$(podman image inspect --format '{{.Size}}' "$base")
    log "$tag built in $((SECONDS - start))s: ${id:0:12}, $((size / 1000000)) MB ($(((size - base_size) / 1000000)) MB over the base)"
    # The image this build replaced is unreferenced now; keep the store from growing with every rebuild
    # (it stays when a container still uses it, which podman reports and we ignore).
    if [[ -n "$old" && "${old%% *}" != "$id" ]]; then podman image rm "${old%% *}" >/dev/null 2>&1 || true; fi
  done
}

# remote_manifest REF FILE: write the manifest behind docker://REF to FILE; false when there is no such tag.
remote_manifest() {
  local err
  if err=$(skopeo inspect --raw "${TLS[@]}" "docker://$1" 2>&1 >"$2"); then
    return 0
  elif grep -qiE "manifest unknown|name unknown" <<<"$err"; then  # no such tag, or no such repository yet
    return 1
  else
    die 2 "registry for $1 did not answer: $(tail -1 <<<"$err")"
  fi
}

# sign_once REPOSITORY TAG DIGEST: sign REPOSITORY@DIGEST unless this key's signature verifies already (a re-run
# adds no second signature), then verify it by tag and digest.
sign_once() {
  local repository=$1 tag=$2 digest=$3
  local ref="$repository:$tag@$digest"
  if "${APPRAFTER[@]}" stack verify "$ref" --key "$PUB" "${PLAIN[@]}" >/dev/null 2>&1; then
    log "$ref already signed with $PUB"
    return
  fi
  "${APPRAFTER[@]}" stack sign "$repository@$digest" --key "$KEY" --password-env COSIGN_PASSWORD "${PLAIN[@]}" >&2 \
    || die 2 "signing $ref failed (see above)"
  "${APPRAFTER[@]}" stack verify "$ref" --key "$PUB" "${PLAIN[@]}" >&2 \
    || die 2 "$ref: the signature does not verify with $PUB"
}

publish_image() {
  local repo=$1 name=$2
  local src="$PREFIX/$name:$(tag "$name")" dest="$repo/$name:$(tag "$name")" digest
  podman image exists "$src" || die 2 "$src not built: run \`make images\`"
  local id; id=sha256:$(podman image inspect --format '{{.Id}}' "$src")
  if remote_manifest "$dest" "$work/$name.manifest"; then
    # The tag exists: it must hold this very image (same config digest = same image ID), never another.
    local theirs; theirs=$("$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["config"]["digest"])' \
                           <"$work/$name.manifest") || die 2 "$dest: the registry's manifest has no config digest"
    [[ "$theirs" == "$id" ]] || die 1 "$dest already holds image ${theirs:7:12}, not this build's ${id:7:12}: tags are immutable, bump the version in pyproject.toml"
    digest=sha256:$(sha256sum <"$work/$name.manifest" | cut -d' ' -f1)
    log "$dest@$digest already in the registry"
  else
    skopeo copy --quiet "${TLS[@]/--tls-verify/--dest-tls-verify}" --digestfile "$work/$name.digest" \
      "containers-storage:$src" "docker://$dest" >&2 || die 2 "pushing $dest failed (see above): check the registry and its credentials"
    digest=$(cat "$work/$name.digest")
    log "pushed $dest@$digest"
  fi
  sign_once "$repo/$name" "$(tag "$name")" "$digest"
  echo "$dest@$digest"
}

# One chart of deploy/charts, packaged byte-reproducibly, to REPO/charts/<name>:<version> with Helm's OCI media
# types (`apprafter stack push`: the same content again is a no-op, other content under the tag is refused).
publish_chart() {
  local repo=$1 chart=deploy/charts/$2 tgz ref code
  tgz=$("$PYTHON" scripts/package_chart.py "$chart" build/charts) || die 2 "packaging $chart failed (see above)"
  ref=$("${APPRAFTER[@]}" stack push "$tgz" --to "oci://$repo/charts" "${PLAIN[@]}") \
    || { code=$?; die "$code" "pushing $tgz failed (see above)"; }
  ref=${ref#oci://}
  local tagged=${ref%@*} digest=${ref#*@}
  log "pushed $ref (a no-op when it was there)"
  sign_once "${tagged%:*}" "${tagged##*:}" "$digest"
  echo "$ref"
}

publish() {
  (($# >= 1)) || die 1 "usage: tools/images.sh publish REPO [NAME...] (REPO like ghcr.io/apprafter)"
  local repo=${1#oci://}; shift
  repo=${repo%/}
  KEY=${COSIGN_KEY:-}
  [[ -n "$KEY" ]] || die 1 "COSIGN_KEY: set it to the cosign private key that signs the images"
  PUB=${COSIGN_PUBLIC_KEY:-${KEY%.key}.pub}
  [[ -n "${COSIGN_PASSWORD+x}" ]] || die 1 "COSIGN_PASSWORD: set it to the key's password (it is never printed)"
  PLAIN=(); TLS=()
  if [[ "${PLAIN_HTTP:-}" == 1 ]]; then PLAIN=(--plain-http); TLS=(--tls-verify=false); fi
  work=$(mktemp -d -t apprafter-publish-XXXXXX)  # global: the EXIT trap runs after this function returns
  trap 'rm -rf "$work"' EXIT
  APPRAFTER=("$PYTHON" -m apprafter)
  local name targets=("$@")
  ((${#targets[@]})) || targets=("${RELEASE[@]}" chart)
  for name in "${targets[@]}"; do
    [[ "$name" == chart || -n "${DOCKERFILE[$name]:-}" ]] || die 1 "unknown target $name (known: ${ALL[*]} chart)"
    if [[ "$name" == chart ]]; then
      local chart; for chart in "${CHARTS[@]}"; do publish_chart "$repo" "$chart"; done
    else
      publish_image "$repo" "$name"
    fi
  done
}

cmd=${1:-}
shift || true
case "$cmd" in
  build) build "$@" ;;
  publish) publish "$@" ;;
  *) die 2 "usage: tools/images.sh build [NAME...] | publish REPO [NAME...]" ;;
esac
