#!/usr/bin/env bash
# Copies the CustomResourceDefinitions that rendered output targets out of each project's Go module
# download (pinned in tools/versions.env) into $TOOLS_DIR/crds/<source>-<version>/. Idempotent: a source
# whose directory exists is skipped. Called by tools/setup.sh as `fetch-crds.sh $TOOLS_DIR`.
#
# What is taken from where (paths inside the module zip):
#   gateway-api     sigs.k8s.io/gateway-api            config/crd/standard/*.yaml (standard channel; also at
#                                                      TRAEFIK_GATEWAY_API_VERSION with backendtlspolicies)
#   keda            github.com/kedacore/keda/v2        config/crd/bases/keda.sh_{scaledobjects,triggerauthentications,clustertriggerauthentications}.yaml
#   cilium          github.com/cilium/cilium           pkg/k8s/apis/cilium.io/client/crds/v2/cilium{,clusterwide}networkpolicies.yaml
#   argocd          github.com/argoproj/argo-cd/v3     manifests/crds/{application,appproject}-crd.yaml
#   cloudnative-pg  github.com/cloudnative-pg/cloudnative-pg  config/crd/bases/postgresql.cnpg.io_{clusters,poolers,databases}.yaml
#   cert-manager    github.com/cert-manager/cert-manager      deploy/crds/crd-{certificates,certificaterequests,issuers,clusterissuers}.yaml
# cert-manager's deploy/crds files are Helm templates: the `{{ }}` directives sit in YAML comments except
# three quoted label values, which are replaced by the values the chart renders by default.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
TOOLS_DIR=${1:-${APPRAFTER_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/apprafter/tools}}
CRDS_DIR="$TOOLS_DIR/crds"
mkdir -p "$CRDS_DIR"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

log() { printf 'setup: %-22s %s\n' "$1" "$2"; }

# shellcheck source=argocd/lib.sh
source "$here/argocd/lib.sh"

# module_dir MODULE VERSION: download the module zip (cached by Go) and print its extracted directory (Argo CD with
# the Go toolchain its tools module names: a go directive above the local Go's refuses to extract otherwise).
module_dir() {
  local json dir toolchain=local
  [[ "$1" != github.com/argoproj/argo-cd/v3 ]] || toolchain=$(argocd_toolchain "$2")
  json=$(cd "$CRDS_DIR" && GOTOOLCHAIN=$toolchain go mod download -json "$1@$2") || {
    echo "setup: crds: go mod download $1@$2 failed: $json" >&2; return 1; }
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [[ -n "$dir" && -d "$dir" ]] || { echo "setup: crds: no module dir for $1@$2: $json" >&2; return 1; }
  printf '%s\n' "$dir"
}

# fetch SOURCE VERSION MODULE FILTER FILE...: copy FILEs (relative to the module root) into
# $CRDS_DIR/SOURCE-VERSION, piping each through FILTER (a function name, or `cat`).
fetch() {
  local source=$1 version=$2 module=$3 filter=$4; shift 4
  local dest="$CRDS_DIR/$source-$version"
  if [[ -d "$dest" ]]; then log "crds $source $version" "cached"; return; fi
  local start=$SECONDS dir tmp="$dest.tmp.$$" f
  dir=$(module_dir "$module" "$version")
  rm -rf "$tmp"; mkdir -p "$tmp"
  for f in "$@"; do
    [[ -f "$dir/$f" ]] || { rm -rf "$tmp"; echo "setup: crds: $module@$version has no $f" >&2; exit 2; }
    "$filter" <"$dir/$f" >"$tmp/$(basename "$f")"
    grep -q '^kind: CustomResourceDefinition' "$tmp/$(basename "$f")" || {
      rm -rf "$tmp"; echo "setup: crds: $module@$version $f is not a CustomResourceDefinition" >&2; exit 2; }
  done
  mv "$tmp" "$dest"
  log "crds $source $version" "$# CRDs from $module in $((SECONDS - start))s"
}

# cert-manager's CRD files are Helm templates; render the three label values the chart's defaults give
# (name "cert-manager", release "cert-manager") and refuse any template directive left outside comments.
detemplate_cert_manager() {
  sed -e "s/'{{ template \"cert-manager.name\" \. }}'/cert-manager/" \
      -e "s/'{{ \.Release\.Name }}'/cert-manager/" |
    awk '{ line=$0; sub(/#.*/, "", line); if (line ~ /\{\{/) { print "unrendered template: " $0 > "/dev/stderr"; bad=1 } print }
         END { exit bad }'
}

fetch gateway-api "$GATEWAY_API_VERSION" sigs.k8s.io/gateway-api cat \
  config/crd/standard/gateway.networking.k8s.io_gatewayclasses.yaml \
  config/crd/standard/gateway.networking.k8s.io_gateways.yaml \
  config/crd/standard/gateway.networking.k8s.io_httproutes.yaml \
  config/crd/standard/gateway.networking.k8s.io_grpcroutes.yaml \
  config/crd/standard/gateway.networking.k8s.io_referencegrants.yaml
# Traefik's Gateway provider (the node tier's Gateway: tests/testbed/traefik.py) is built against a newer Gateway
# API and watches BackendTLSPolicy v1, standard only from v1.4.0: that release's standard channel beside the pin.
fetch gateway-api "$TRAEFIK_GATEWAY_API_VERSION" sigs.k8s.io/gateway-api cat \
  config/crd/standard/gateway.networking.k8s.io_gatewayclasses.yaml \
  config/crd/standard/gateway.networking.k8s.io_gateways.yaml \
  config/crd/standard/gateway.networking.k8s.io_httproutes.yaml \
  config/crd/standard/gateway.networking.k8s.io_grpcroutes.yaml \
  config/crd/standard/gateway.networking.k8s.io_referencegrants.yaml \
  config/crd/standard/gateway.networking.k8s.io_backendtlspolicies.yaml
fetch keda "$KEDA_VERSION" github.com/kedacore/keda/v2 cat \
  config/crd/bases/keda.sh_scaledobjects.yaml \
  config/crd/bases/keda.sh_triggerauthentications.yaml \
  config/crd/bases/keda.sh_clustertriggerauthentications.yaml
fetch cilium "$CILIUM_VERSION" github.com/cilium/cilium cat \
  pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml \
  pkg/k8s/apis/cilium.io/client/crds/v2/ciliumclusterwidenetworkpolicies.yaml
fetch argocd "$ARGOCD_VERSION" github.com/argoproj/argo-cd/v3 cat \
  manifests/crds/application-crd.yaml \
  manifests/crds/appproject-crd.yaml
fetch cloudnative-pg "$CNPG_VERSION" github.com/cloudnative-pg/cloudnative-pg cat \
  config/crd/bases/postgresql.cnpg.io_clusters.yaml \
  config/crd/bases/postgresql.cnpg.io_poolers.yaml \
  config/crd/bases/postgresql.cnpg.io_databases.yaml
fetch cert-manager "$CERT_MANAGER_VERSION" github.com/cert-manager/cert-manager detemplate_cert_manager \
  deploy/crds/crd-certificates.yaml \
  deploy/crds/crd-certificaterequests.yaml \
  deploy/crds/crd-issuers.yaml \
  deploy/crds/crd-clusterissuers.yaml
