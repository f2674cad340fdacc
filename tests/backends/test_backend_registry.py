"""Every backend implements the one interface, and the engine never asks which backend it has."""

import inspect
import re
from pathlib import Path

import pytest

from playground import backends
from playground.config import BACKENDS, ConfigError, RunConfig

ENGINE = Path(__file__).resolve().parents[2] / "playground" / "engine.py"


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_implements_the_interface(name):
    backend = backends.get(name)
    for method in ("unsupported", "generate", "kv_cache_bytes", "compiled"):
        wanted = inspect.signature(getattr(backends.Backend, method))
        got = inspect.signature(getattr(backend, method))
        assert list(got.parameters) == list(wanted.parameters)[1:], (name, method)  # all but the protocol's self


def test_config_choices_are_the_registry():
    assert BACKENDS == tuple(backends.REGISTRY)


def test_engine_holds_no_backend_name_branch():
    source = ENGINE.read_text()
    for name in BACKENDS:
        assert f'"{name}"' not in source and f"'{name}'" not in source
    assert not re.search(r"\.backend\s*(==|!=|in\b)", source)  # (an SDPA backend may be compared)


@pytest.mark.parametrize("name", [n for n, e in backends.REGISTRY.items() if e.static_cache_only])
def test_a_static_cache_only_backend_refuses_anything_else(name):
    for cache in (dict(use_cache=False), dict(cache_impl="dynamic")):
        with pytest.raises(ConfigError, match="own static KV cache"):
            RunConfig(prompt="a", backend=name, **cache)
