"""LLM Speed Playground: measure where local LLM inference time goes."""

import os
from pathlib import Path

__version__ = "0.1.0"

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a child Python that imports playground (a tensor-parallel rank, a
    package-load probe), with the checkout on its import path wherever the child starts."""
    path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    return os.environ | {"PYTHONPATH": path} | (extra or {})
