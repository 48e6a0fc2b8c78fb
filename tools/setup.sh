#!/usr/bin/env bash
# Installs every external tool the project runs, at the pins in tools/versions.env, into a cache outside
# the repository keyed by version. Idempotent: only what is missing is built. Prints one line per tool.
#
#   tools/setup.sh            install what is missing
#   tools/setup.sh cue        only the named tools (e.g. what `apprafter render` needs)
#   APPRAFTER_TOOLS_DIR=...   where the cache lives (default ~/.cache/apprafter/tools)
#
# Layout: $TOOLS_DIR/<tool>/<version>/<binary>, plus $TOOLS_DIR/bin/<binary> -> the pinned one.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
TOOLS_DIR=${APPRAFTER_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/apprafter/tools}
mkdir -p "$TOOLS_DIR/bin"
export GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0

command -v go >/dev/null || { echo "setup: go not found: install Go >= 1.24 (this project's machines ship Go 1.26)" >&2; exit 2; }

log() { printf 'setup: %-22s %s\n' "$1" "$2"; }

# link NAME VERSION: point $TOOLS_DIR/bin/NAME at the cached binary.
link() { ln -sfn "$TOOLS_DIR/$1/$2/$1" "$TOOLS_DIR/bin/$1"; }
# linked NAME VERSION: link, unless NO_LINK is set (a second version of a tool, cached beside the pinned one).
linked() { [[ -n ${NO_LINK:-} ]] || link "$1" "$2"; }

# on_path_at NAME VERSION CMD...: true when NAME on PATH (outside our cache) reports VERSION.
on_path_at() {
  local name=$1 version=$2; shift 2
  local p; p=$(command -v "$name" 2>/dev/null) || return 1
  [[ "$p" == "$TOOLS_DIR"* ]] && return 1
  "$@" 2>/dev/null | grep -q -- "${version#v}" || return 1
  mkdir -p "$TOOLS_DIR/$name/$version"; ln -sfn "$p" "$TOOLS_DIR/$name/$version/$name"
}

