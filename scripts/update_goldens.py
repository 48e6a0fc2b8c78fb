"""Rewrites tests/renderer/golden/ from the examples; review the diff before committing it."""

from __future__ import annotations

from pathlib import Path

from renderer.emit import dump_stream
from renderer.load import load
from renderer.render import MODES, render_loaded
from renderer.validate import environments

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "renderer" / "golden"


def main() -> None:
    for example in sorted((ROOT / "examples").iterdir()):
        app = load(example)
        for env in environments(app):
            for mode in MODES:
                out = render_loaded(app, env, mode)
                (GOLDEN / f"{example.name}.{env}.{mode}.yaml").write_text(dump_stream(out.objects))


if __name__ == "__main__":
    main()
