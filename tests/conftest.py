"""Shared test set-up: no network, a private data directory and compile caches, and the GPU marker."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(scope="session", autouse=True)
def private_compile_caches(tmp_path_factory):
    """The run's own compile caches (the playground's saved steps and artifacts, inductor's generated code), fresh
    for every run, never the user's: shared by the run's tests as by one user's runs, and child processes inherit
    them. A test that needs caches of its own sets them itself."""
    root = tmp_path_factory.mktemp("compile-caches")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLAYGROUND_COMPILE_CACHE", str(root / "playground"))
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))
        yield


@pytest.fixture(autouse=True)
def private_data_dir(tmp_path_factory, monkeypatch):
    """Every test gets its own store and bandwidth cache, never the user's history."""
    monkeypatch.setenv("PLAYGROUND_DATA_DIR", str(tmp_path_factory.mktemp("data")))


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
