"""Benchmark scripts that print figures (run from the repository root with python -m)."""

import json
import os


def write_json(path: str | None, payload: dict) -> None:
    """Write `payload` to `path` aside, then swap it in: a benchmark killed mid-write keeps its previous rows.
    Nothing when no path was asked for."""
    if not path:
        return
    with open(f"{path}.tmp", "w") as f:
        json.dump(payload, f, indent=1)
    os.replace(f"{path}.tmp", path)
