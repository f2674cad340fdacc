"""The fast decode step compiled ahead of time: torch.export, then AOTInductor, kept on disk.

Where torch.compile cannot run (ZeroGPU runs only ahead-of-time compiled code), the decode step can
still be compiled: `decode_one_token` is exported with every tensor of the static state as an input,
so the compiled package writes the caller's KV cache, tokens and position in place, as the traced
step does. The weights stay out of the package (an 8B model's would make it 16 GB): the loaded package
is pointed at the model's own tensors, as ZeroGPU's `spaces.aoti_apply` does. The package is kept in
the compile cache (`playground.warm.cache_dir()`) under a key of the weights' fingerprint, the state's
shapes, dtype and device, the torch version and whether it samples: a later process loads it instead
of compiling, so an ahead-of-time step is also a warm start. On CUDA the loaded step is captured as a
CUDA graph and replayed (`generate.CapturedStep`), as the compiled one is: the package still launches
each kernel from the host.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import torch
from torch._dynamo.utils import counters
from torch._inductor.package.package import package_aoti

from playground import warm
from playground.fast.forward import decode_one_token
from playground.fast.fuse import fused_layers
from playground.fast.state import StaticState

ROOT = Path(__file__).resolve().parents[2]  # where the probe imports playground from


# ZeroGPU's settings for `spaces.aoti_compile`: the weights are written beside the compiled code, not in
# it, and every constant keeps its name (no constant folding, which would bake derived tensors in), so the
# package can be built from the code alone and pointed at the model's tensors when loaded.
PACKAGE_CONFIG = {"aot_inductor.package": True, "aot_inductor.package_constants_in_so": False,
                  "aot_inductor.package_constants_on_disk_format": "pickle_weights",
                  "always_keep_tensor_constants": True, "joint_graph_constant_folding": False}


class _Step(torch.nn.Module):
    """`decode_one_token` as a module whose inputs are the state's tensors (StaticState.tensors order).

    The fused projections' tensors live outside the module tree (playground.fast.fuse), so export would
    lift them as anonymous constants that a loaded package cannot be pointed at. Here they are named
    buffers, and `forward` hands the decoder the traced buffers in their place."""

    def __init__(self, model, sample: bool, padded: bool = False) -> None:
        super().__init__()
        self.model, self.sample, self.padded = model, sample, padded
        self.fused = [(f"fused_{index}_{kind}_{part}", linear, part)
                      for index, layer in enumerate(fused_layers(model))
                      for kind, linear in (("qkv", layer.qkv), ("gate_up", layer.gate_up))
                      for part in ("weight", "bias") if getattr(linear, part) is not None]
        for name, linear, part in self.fused:
            self.register_buffer(name, getattr(linear, part), persistent=False)

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        real = [getattr(linear, part) for _, linear, part in self.fused]
        try:
            for name, linear, part in self.fused:
                setattr(linear, part, getattr(self, name))
            return decode_one_token(self.model, StaticState.from_tensors(tensors, self.padded), self.sample)
        finally:
            for (_, linear, part), tensor in zip(self.fused, real):
                setattr(linear, part, tensor)


def weights_fingerprint(model) -> str:
    """Names, shapes, dtypes and sums of every parameter: a package compiled from other weights never matches."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, p in model.named_parameters():
            digest.update(f"{name}{tuple(p.shape)}{p.dtype}{float(p.float().sum()):.6e}".encode())
    return digest.hexdigest()[:16]


def package_path(model, state: StaticState, sample: bool) -> Path:
    key = dict(weights=weights_fingerprint(model), attn=model.config._attn_implementation, sample=sample,
               padded=state.padded, shapes=[list(t.shape) for t in state.tensors()], dtype=str(state.cos.dtype),
               device=torch.cuda.get_device_name() if state.tokens.is_cuda else "cpu", torch=torch.__version__)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return warm.cache_dir() / "aot" / f"decode-{digest}.pt2"


def compile_step(model, state: StaticState, sample: bool) -> Path:
    """Export and compile the decode step for `state`'s shapes; returns the package written."""
    path = package_path(model, state, sample)
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        exported = torch.export.export(_Step(model, sample, state.padded), tuple(state.tensors()))
        artifacts = torch._inductor.aot_compile(exported.module(), tuple(state.tensors()), options=PACKAGE_CONFIG)
    package_aoti(str(path), [file for file in artifacts if isinstance(file, str)])  # the code; not the weights
    return path


