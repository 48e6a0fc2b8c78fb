#!/usr/bin/env bash
# The GitOps loop on loopback, for a person to watch: a git repository, Argo CD's repo-server, application
# controller and API server (the pinned `argocd`), our plugin under Argo CD's plugin server, and the test
# bed's kube-apiserver. Walks the steps, prints what Argo CD shows and what each step cost, tears it all down.
#   scripts/demo_gitops.sh          run the walk
#   scripts/demo_gitops.sh --keep   leave it running until Enter (prints KUBECONFIG and Argo CD's address)
#   scripts/demo_gitops.sh --node   on the node tier: real pods, each step timed until the pods are Available
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
make --no-print-directory setup >&2
PYTHONPATH="$root" exec "$root/.venv/bin/python" "$root/scripts/demo_gitops.py" "$@"
