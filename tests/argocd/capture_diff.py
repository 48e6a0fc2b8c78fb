"""KUBECTL_EXTERNAL_DIFF for `argocd admin settings resource-overrides run-action`: Argo CD hands the diff
program the live object and the action's result as YAML files; print both as one JSON line."""

import json
import sys
from pathlib import Path

import yaml

if __name__ == "__main__":
    live, result = (yaml.safe_load(Path(path).read_text(encoding="utf-8")) for path in sys.argv[1:3])
    print(json.dumps({"live": live, "result": result}))