# Loading the package in a child process first: on an H200 (torch 2.11.0+cu130) the loader crashed the whole
# process with a segmentation fault, which no exception handler catches and which would end the app.
# The step's package needs the playground's custom ops registered; BARE_PROBE loads with torch alone, to tell
# a torch install that loads no package from one that fails only beside those ops.
LOAD_PROBE = "import sys, torch, playground.fast.ops; torch._inductor.aoti_load_package(sys.argv[1])"
BARE_PROBE = "import sys, torch; torch._inductor.aoti_load_package(sys.argv[1])"
_probed: set[Path] = set()


def load_failure(path: Path, probe_code: str | None = None) -> str | None:
    """How loading the package at `path` in a child process (`probe_code`, default LOAD_PROBE) failed, or None
    when it loaded."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    probe = subprocess.run([sys.executable, "-c", probe_code or LOAD_PROBE, str(path)], capture_output=True,
                           text=True, env=env)
    if not probe.returncode:
        return None
    if probe.returncode < 0:
        return f"killed by {signal.Signals(-probe.returncode).name}"
    return f"exit status {probe.returncode}: {probe.stderr.strip().splitlines()[-1:]}"


@functools.cache
def one_layer_package(device: str) -> Path:
    """A package of one linear layer for `device`: what any working AOTInductor install loads. Built once per
    process (a build costs seconds of compiling), into a folder removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix="playground-one-layer-"))
    atexit.register(shutil.rmtree, folder, True)
    layer = torch.nn.Linear(16, 16, device=device)
    example = (torch.randn(2, 16, device=device),)
    return Path(torch._inductor.aoti_compile_and_package(torch.export.export(layer, example),
                                                         package_path=str(folder / "one-layer.pt2")))


@functools.cache
def toolchain_failure(device: str) -> str | None:
    """What building or loading (in a child process) a one-layer package for `device` shows, as a sentence
    naming whether torch alone or the playground's ops beside it fail; None when it loads both ways. Once per
    process."""
    try:
        package = one_layer_package(device)
    except Exception as exc:  # no compiler, no headers: this install builds no package at all
        return (f"a one-layer test package does not build ({type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[:1]}): this torch install builds no ahead-of-time package")
    bare = load_failure(package, BARE_PROBE)
    if bare:
        return f"a one-layer test package fails too ({bare}): this torch install runs no ahead-of-time package"
    beside_ops = load_failure(package)
    if beside_ops:
        return (f"a one-layer test package loads with torch alone but fails once the playground's custom ops "
                f"are imported ({beside_ops}): loading those ops breaks torch's package loader here")
    return None


def check_loads(path: Path, device: str) -> None:
    """Raise, naming the failure, when loading the package at `path` fails or crashes a child process.

    On a failure a one-layer package for `device` is built and loaded the same way, so the error says
    whether this torch install loads no ahead-of-time package at all, none beside the playground's ops, or
    only not this step."""
    if path in _probed:
        return
    failure = load_failure(path)
    if failure is None:
        _probed.add(path)
        return
    where = toolchain_failure(device) or "a one-layer test package loads, so the failure is this step's"
    raise RuntimeError(f"torch could not load the ahead-of-time decode step ({failure} in a test process, torch "
                       f"{torch.__version__}; {where}); run with compile=reduce-overhead or compile=off instead")


def load_step(path: Path, model, sample: bool) -> Callable:
    """The package at `path`, its constants pointed at `model`'s own parameters and buffers (no copy)."""
    if torch.cuda.is_available() and model.device.type == "cuda":
        check_loads(path, "cuda")
    runner = torch._inductor.aoti_load_package(str(path))
    step = _Step(model, sample)
    tensors = (dict(step.named_parameters(remove_duplicate=False))  # a tied head under both of its names
               | dict(step.named_buffers(remove_duplicate=False)))
    runner.load_constants({name: tensors[name] for name in runner.get_constant_fqns()}, check_full_update=True,
                          user_managed=True)
    return runner


def decode_step(model, state: StaticState) -> Callable:
    """A drop-in for the compiled `decode_one_token(model, state, sample)`: the package for each `sample`
    value, loaded from disk when an earlier process compiled it, else compiled now."""
    runners: dict[bool, Callable] = {}

    def step(model_, state_: StaticState, sample: bool):
        if sample not in runners:
            path = package_path(model, state, sample)
            found = path.is_file()
            counters["playground"]["aot_package_hit" if found else "aot_package_miss"] += 1
            runners[sample] = load_step(path if found else compile_step(model, state, sample), model, sample)
        return runners[sample](*state_.tensors())

    return step
