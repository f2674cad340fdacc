"""The start-up stack check: each mismatch named with its fix, from faked stacks (this host has no GPU)."""

import dataclasses

import pytest

from playground import stack

ZERO_GPU_OK = stack.Stack(python="3.12.12", torch="2.11.0+cu130", cuda="13.0",
                          arch_list=("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"),
                          capability=(12, 0), spaces="0.51.3", flash_attn=None)


def test_a_supported_zero_gpu_stack_has_no_problem():
    assert stack.problems(ZERO_GPU_OK, zero_gpu=True) == []
    assert stack.problems(dataclasses.replace(ZERO_GPU_OK, python="3.10.13", torch="2.8.0+cu128"), True) == []


@pytest.mark.parametrize("changes, words", [
    (dict(spaces=None), "the `spaces` package is missing, so runs never get a ZeroGPU GPU"),
    (dict(torch="2.13.0+cu130"), "torch 2.13.0+cu130 is not one ZeroGPU runs (2.8.0, 2.9.1, 2.10.0, 2.11.0): pin one "
                                 "in pre-requirements.txt"),
    (dict(torch="2.9.0+cu128"), "torch 2.9.0+cu128 is not one ZeroGPU runs"),
    (dict(python="3.12.3"), "Python 3.12.3 is not one ZeroGPU runs (3.10.13, 3.12.12): set `python_version`"),
    (dict(torch="2.11.0+cpu", cuda=None, arch_list=()), "torch 2.11.0+cpu is a CPU build; ZeroGPU needs a CUDA build"),
])
def test_each_zero_gpu_mismatch_is_named(changes, words):
    found = stack.problems(dataclasses.replace(ZERO_GPU_OK, **changes), zero_gpu=True)
    assert len(found) == 1 and words in found[0]
    assert stack.problems(dataclasses.replace(ZERO_GPU_OK, **changes), zero_gpu=False) == []  # a dedicated Space


def test_a_torch_build_without_kernels_for_the_gpu_is_named_anywhere():
    old = dataclasses.replace(ZERO_GPU_OK, torch="2.8.0+cu126", cuda="12.6",
                              arch_list=("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"))
    (found,) = stack.problems(old, zero_gpu=False)
    assert "torch 2.8.0+cu126 has no kernels for this GPU (compute capability 12.0;" in found and "12.8+" in found


@pytest.mark.parametrize("arch_list, capability, runs", [
    (("sm_80", "sm_90"), (8, 6), True),  # a same-major cubin of a lower minor runs
    (("sm_86",), (8, 0), False),
    (("sm_90a",), (9, 0), False),  # arch-specific cubins are not counted: torch ships the plain one beside them
    (("sm_90", "compute_90"), (12, 0), True),  # PTX the driver compiles for a newer GPU
    (("sm_90", "sm_100"), (12, 0), False),
    (("sm_120",), (12, 0), True),
])
def test_which_kernels_a_gpu_runs(arch_list, capability, runs):
    assert stack.has_kernels_for(arch_list, capability) is runs


def test_a_flash_attn_wheel_that_does_not_load_is_named_with_the_wheel_to_pick():
    broken = dataclasses.replace(ZERO_GPU_OK, flash_attn="2.8.3", flash_attn_error="undefined symbol: _ZN3c104cuda9")
    (found,) = stack.problems(broken, zero_gpu=True)
    assert found == ("flash-attn 2.8.3 is installed but does not load (undefined symbol: _ZN3c104cuda9): its wheel "
                     "must be the one built for torch 2.11, CUDA 13 and cp312")


def test_the_probe_reads_this_process():
    here = stack.probe()
    import platform

    import torch

    assert (here.python, here.torch, here.cuda) == (platform.python_version(), torch.__version__, torch.version.cuda)
    assert (here.capability is None) == (not torch.cuda.is_available())


def test_the_app_prints_each_problem_and_puts_them_on_the_page(monkeypatch, capsys):
    import app
    from playground.hosting import HostingPolicy

    monkeypatch.setattr(stack, "probe", lambda: dataclasses.replace(ZERO_GPU_OK, spaces=None, python="3.11.7"))
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    policy = app.checked_policy(HostingPolicy.from_env({"PLAYGROUND_HOSTED": "1"}))
    printed = capsys.readouterr().out.splitlines()
    assert len(policy.stack_problems) == len(printed) == 2
    assert printed[0].startswith("Stack check: the `spaces` package is missing") and "Python 3.11.7" in printed[1]
    assert "Python 3.11.7 is not one ZeroGPU runs" in policy.describe()


def test_the_probe_reports_a_flash_attn_that_fails_to_import(monkeypatch, tmp_path):
    (tmp_path / "flash_attn").mkdir()
    (tmp_path / "flash_attn" / "__init__.py").write_text("raise ImportError('undefined symbol: _ZN3c10 (built for "
                                                         "another torch)')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(stack, "_version", lambda dist: "2.8.3" if dist == "flash-attn" else None)
    here = stack.probe()
    assert (here.flash_attn, here.flash_attn_error) == ("2.8.3", "undefined symbol: _ZN3c10 (built for another torch)")
