#!/usr/bin/env bash
# Prints the replace block for k8s.io/kubernetes $1 (e.g. v1.34.4): every ./staging module pinned to v0.<minor>.<patch>.
set -euo pipefail
v=${1:?usage: gen-replaces.sh vX.Y.Z}
staging="v0.${v#v1.}"
go mod download -json "k8s.io/kubernetes@$v" >/dev/null
mod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$v.mod
echo "replace ("
grep -E '=> \./staging/src/' "$mod" | sed -E "s#^[[:space:]]*(k8s.io/[a-z0-9-]+) => .*#\t\1 => \1 $staging#"
echo ")"