wanted=("$@")
# wants NAME: true when no tools were named on the command line, or NAME was.
wants() { [[ ${#wanted[@]} -eq 0 ]] || [[ " ${wanted[*]} " == *" $1 "* ]]; }

# recipe BUILD_FN: a hash of how a tool is built (the function's text, with the pins it expands), so that a
# changed recipe rebuilds a tool whose version did not change.
# A function that calls kube_command hashes its text too (a build function's own text alone would miss it).
recipe() {
  { declare -f "$1"; if declare -f "$1" | grep -q kube_command; then declare -f kube_command; fi; } \
    | sed "s|\$HELM_COMMIT|$HELM_COMMIT|g" | sha256sum | cut -c1-16
}

# ensure NAME VERSION BUILD_FN [VERSION_CMD...]: build into the cache when missing or built by another recipe,
# then link. A binary cached before recipes were stamped is kept when verify_NAME (if defined) accepts it.
ensure() {
  local name=$1 version=$2 build=$3; shift 3
  wants "${WANT_AS:-$name}" || return 0
  local dest="$TOOLS_DIR/$name/$version" want; want=$(recipe "$build")
  if [[ -x "$dest/$name" ]]; then
    local have; have=$(cat "$dest/.recipe" 2>/dev/null || true)
    if [[ -z "$have" ]] && { ! declare -F "verify_$name" >/dev/null || "verify_$name" "$dest/$name"; }; then
      echo "$want" > "$dest/.recipe"; have=$want
    fi
    if [[ "$have" == "$want" ]]; then log "$name $version" "cached"; linked "$name" "$version"; return; fi
    log "$name $version" "built by another recipe: rebuilding"
  fi
  if [[ $# -gt 0 ]] && on_path_at "$name" "$version" "$@"; then log "$name $version" "reused from PATH"; linked "$name" "$version"; return; fi
  local start=$SECONDS tmp="$dest.tmp.$$"
  mkdir -p "$tmp"
  "$build" "$tmp" || { rm -rf "$tmp"; echo "setup: building $name $version failed (see above)" >&2; exit 2; }
  echo "$want" > "$tmp/.recipe"
  rm -rf "$dest"; mv "$tmp" "$dest"
  linked "$name" "$version"
  log "$name $version" "built in $((SECONDS - start))s"
}

build_cue() { GOBIN=$1 go install -trimpath "cuelang.org/go/cmd/cue@$CUE_VERSION"; }
# As helm's Makefile builds a release: version, commit, tree state, and the Kubernetes version it assumes
# without --kube-version (client-go's minor + 1.x, as K8S_MODULES_MAJOR_VER/MINOR_VER; else v1.20).
build_helm() {
  local gomod client major minor pkg=helm.sh/helm/v3
  gomod=$(go mod download -json "$pkg@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  client=$(awk '$1 == "k8s.io/client-go" {print $2}' "$gomod"); client=${client#v}
  major=$(( ${client%%.*} + 1 )); minor=${client#*.}; minor=${minor%%.*}
  GOBIN=$1 go install -trimpath -ldflags "-s -w -X $pkg/internal/version.version=$HELM_VERSION \
    -X $pkg/internal/version.gitCommit=$HELM_COMMIT -X $pkg/internal/version.gitTreeState=clean \
    -X $pkg/pkg/lint/rules.k8sVersionMajor=$major -X $pkg/pkg/lint/rules.k8sVersionMinor=$minor \
    -X $pkg/pkg/chartutil.k8sVersionMajor=$major -X $pkg/pkg/chartutil.k8sVersionMinor=$minor" \
    "$pkg/cmd/helm@$HELM_VERSION"
}
verify_helm() { "$1" version 2>/dev/null | grep -q "GitCommit:\"$HELM_COMMIT\""; }
build_cosign() {
  GOBIN=$1 go install -trimpath -ldflags "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$COSIGN_VERSION" \
    "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION"
}
build_registry() { GOBIN=$1 go install -trimpath -ldflags "-s -w" "github.com/google/go-containerregistry/cmd/registry@$GGCR_REGISTRY_VERSION"; }
# A Debian package, not a Go build: apt-get installs the pinned version, the cache links to it.
build_docker_registry() {
  local want=${DOCKER_REGISTRY_VERSION#v}
  if ! docker-registry --version 2>/dev/null | grep -q " v\?$want"; then
    "$here/apt-install.sh" "docker-registry $want" "docker-registry=$want*" || return 1
  fi
  ln -s "$(command -v docker-registry)" "$1/docker-registry"
}
build_etcd() { (cd "$here/kube" && go build -trimpath -ldflags "-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3); }
build_kube_apiserver() {
  local v=${KUBERNETES_VERSION#v} pkg=k8s.io/component-base/version
  local major=${v%%.*} minor; minor=${v#*.}; minor=${minor%%.*}
  (cd "$here/kube" && go build -trimpath -ldflags "-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
    -o "$1/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
}
# kube_command DEST NAME: k8s.io/kubernetes/cmd/NAME from the tools module, stamped as kube-apiserver is (and
# client-go's version package too, which kubectl reports).
kube_command() {
  local v=${KUBERNETES_VERSION#v} stamp="" pkg
  local major=${v%%.*} minor; minor=${v#*.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  (cd "$here/kube" && go build -trimpath -ldflags "-s -w$stamp" -o "$1/$2" "k8s.io/kubernetes/cmd/$2")
}
# The node tier's servers and kubectl (tests/testbed/node.py), from the same pin and tools module.
build_kube_controller_manager() { kube_command "$1" kube-controller-manager; }
build_kube_scheduler() { kube_command "$1" kube-scheduler; }
build_kubelet() { kube_command "$1" kubelet; }
build_kube_proxy() { kube_command "$1" kube-proxy; }
build_kubectl() { kube_command "$1" kubectl; }
# The pod sandbox's process (tools/pause): static, no registry needed for the node tier's sandbox image.
build_pause() { (cd "$here/pause" && go build -trimpath -ldflags "-s -w" -o "$1/pause" .); }
# Argo CD: one tools module per release line, tools/argocd/<major.minor>/ (tools/argocd/gen-module.sh writes it
# from argo-cd's go.mod); built with the Go toolchain its go.mod names (GOTOOLCHAIN; the module proxy serves
# golang.org/toolchain), for the version in $argocd_version.
# shellcheck source=argocd/lib.sh
source "$here/argocd/lib.sh"
build_argocd() {
  local dir; dir=$(argocd_module "$argocd_version")
  (cd "$dir" && GOTOOLCHAIN=$(argocd_toolchain "$argocd_version") go build -trimpath \
    -ldflags "-s -w -X github.com/argoproj/argo-cd/v3/common.version=${argocd_version#v}" \
    -o "$1/argocd" github.com/argoproj/argo-cd/v3/cmd)
}
build_kustomize() { GOBIN=$1 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"; }
# The CMP client of one line: tools/argocd/cmpclient staged beside that line's go.mod and go.sum; lines whose
# gitops-engine is its own module (v3.0-v3.2) take it from there (build tag gitops_engine_module).
build_argocd_cmp_client() {
  local dir stage tags="" rc=0; dir=$(argocd_module "$argocd_version"); stage=$(mktemp -d)
  cp "$dir/go.mod" "$dir/go.sum" "$stage/" && cp -r "$here/argocd/cmpclient" "$stage/cmpclient"
  grep -Eq '^[[:space:]]*github.com/argoproj/gitops-engine v' "$dir/go.mod" && tags=gitops_engine_module
  (cd "$stage" && GOTOOLCHAIN=$(argocd_toolchain "$argocd_version") go build -trimpath -tags "$tags" -ldflags "-s -w" \
    -o "$1/argocd-cmp-client" ./cmpclient) || rc=$?
  rm -rf "$stage"; return "$rc"
}

# SealedSecrets (controller and kubeseal) from its module zip: the module calls itself github.com/bitnami/...
# while the proxy serves it as github.com/bitnami-labs/..., so `go install` refuses it; build from a writable copy.
# The copy's helm/sealed-secrets/crds/ (the CRD the test bed installs) is kept beside the binaries.
build_sealed_secrets() {
  local out=$1 cmd=$2 dir stage rc=0
  dir=$(go mod download -json "github.com/bitnami-labs/sealed-secrets@$SEALED_SECRETS_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$dir" ]] || { echo "setup: go mod download of sealed-secrets $SEALED_SECRETS_VERSION failed" >&2; return 1; }
  stage=$(mktemp -d); cp -r "$dir/." "$stage/" && chmod -R u+w "$stage"
  (cd "$stage" && go build -trimpath \
    -ldflags "-s -w -X main.VERSION=$SEALED_SECRETS_VERSION" \
    -o "$out/$cmd" "./cmd/${cmd#sealed-secrets-}") || rc=$?
  [[ $rc -ne 0 ]] || cp "$stage/helm/sealed-secrets/crds/bitnami.com_sealedsecrets.yaml" "$out/" || rc=$?
  rm -rf "$stage"; return "$rc"
}
build_kubeseal() { build_sealed_secrets "$1" kubeseal; }
build_sealed_secrets_controller() { build_sealed_secrets "$1" sealed-secrets-controller; }

# The other cue versions the tests run (CUE_TEST_VERSIONS: one inside the supported range, one outside it), cached
# beside the pinned one and never linked into bin/ (`tools/setup.sh cue-tests` builds only these).
build_cue_at() { GOBIN=$1 go install -trimpath "cuelang.org/go/cmd/cue@$CUE_AT"; }
# Vault, standing in for OpenBao on the test bed (the SourceCredential openBaoPath backend's tests): OpenBao's server
# module is not served by the module proxy. Vault's go.mod replaces its api and sdk modules with ./api and ./sdk,
# which its module zip lacks: built from a copy with those replaces dropped, against the published versions its
# go.mod requires (v1.21.0's sdk v0.20.0 matches its tree; v1.21.4's in-tree sdk matches no published one).
# Built with Vault's own `minimal` build tag (its core plugins only: kv, approle, userpass, ...) plus the one
# plugin the tests use that the tag leaves out, the Kubernetes auth method (added to registry_min.go's no-op): the
# full build, with every cloud's secrets engine and auth method, took ≈ 10 min cold on a quiet machine (23 min at
# load 6-16), 4.5 GB of modules and 6 GB of build cache (docs/dependencies.md). Test-bed only, never shipped (Vault 1.15+ is BUSL-1.1).
build_vault() {
  local src stage rc=0 module
  src=$(go mod download -json "github.com/hashicorp/vault@$VAULT_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$src" ]] || return 1
  stage=$(mktemp -d); mkdir "$stage/src"; cp -r "$src/." "$stage/src/"; chmod -R u+w "$stage/src"
  cat > "$stage/src/helper/builtinplugins/registry_min.go" <<'GO'
//go:build minimal

package builtinplugins

import credKube "github.com/hashicorp/vault-plugin-auth-kubernetes"

// The test bed's addition to Vault's minimal build: the Kubernetes auth method (tools/setup.sh build_vault).
func extendAddonPlugins(reg *registry) {
	reg.credentialBackends["kubernetes"] = credentialBackend{Factory: credKube.Factory}
}
GO
  # Its own build cache, removed after: the binary is cached by version, nothing rebuilds from it.
  (cd "$stage/src" && for module in api api/auth/approle api/auth/kubernetes api/auth/userpass sdk; do
     go mod edit -dropreplace="github.com/hashicorp/vault/$module"; done &&
   GOCACHE="$stage/go-build" go build -mod=mod -tags minimal -trimpath -ldflags "-s -w" -o "$1/vault" .) || rc=$?
  rm -rf "$stage"; return "$rc"
}

# CoreDNS, the node tier's cluster DNS (tests/testbed/node_dns.py), from a copy of its module zip with
# core/plugin/zplugin.go (the generated list of compiled-in plugins, CoreDNS's own plugin.cfg made Go) cut to the
# plugins the bed's Corefile uses: the full build compiles and downloads every cloud's SDK (Azure, AWS, Google,
# DataDog) for plugins nobody loads here. Its own build cache, removed after, as Vault's.
build_coredns() {
  local src stage rc=0 plugin
  src=$(go mod download -json "github.com/coredns/coredns@$COREDNS_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$src" ]] || return 1
  stage=$(mktemp -d); mkdir "$stage/src"; cp -r "$src/." "$stage/src/"; chmod -R u+w "$stage/src"
  { printf '// Plugins compiled in for the node tier (tools/setup.sh build_coredns).\n\npackage plugin\n\nimport (\n'
    for plugin in bind errors kubernetes; do printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$plugin"; done
    printf ')\n'; } > "$stage/src/core/plugin/zplugin.go"
  (cd "$stage/src" && GOCACHE="$stage/go-build" go build -trimpath \
    -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" -o "$1/coredns" .) || rc=$?
  rm -rf "$stage"; return "$rc"
}

# CloudNativePG's operator (its `manager` binary: the operator, and inside every instance pod the instance
# manager the `bootstrap-controller` init container copies in) from its module at the pin its CRDs come from
# (fetch-crds.sh), built as upstream's .goreleaser.yml does (CGO off, -s -w, the version stamped). The image
# `cnpg` of `make images` ships it as /manager (deploy/images/cnpg.Dockerfile). Upstream's install manifest of the
# same release (releases/cnpg-<version>.yaml: CRDs, RBAC, the webhooks, the Deployment) is kept beside it for the
# node tier (tests/testbed/cnpg.py). Its own build cache, removed after.
build_cnpg_manager() {
  local src cache rc=0
  src=$(go mod download -json "github.com/cloudnative-pg/cloudnative-pg@$CNPG_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$src" ]] || return 1
  cache=$(mktemp -d)
  (cd "$src" && GOCACHE="$cache" go build -trimpath \
    -ldflags "-s -w -X github.com/cloudnative-pg/cloudnative-pg/pkg/versions.buildVersion=${CNPG_VERSION#v}" \
    -o "$1/cnpg-manager" ./cmd/manager) || rc=$?
  [[ $rc -ne 0 ]] || cp "$src/releases/cnpg-${CNPG_VERSION#v}.yaml" "$1/" || rc=$?
  rm -rf "$cache"; return "$rc"
}

# versitygw, the s3 backend's object store (tests/testbed/s3.py), as its Makefile builds it (main.Version stamped; no
# commit or build time: the module zip has no commit, and a time would make every build differ) but CGO off, -s -w.
# `go install ...@version` takes it (its go.mod has no replace). Its own build cache, removed after, as Vault's.
build_versitygw() {
  local cache rc=0; cache=$(mktemp -d)
  GOBIN=$1 GOCACHE="$cache" go install -trimpath -ldflags "-s -w -X main.Version=$VERSITYGW_VERSION" \
    "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" || rc=$?
  rm -rf "$cache"; return "$rc"
}

# Traefik, the node tier's Gateway API implementation (tests/testbed/traefik.py), as its Makefile's `binary` target
# builds it (version and codename stamped) from the module's directory: its go.mod replaces three modules with
# Containous forks, so `go install ...@version` refuses it. The web UI is not built (no Node.js here): the module's
# webui/static holds a placeholder, and the dashboard stays off. Its own build cache, removed after, as Vault's.
build_traefik() {
  local src stage rc=0 codename
  src=$(go mod download -json "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$src" ]] || return 1
  codename=$(sed -n 's/^CODENAME ?= //p' "$src/Makefile")
  stage=$(mktemp -d)
  (cd "$src" && GOCACHE="$stage/go-build" go build -trimpath -ldflags "-s -w \
    -X github.com/traefik/traefik/v3/pkg/version.Version=$TRAEFIK_VERSION \
    -X github.com/traefik/traefik/v3/pkg/version.Codename=$codename" -o "$1/traefik" ./cmd/traefik) || rc=$?
  rm -rf "$stage"; return "$rc"
}

# The builds, in lanes that run side by side (APPRAFTER_SETUP_JOBS at a time, default 3): a Go build leaves a core
# idle while it downloads modules and links, and the apt-get and mmdebstrap steps wait on the network and the disk.
# A lane's tools build one after another (the Kubernetes commands share one module's packages); lanes share
# nothing but the Go module and build caches, which the go command locks. The longest lanes start first.
lane_small_go() {
  ensure cue "$CUE_VERSION" build_cue cue version
  for CUE_AT in $CUE_TEST_VERSIONS; do WANT_AS=cue-tests NO_LINK=1 ensure cue "$CUE_AT" build_cue_at; done
  ensure helm "$HELM_VERSION" build_helm helm version --short
  ensure cosign "$COSIGN_VERSION" build_cosign cosign version
  ensure registry "$GGCR_REGISTRY_VERSION" build_registry
  ensure kustomize "$KUSTOMIZE_VERSION" build_kustomize kustomize version
  # SealedSecrets' controller runs on the test bed; kubeseal is the format cross-check (tests/testbed/sealed_secrets.py).
  ensure kubeseal "$SEALED_SECRETS_VERSION" build_kubeseal
  ensure sealed-secrets-controller "$SEALED_SECRETS_VERSION" build_sealed_secrets_controller
  # CloudNativePG's operator for the node tier (tests/testbed/cnpg.py) and the `cnpg` image.
  ensure cnpg-manager "$CNPG_VERSION" build_cnpg_manager cnpg-manager version
  # The s3 backend's object store on the test bed (tests/testbed/s3.py).
  ensure versitygw "$VERSITYGW_VERSION" build_versitygw versitygw --version
}
lane_kubernetes() {
  ensure etcd "$ETCD_VERSION" build_etcd etcd --version
  ensure kube-apiserver "$KUBERNETES_VERSION" build_kube_apiserver kube-apiserver --version
  local cmd
  for cmd in kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
    ensure "$cmd" "$KUBERNETES_VERSION" "build_${cmd//-/_}"
  done
  # Keyed by a hash of its source (as the Python side computes it: tests/testbed/node.py), so an edit rebuilds it.
  ensure pause "$(cat "$here/pause/main.go" "$here/pause/go.mod" | sha256sum | cut -c1-12)" build_pause
  # The kubelet's own image-reference parser (k8s.io/kubernetes/pkg/util/parsers, from the tools module at the
  # Kubernetes pin): the oracle renderer/imageref.py is tested against (tests/renderer/test_imageref.py). Keyed by
  # the pin and a hash of its source, so an edit rebuilds it.
  ensure imageref "$KUBERNETES_VERSION-$(sha256sum < "$here/kube/imageref/main.go" | cut -c1-12)" build_imageref
  # The node tier's cluster DNS: after the Kubernetes commands, whose lane needs it.
  ensure coredns "$COREDNS_VERSION" build_coredns coredns -version
}
build_imageref() { (cd "$here/kube" && go build -trimpath -ldflags "-s -w" -o "$1/imageref" ./imageref); }
lane_vault() { ensure vault "$VAULT_VERSION" build_vault vault version; }
# Traefik's cold build costs about 1,100 CPU-seconds: a lane of its own.
lane_traefik() { ensure traefik "$TRAEFIK_VERSION" build_traefik traefik version; }
# Argo CD at the pin and at the oldest line still supported (docs/argocd.md "Argo CD versions"); bin/ links the
# pin. The client is keyed by the Argo CD version and a hash of its source, so an edit rebuilds it;
# argocd-cmp-client/<version> links the current key.
lane_argocd() {
  local argocd_version=$1 client_key NO_LINK=1
  [[ "$argocd_version" != "$ARGOCD_VERSION" ]] || NO_LINK=""
  ensure argocd "$argocd_version" build_argocd
  client_key="$argocd_version-$(cat "$here"/argocd/cmpclient/*.go "$(argocd_module "$argocd_version")/go.sum" |
    sha256sum | cut -c1-12)"
  ensure argocd-cmp-client "$client_key" build_argocd_cmp_client
  if wants argocd-cmp-client; then ln -sfn "$client_key" "$TOOLS_DIR/argocd-cmp-client/$argocd_version"; fi
}
# Debian's packages and what is made of them: docker-registry; the container tools (apt-get) and the local base
# image for `make images` and the image tests; redis-server (apt-get) and Argo CD's install manifest for the GitOps
# loop tier; the pinned CRDs (Go module downloads). apt-install.sh waits for another apt run's lock.
lane_packages() {
  ensure docker-registry "$DOCKER_REGISTRY_VERSION" build_docker_registry
  if wants images; then "$here/setup-images.sh"; fi
  if wants gitops; then "$here/setup-gitops.sh" "$TOOLS_DIR"; fi
  if wants crds; then "$here/fetch-crds.sh" "$TOOLS_DIR"; fi
}

jobs_max=${APPRAFTER_SETUP_JOBS:-3}
running=0 failed=0
# reap: wait for one lane to end; a lane that failed fails the set-up once every running lane has ended.
reap() { local rc=0; wait -n || rc=$?; running=$((running - 1)); ((rc == 0)) || failed=1; }
spawn() {
  if ((jobs_max <= 1)); then "$@"; return; fi
  while ((running >= jobs_max)); do reap; done
  "$@" &
  running=$((running + 1))
}
join() {
  while ((running > 0)); do reap; done
  ((failed == 0)) || { echo "setup: a tool could not be installed (its lines above say why)" >&2; exit 2; }
}
spawn lane_traefik
spawn lane_vault
spawn lane_argocd "$ARGOCD_VERSION"
spawn lane_kubernetes
spawn lane_argocd "$ARGOCD_OLDEST_VERSION"
spawn lane_packages
spawn lane_small_go
join
# containerd, the CNI plugins and iptables (apt-get) and the pause image for the node tier: after the pause binary
# (lane_kubernetes) and the container tools (lane_packages).
if wants node; then "$here/setup-node.sh" "$TOOLS_DIR"; fi
log "done" "tools in $TOOLS_DIR/bin"
