"""A model split across devices, through existing engines: accelerate's device_map and transformers' tensor parallel.

- `device_map`: accelerate places whole layers on the GPUs one after another, in this process; a
  token passes through each GPU in turn, so it buys room for the model, not speed.
- `tp`: transformers' `tp_plan="auto"` shards every layer's matmuls across `devices` processes
  (torch.distributed: NCCL between GPUs, gloo between CPU processes), each running the same engine
  on its own shard in lockstep. The playground starts the processes for the run and rank 0 streams
  its events back here (`run_ranks`), so the UI, CLI and records see one run.

Both load a checkpoint through `from_pretrained`; a random-weight preset is first written as one
(playground.checkpoint), since a model larger than one device cannot be built in memory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

RANK_ENV = "PLAYGROUND_RANK"  # set in a worker process of a tensor-parallel run
EVENT_MARK = "@@playground-event "  # rank 0's event lines on stdout, apart from anything a library prints
ROOT = Path(__file__).resolve().parents[1]
MAX_DEVICES = 8
RANK_END_S = 60.0  # how long the other ranks may take to report once rank 0 has


@dataclass(frozen=True)
class Method:
    name: str
    label: str
    processes: bool  # one process per device (torch.distributed), or one process for all
    cpu: bool  # runs across CPU processes too (gloo), not only across GPUs


REGISTRY = {m.name: m for m in (
    Method("none", "one device", processes=False, cpu=True),
    Method("device_map", "device_map=auto (accelerate, layers in turn)", processes=False, cpu=False),
    Method("tp", "tensor parallel (transformers tp_plan, one process per device)", processes=True, cpu=True),
)}
NAMES = tuple(REGISTRY)


def rank() -> int | None:
    """This process's rank in a tensor-parallel run, or None outside one."""
    value = os.environ.get(RANK_ENV)
    return None if value is None else int(value)


def unavailable(method: str, devices: int, device: str, gpus: int) -> str | None:
    """Why this host cannot split a model this way, or None."""
    if method == "none":
        return None
    if device == "cpu" and not REGISTRY[method].cpu:
        return "it places layers on GPUs, and this run is on the CPU"
    needed = devices if method == "tp" else 2
    if device == "cuda" and gpus < needed:
        return f"it needs {needed} GPUs and this host has {gpus}"
    return None


def unsplittable(method: str, devices: int, heads: tuple[int, int]) -> str | None:
    """Why this model's attention cannot be split `devices` ways (its query and key/value heads), or None."""
    if method == "tp" and any(count % devices for count in heads):
        return (f"tensor parallel gives each device whole attention heads, and this model's {heads[0]} query and "
                f"{heads[1]} key/value heads do not split {devices} ways")
    return None


def load_options(method: str, device: str) -> dict:
    """`from_pretrained` keywords that place the model: one device, accelerate's map, or this rank's shard."""
    if method == "device_map":
        return {"device_map": "auto"}
    if method == "tp":
        return {"tp_plan": "auto"}
    return {"device_map": device}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _events_of(line: str):
    """A rank-0 event line back into the engine's event."""
    from playground.engine import Phase, Result, Token
    from playground.record import RunRecord

    kind, data = json.loads(line[len(EVENT_MARK):])
    if kind == "Result":
        return Result(RunRecord.from_dict(data))
    return {"Phase": Phase, "Token": Token}[kind](**data)


def event_line(event) -> str:
    data = event.record.to_dict() if type(event).__name__ == "Result" else dataclasses.asdict(event)
    return EVENT_MARK + json.dumps([type(event).__name__, data])


def _last_words(log) -> str:
    log.seek(0)
    return (log.read().strip().splitlines() or ["(no output)"])[-1]


def _rank_record(worker: subprocess.Popen, timeout_s: float):
    """The Result record a rank other than 0 prints as it ends, or None if it printed none in time."""
    try:
        out, _ = worker.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    lines = [line for line in out.splitlines() if line.startswith(EVENT_MARK)]
    return _events_of(lines[-1]).record if lines else None


def run_ranks(config, stop: threading.Event) -> Iterator:
    """Start `config.devices` worker processes and yield rank 0's events as they come; the last is its Result,
    with every rank's peak memory and weight bytes (`rank_peak_mem_mb`, `rank_weights_mb`).

    Stopping the run ends every rank. A rank that fails without rank 0's Result saying why raises with
    that rank's last words."""
    port = _free_port()
    env_base = os.environ | {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(config.devices),
                             "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    payload = json.dumps(config.to_dict())
    logs = [tempfile.TemporaryFile("w+") for _ in range(config.devices)]  # a pipe left unread could fill and block
    workers = [subprocess.Popen([sys.executable, "-m", "playground.parallel", payload],
                                env=env_base | {"RANK": str(r), "LOCAL_RANK": str(r), RANK_ENV: str(r)},
                                stdout=subprocess.PIPE, stderr=logs[r], text=True)
               for r in range(config.devices)]
    done = threading.Event()

    def kill_on_stop() -> None:
        while not done.wait(0.1):
            if stop.is_set():
                for w in workers:
                    w.kill()
                return

    threading.Thread(target=kill_on_stop, daemon=True).start()
    reported = None
    try:
        for line in workers[0].stdout:
            if not line.startswith(EVENT_MARK):
                continue
            event = _events_of(line)
            if hasattr(event, "record"):
                reported = event.record
                ranks = [reported] + [_rank_record(w, RANK_END_S) for w in workers[1:]]
                reported.rank_peak_mem_mb = [r.peak_mem_mb if r else None for r in ranks]
                reported.rank_weights_mb = [r.weights_mb if r else None for r in ranks]
            yield event
        failed = [(r, w) for r, w in enumerate(workers) if w.wait() != 0]
        if failed and not stop.is_set() and (reported is None or reported.status == "ok"):
            r, w = failed[0]
            raise RuntimeError(f"tensor-parallel rank {r} of {config.devices} ended with status {w.returncode}: "
                               f"{_last_words(logs[r])}")
    finally:
        done.set()
        for w in workers:
            if w.poll() is None:
                w.kill()
            w.wait()
        for log in logs:
            log.close()


def _worker(payload: str) -> int:
    """One rank: the engine's own run of the configuration on this rank's shard; rank 0 prints its events."""
    import torch

    from playground.config import RunConfig
    from playground.engine import Result, generate

    config = RunConfig.from_dict(json.loads(payload))
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # "cuda" in this process is its own GPU
    code = 0
    for event in generate(config):
        if rank() == 0 or isinstance(event, Result):  # the other ranks report only their record
            print(event_line(event), flush=True)
        if isinstance(event, Result) and event.record.status != "ok":
            print(f"rank {rank()}: {event.record.status}: {event.record.reason}", file=sys.stderr, flush=True)
            code = 1
    return code


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
