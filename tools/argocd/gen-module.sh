#!/usr/bin/env bash
# Writes the tools module of one Argo CD release line, tools/argocd/<major.minor>/ (go.mod, go.sum, tools.go),
# from argo-cd's own go.mod at the tag, as the module proxy serves it:
#   - require github.com/argoproj/argo-cd/v3 at the release, and argo-cd's gitops-engine requirement;
#   - argo-cd's replace block, minus its one local replace (`gitops-engine => ./gitops-engine`): a module
#     dependency cannot use it, so gitops-engine comes from the proxy instead. That is the release's own code
#     only where the proxy serves it at what the release built with:
#       v3.0-v3.2  github.com/argoproj/gitops-engine at the commit argo-cd pins (its own repository; no local replace)
#       v3.6+      github.com/argoproj/argo-cd/gitops-engine/v3, tagged gitops-engine/vX.Y.Z with each release
#       v3.3-v3.5  refused: the nested gitops-engine/ of the tag differs from the pseudo-version argo-cd names,
#                  and no module of it is served, so a build would not be that release
#   - `toolchain` = argo-cd's go directive when the local Go is older (tools/setup.sh runs the build with it
#     through GOTOOLCHAIN; the module proxy serves golang.org/toolchain).
# Then `go mod tidy`. Usage: tools/argocd/gen-module.sh v3.6.1   (rewrites tools/argocd/v3.6/)
set -euo pipefail

version=${1:?usage: gen-module.sh vX.Y.Z}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
line=${version%.*}
dest="$here/$line"
module=github.com/argoproj/argo-cd/v3
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

# (A go directive above the local Go's is an error of this command, after the files are downloaded: read past it.)
download=$(GOTOOLCHAIN=local go mod download -json "$module@$version" 2>/dev/null || true)
gomod=$(printf '%s\n' "$download" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f "$gomod" ]] || { echo "gen-module: the module proxy has no go.mod of $module@$version" >&2; exit 2; }

go_directive=$(awk '$1 == "go" {print $2; exit}' "$gomod")
local_replace=$(awk '$1 == "replace" && $3 == "=>" && $4 ~ /^\.\// {print $2}' "$gomod")
engine=$(awk '$1 ~ /^github.com\/argoproj\/(argo-cd\/)?gitops-engine(\/v[0-9]+)?$/ && $2 ~ /^v/ {print $1, $2; exit}' "$gomod")
[[ -n "$engine" ]] || { echo "gen-module: $module@$version requires no gitops-engine I know" >&2; exit 2; }
engine_path=${engine% *} engine_version=${engine#* }
if [[ -n "$local_replace" && "$engine_version" != "$version" ]]; then
  echo "gen-module: $module@$version builds $local_replace from its own tree (./gitops-engine) and names" \
    "$engine_version, which is not that code: no module of it is served, so this release cannot be built" \
    "from the module proxy" >&2
  exit 1
fi

toolchain=""
local_go=$(GOTOOLCHAIN=local go env GOVERSION); local_go=${local_go#go}
if [[ "$(printf '%s\n%s\n' "$go_directive" "$local_go" | sort -V | head -1)" != "$go_directive" ]]; then
  # The Go that argo-cd's release workflow builds the release with (GOLANG_VERSION in the module's own
  # .github/workflows/release.yaml), which the module proxy serves as golang.org/toolchain.
  zip=$(printf '%s\n' "$download" | sed -n 's/^[[:space:]]*"Zip": "\(.*\)",$/\1/p')
  release_go=$(unzip -p "$zip" "$module@$version/.github/workflows/release.yaml" 2>/dev/null |
    sed -n "s/^[[:space:]]*GOLANG_VERSION: *'\([0-9.]*\)'.*/\1/p" | head -1)
  [[ -n "$release_go" ]] || { echo "gen-module: no GOLANG_VERSION in $module@$version's release workflow" >&2; exit 2; }
  toolchain="go$release_go"
  GOTOOLCHAIN=local go list -m -versions golang.org/toolchain 2>/dev/null | tr ' ' '\n' |
    grep -qx "v0.0.1-$toolchain.linux-amd64" || { echo "gen-module: no $toolchain on the module proxy" >&2; exit 2; }
fi

mkdir -p "$dest"
{
  echo "// Tools module: Argo CD $version's binary (run as each Argo CD component in the test bed) and, staged"
  echo "// beside it by tools/setup.sh, the CMP client (../cmpclient). Written by tools/argocd/gen-module.sh $version."
  echo "module apprafter.local/tools/argocd"
  echo
  echo "go $go_directive"
  [[ -z "$toolchain" ]] || { echo; echo "toolchain $toolchain"; }
  echo
  echo "require ("
  echo "	$module $version"
  echo "	$engine_path $engine_version"
  echo ")"
  echo
  # argo-cd's replace block(s), all module@version once its local replace is left out.
  awk '/^replace \($/ {inside=1; print; next} inside && /^\)$/ {inside=0; print; next}
       inside && /=>[[:space:]]*\.\.?\// {next} inside {print}' "$gomod"
} > "$dest/go.mod"
cat > "$dest/tools.go" <<'EOF'
//go:build tools

// Package tools pins Argo CD's main binary so `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
EOF
rm -f "$dest/go.sum"
(cd "$dest" && GOTOOLCHAIN=${toolchain:-local} go mod tidy)
echo "gen-module: $dest for $module@$version ($engine_path $engine_version${toolchain:+, $toolchain})"
