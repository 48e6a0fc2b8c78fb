# Sourced by tools/setup.sh, setup-gitops.sh and fetch-crds.sh: where an Argo CD release line's tools module is and
# which Go toolchain it names (GOTOOLCHAIN for every go command that reads argo-cd at that version).
# shellcheck shell=bash

# argocd_module VERSION: tools/argocd/<major.minor> (tools/argocd/gen-module.sh writes it).
argocd_module() { echo "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/${1%.*}"; }

# argocd_toolchain VERSION: the `toolchain` of that module's go.mod, else `local`.
argocd_toolchain() {
  awk '$1 == "toolchain" {print $2; found=1} END {if (!found) print "local"}' "$(argocd_module "$1")/go.mod"
}
