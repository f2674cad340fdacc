"""Hosted mode and bad input: the policy's limits, per-session history, ZeroGPU wiring and costs, no secret
shown, and a catalogue of bad requests sent to `/run` through gradio_client, each followed by a healthy run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.machinery
import importlib.resources
import importlib.util
import inspect
import json
import math
import os
import re
import sys
import threading
import types
from unittest import mock

import httpx
import pytest

from conftest import TINY
from playground import capabilities, engine
from playground.config import ConfigError, RunConfig
from playground.hosting import (ALLOWLIST_ENV, COMPILE_ON_ZERO_GPU, HOSTED_LIMITS, ZERO_GPU_BYTES,
                                ZERO_GPU_CAPABILITY, ZERO_GPU_DEVICE, ZERO_GPU_MAX_S, ZERO_GPU_MIN_S, ZERO_GPU_SIZES,
                                HostingPolicy, gpu_duration_s, gpu_runner, pair_duration_s, run_cost)
from playground.presets import DEFAULT_MODEL
from playground.ui import events
from playground.ui.settings import (ColumnSettings, SharedSettings, check_column, comparisons, compile_choices,
                                    context_of, flash_help, make_config)

HOSTED = HostingPolicy.from_env({"PLAYGROUND_HOSTED": "1"})
SECRETS = {"HF_TOKEN": "hf_hostedTestSecretValue0001", "HUGGING_FACE_HUB_TOKEN": "hf_hostedTestSecretValue0002"}
FAST = dict(max_new_tokens=2, mode="benchmark", repeats=1, warmup=0)  # keyword args of /run for a cheap run


def client_for(url: str):
    from gradio_client import Client

    return Client(url, verbose=False, download_files=False)


# ---- the policy ----------------------------------------------------------------------------------

def test_hosted_mode_turns_on_on_a_space_by_env_or_flag():
    assert not HostingPolicy.from_env({}).hosted and HostingPolicy.from_env({}).max_new_tokens is None
    for env, flag in (({"SPACE_ID": "me/playground"}, False), ({"PLAYGROUND_HOSTED": "1"}, False), ({}, True)):
        policy = HostingPolicy.from_env(env, hosted_flag=flag)
        assert policy.hosted and not policy.allow_local_paths and not policy.allow_trust_remote_code
        assert {name: getattr(policy, name) for name in HOSTED_LIMITS} == HOSTED_LIMITS
    custom = HostingPolicy.from_env({"SPACE_ID": "x/y", "PLAYGROUND_MODEL_ALLOWLIST": " a/b, tiny-random-llama ,",
                                     "PLAYGROUND_MAX_NEW_TOKENS": "128"})
    assert custom.model_allowlist == ("a/b", "tiny-random-llama") and custom.max_new_tokens == 128
    with pytest.raises(ValueError, match="PLAYGROUND_MAX_REPEATS='lots'"):
        HostingPolicy.from_env({"SPACE_ID": "x/y", "PLAYGROUND_MAX_REPEATS": "lots"})


@pytest.mark.parametrize("changes, words", [
    (dict(model="./assets/models/stdlib-llama-tiny"), "is a local path, refused in hosted mode"),
    (dict(model="/etc"), "is a local path"),
    (dict(model="~/models/llama"), "is a local path"),
    (dict(trust_remote_code=True), "trust_remote_code is refused in hosted mode"),
    (dict(prompt=None, prompt_tokens=4097), "prompt_tokens=4097 is over this app's limit of 4096"),
    (dict(prompt="word " * 5000), "the prompt is 5,002 tokens for stdlib-llama-tiny (25,000 characters); this app takes prompts of up to 4096 tokens"),
    (dict(new_tokens=513), "new_tokens=513 is over this app's limit of 512"),
    (dict(repeats=6), "repeats=6 is over this app's limit of 5"),
    (dict(warmup=6), "warmup=6 is over this app's limit of 5"),
    (dict(batch_size=5), "batch_size=5 is over this app's limit of 4"),
    (dict(spec="draft", draft_model="./assets/models/stdlib-llama-draft"),
     "draft_model './assets/models/stdlib-llama-draft' is refused in hosted mode: a hosted run drafts with "
     "stdlib-llama-draft"),
    (dict(spec="draft", draft_model="llama-3.1-70b-shape"), "draft_model 'llama-3.1-70b-shape' is refused"),
    (dict(spec="draft", draft_model="someone/tiny-draft"), "draft_model 'someone/tiny-draft' is refused"),
])
def test_hosted_policy_names_the_rule_it_refuses(changes, words):
    config = RunConfig(prompt="hi").replace(**changes)
    with pytest.raises(ConfigError, match=re.escape(words)):
        HOSTED.check(config)
    HostingPolicy().check(config)  # the local app leaves these to the engine


def test_a_hosted_run_drafts_with_the_shipped_draft_or_an_allowlisted_model():
    HOSTED.check(RunConfig(prompt="hi", spec="draft", draft_model="stdlib-llama-draft"))
    listed = HostingPolicy.from_env({"PLAYGROUND_HOSTED": "1", ALLOWLIST_ENV: "stdlib-llama-tiny,tiny-random-llama"})
    listed.check(RunConfig(prompt="hi", spec="draft", draft_model="tiny-random-llama"))
    HOSTED.check(RunConfig(prompt="hi", spec="prompt_lookup", draft_model="./anything"))  # lookup loads no draft


def test_requests_at_the_limits_and_allowlisted_models_pass():
    HOSTED.check(RunConfig(prompt="hi", new_tokens=512, repeats=5, warmup=5, batch_size=4))
    HOSTED.check(RunConfig(prompt=None, prompt_tokens=4096))
    pinned = HOSTED.replace(model_allowlist=("tiny-random-llama",))
    pinned.check(RunConfig(model=TINY, prompt="hi"))
    with pytest.raises(ConfigError, match="not on this app's allowlist .* choose one of tiny-random-llama"):
        pinned.check(RunConfig(model="Qwen/Qwen2.5-0.5B", prompt="hi"))


def test_the_ui_path_shows_a_hosting_refusal_in_the_pane_and_escapes_it():
    app = events.Playground(None, TINY, HOSTED)
    values = {"model": "<img src=x onerror=alert(1)>/x", "prompt": "hi", "synthetic": False, "prompt_tokens": 8,
              "new_tokens": 4, "mode": "benchmark", "repeats": 1, "warmup": 0, "selection": []}
    for side in "AB":
        values.update({f"{side}.{name}": value for name, value in dataclasses.asdict(ColumnSettings()).items()})
    final = list(events.run(app, {**values, "new_tokens": 10_000}, ("A",), "s1"))[-1]
    assert "state-invalid" in final["pane_A"] and "limit of 512" in final["pane_A"]
    final = list(events.run(app, values, ("A",), "s1"))[-1]  # the engine refuses the name; the pane shows it as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in final["pane_A"] and "<img" not in final["pane_A"]
    assert "1 run" not in final["history_note"] and app.store is None  # hosted: nothing in a durable store


# ---- ZeroGPU -------------------------------------------------------------------------------------
# The real `spaces` package (requirements-dev.txt) runs off a Space: its decorator, which passes a function
# through unchanged outside ZeroGPU, its GPU table and its duration arithmetic. Scheduling a call on a GPU
# needs Hugging Face's runtime, so one test swaps in a stand-in module for that alone.

BLACKWELL = capabilities.Host(cuda=True, device_name=ZERO_GPU_DEVICE, capability=ZERO_GPU_CAPABILITY, bf16=True,
                              packages={})
ON_ZERO_GPU = {"SPACE_ID": "me/playground", "SPACES_ZERO_GPU": "true"}

FAKE_SPACES = '''
CALLS = []


def GPU(task=None, *, duration=None, size=None):
    """Stands in for ZeroGPU's scheduler: records the duration and size each call asks for, then runs it here."""
    def wrap(fn):
        def inner(*args, **kwargs):
            CALLS.append((duration(*args, **kwargs), size))
            yield from fn(*args, **kwargs)
        return inner
    return wrap
'''


@pytest.fixture
def real_spaces():
    """The `spaces` package from PyPI, as installed, with SPACES_ZERO_GPU unset when it was imported."""
    spaces = pytest.importorskip("spaces")
    assert "site-packages" in spaces.__file__ and not spaces.zero.Config.zero_gpu
    return spaces


@pytest.fixture
def blackwell(monkeypatch):
    """This host seen as ZeroGPU's GPU (a CPU runs the tests; the estimates and checks read only the Host)."""
    monkeypatch.setattr(capabilities, "host", lambda: BLACKWELL)
    return BLACKWELL


def test_gpu_duration_is_the_runs_estimate_within_the_scheduler_bounds(blackwell):
    small = RunConfig(prompt="hi", new_tokens=8, repeats=1, warmup=0)
    medium = RunConfig(model="llama-3.2-1b-shape", prompt="hi", new_tokens=256, repeats=3, warmup=1)
    assert gpu_duration_s(small) == ZERO_GPU_MIN_S
    assert ZERO_GPU_MIN_S < gpu_duration_s(medium) < ZERO_GPU_MAX_S
    assert gpu_duration_s(medium) == math.ceil(run_cost(medium, zero_gpu=True).seconds)
    assert gpu_duration_s(medium.replace(new_tokens=384)) > gpu_duration_s(medium)
    assert gpu_duration_s(medium.replace(repeats=5)) > gpu_duration_s(medium)
    assert gpu_duration_s(medium.replace(model="llama-3.1-8b-shape")) > gpu_duration_s(medium)
    assert gpu_duration_s(RunConfig(prompt="hi", new_tokens=32_768, repeats=100)) == ZERO_GPU_MAX_S


def test_the_real_spaces_decorator_takes_the_apps_arguments_and_passes_through_off_zero_gpu(real_spaces):
    """The real package: `spaces.GPU(duration=callable, size=...)` as the app calls it, off ZeroGPU a no-op."""
    params = inspect.signature(real_spaces.GPU).parameters
    assert params["duration"].kind is params["size"].kind is inspect.Parameter.KEYWORD_ONLY
    config = RunConfig(model=TINY, prompt="hi", new_tokens=3, repeats=1, warmup=0, profile_kernels=False)
    _, last = list(gpu_runner(engine.generate_sides, zero_gpu=True)({"A": config}, threading.Event()))[-1]
    assert last.record.status == "ok" and last.record.new_tokens == 3


def test_zero_gpu_facts_match_the_spaces_package(real_spaces):
    """The real package's GPU table: the Blackwell it emulates on ZeroGPU, its memory, and the duration it asks
    the scheduler for (1.5x the declared one for the `large` half of that GPU, as declared for `xlarge`)."""
    from spaces.zero import client, config

    table = json.loads(importlib.resources.files("spaces.zero").joinpath("configs.json").read_text())
    (gpu,) = [entry for entry in table if entry["model"] == ZERO_GPU_DEVICE]
    assert ((gpu["sm_major"], gpu["sm_minor"]), gpu["memory"]) == (ZERO_GPU_CAPABILITY, ZERO_GPU_BYTES)
    assert ZERO_GPU_SIZES == {"large": gpu["memory"] // 2, "xlarge": gpu["memory"]}
    assert gpu["xlarge_threshold"] < ZERO_GPU_SIZES["large"]  # weights loaded at start beyond it get xlarge
    with mock.patch.object(config, "get_config", lambda: gpu):
        declared = dt.timedelta(seconds=20)
        assert (client.get_duration_seconds(declared, "large"), client.get_duration_seconds(declared, "xlarge")) == (
            30, 20)


def test_zero_gpu_wraps_the_engine_declares_its_estimate_and_refuses_compile(monkeypatch):
    """A stand-in for `spaces`: the real decorator only schedules on Hugging Face's runtime."""
    fake = types.ModuleType("spaces")
    fake.__spec__ = importlib.machinery.ModuleSpec("spaces", None)
    exec(FAKE_SPACES, fake.__dict__)
    monkeypatch.setitem(sys.modules, "spaces", fake)
    policy = HostingPolicy.from_env(ON_ZERO_GPU)
    assert policy.hosted and policy.zero_gpu and policy.gpu_size == "large" and policy.max_run_s == 60
    assert [label for label, _ in compile_choices(policy)][1] == f"default  ⛔ {COMPILE_ON_ZERO_GPU}"
    with pytest.raises(ConfigError, match=re.escape(COMPILE_ON_ZERO_GPU)):
        policy.check(RunConfig(prompt="hi", cache_impl="static", compile="default"))
    config = RunConfig(model=TINY, prompt="hi", new_tokens=3, repeats=1, warmup=0, profile_kernels=False)
    _, last = list(gpu_runner(engine.generate_sides, policy.zero_gpu)({"A": config}, threading.Event()))[-1]
    assert last.record.status == "ok" and fake.CALLS == [(gpu_duration_s(config), "large")]
    both = {"A": config, "B": config.replace(new_tokens=300)}
    assert pair_duration_s(both) == gpu_duration_s(config) + gpu_duration_s(both["B"])  # both sides in one call
    monkeypatch.setenv("PLAYGROUND_ZERO_GPU_SIZE", "xlarge")
    list(gpu_runner(engine.generate_sides, policy.zero_gpu)({"A": config}, threading.Event()))
    assert fake.CALLS[-1][1] == "xlarge"
    with pytest.raises(ValueError, match="PLAYGROUND_ZERO_GPU_SIZE='medium' must be one of large, xlarge"):
        HostingPolicy.from_env({**ON_ZERO_GPU, "PLAYGROUND_ZERO_GPU_SIZE": "medium"})


def test_without_spaces_nothing_changes(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "spaces" else
                        find_spec(name, *args))
    policy = HostingPolicy.from_env(ON_ZERO_GPU)
    assert not policy.zero_gpu and gpu_runner(engine.generate_sides, False) is engine.generate_sides
    assert all("⛔" not in label for label, _ in compile_choices(policy))


def test_the_large_share_bounds_memory_on_zero_gpu(blackwell):
    """CUDA reports the whole GPU's memory there; a `large` task gets half of it."""
    config = RunConfig(model="llama-3.1-8b-shape", dtype="fp32", prompt=None, prompt_tokens=32_000, batch_size=4,
                       new_tokens=64, repeats=1, warmup=0)
    large = HostingPolicy(zero_gpu=True)
    with pytest.raises(ConfigError, match=r"about 70\.4 GiB but ZeroGPU's large share is 47\.5 GiB; "
                                          r"PLAYGROUND_ZERO_GPU_SIZE=xlarge gives the whole 95 GiB"):
        large.check(config)
    large.replace(gpu_size="xlarge").check(config)
    large.check(config.replace(dtype="bf16"))
    HostingPolicy().check(config)  # off ZeroGPU the engine checks the device's real free memory


def test_one_click_comparisons_cost_about_20_gpu_seconds_on_zero_gpu(real_spaces, blackwell, monkeypatch):
    """Both sides of every comparison of the default model, by the estimate the page shows before Run;
    a side ZeroGPU refuses (compile) costs nothing."""
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    policy = HostingPolicy.from_env(ON_ZERO_GPU)
    assert policy.zero_gpu
    costs, refused = {}, []
    for name, comparison in comparisons().items():
        shared = SharedSettings(model=DEFAULT_MODEL, **comparison.workload(context_of(DEFAULT_MODEL)))
        costs[name] = 0.0
        for column in (comparison.a, comparison.b):
            try:
                costs[name] += run_cost(make_config(shared, column, policy), zero_gpu=True).seconds
            except ConfigError as exc:
                assert COMPILE_ON_ZERO_GPU in str(exc)
                refused.append(name)
    assert refused == ["torch.compile: off vs on"]
    assert max(costs.values()) <= 20, costs
    assert comparisons()["Backend: transformers vs fast"].b.compile == "off"


def test_the_pre_run_check_shows_the_estimated_gpu_seconds(blackwell, monkeypatch):
    from playground import memory

    monkeypatch.setattr(memory, "free_bytes", lambda device, every_gpu=False: ZERO_GPU_SIZES["large"])
    policy = HostingPolicy.from_env({"SPACE_ID": "me/playground"}).replace(zero_gpu=True)
    ok, why = check_column(SharedSettings(model=DEFAULT_MODEL), ColumnSettings(), policy)
    assert ok and re.search(r"runs as sdpa · bf16 on cuda · ≈ \d+ GPU s \(load [\d.]+ s \+ 4 passes × [\d.]+ s "
                            r"\+ profile [\d.]+ s\) · about [\d,]+ sequences of this prompt", why), why


def test_the_page_says_what_the_stack_check_found():
    policy = HOSTED.replace(stack_problems=("torch 2.13.0 is not one ZeroGPU runs", "the `spaces` package is missing"))
    assert policy.describe().endswith("⚠ **This Space's stack does not match what the playground needs:** torch "
                                      "2.13.0 is not one ZeroGPU runs; the `spaces` package is missing.")
    assert "⚠" not in HOSTED.describe()


def test_flash_help_says_how_to_get_the_wheel_on_a_space_and_locally():
    env = {"flash_attn": None, "torch": "2.8.0+cu128", "cuda": "12.8", "python": "3.12.12"}
    hosted = flash_help(env, hosted=True)
    assert "github.com/Dao-AILab/flash-attention/releases" in hosted and "torch==2.8.0" in hosted
    assert "cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl" in hosted
    assert hosted.index("pre-requirements.txt") < hosted.index("pip install flash-attn --no-build-isolation")
    assert flash_help({**env, "flash_attn": "2.8.3"}, hosted=True) == ""


# ---- a launched hosted app ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hosted_app(tmp_path_factory):
    """The real app in hosted mode, started with HF tokens in its environment; yields its URL."""
    from playground.ui import build_demo, launch

    saved = {name: os.environ.get(name) for name in SECRETS}
    os.environ.update(SECRETS)
    demo = build_demo(default_model=TINY, policy=HOSTED)
    launch(demo, prevent_thread_lock=True, quiet=True)
    yield demo.local_url
    demo.close()
    for name, value in saved.items():
        os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)


def _history_prompts(client) -> list[str]:
    return [r["config"]["prompt"] for r in client.predict(api_name="/history")["runs"]]


def test_hosted_history_is_per_session(hosted_app):
    alice, bob = client_for(hosted_app), client_for(hosted_app)
    assert alice.predict("alice's private prompt", TINY, **FAST, api_name="/run")["state"] == "ok"
    assert bob.predict("bob's private prompt", TINY, **FAST, api_name="/run")["state"] == "ok"
    assert _history_prompts(alice) == ["alice's private prompt"]
    assert _history_prompts(bob) == ["bob's private prompt"]
    assert _history_prompts(client_for(hosted_app)) == []  # a new visitor sees nobody's runs


def test_hosted_limits_refuse_through_the_api_and_the_app_keeps_serving(hosted_app):
    client = client_for(hosted_app)
    for kwargs, words in ((dict(max_new_tokens=513), "limit of 512"), (dict(repeats=6), "limit of 5"),
                          (dict(model="/tmp"), "local path"), (dict(model="x" * 300), "part over 255 bytes"),
                          (dict(model="/" + "x" * 300), "part over 255 bytes")):
        final = client.predict("hi", **{"model": TINY, **FAST, **kwargs}, api_name="/run")
        assert final["state"] == "invalid" and words in final["message"] and final["record"] is None
    assert client.predict("hi", TINY, **FAST, api_name="/run")["state"] == "ok"


def test_no_token_is_shown_in_the_page_the_records_or_the_downloads(hosted_app):
    client = client_for(hosted_app)
    final = client.predict("hi", TINY, **FAST, api_name="/run")
    page = httpx.get(hosted_app + "config", timeout=30).text
    shown = [page, json.dumps(final), json.dumps(client.predict(api_name="/history"))]
    shown += [p.read_text() for p in events.EXPORT_DIR.rglob("runs.*")]
    assert "Hosted mode" in page and final["record"]["env"]["torch"]
    for secret in SECRETS.values():
        assert not any(secret in text for text in shown)


# ---- bad input, through /run on the local app -----------------------------------------------------------

BAD_INPUTS = [
    ("unknown attention", dict(attn="flash-attention-9"), "attn='flash-attention-9' is not one of"),
    ("unknown dtype", dict(dtype="fp8"), "dtype='fp8' is not one of"),
    ("new tokens 0", dict(max_new_tokens=0), "new_tokens must be a whole number from 1"),
    ("new tokens negative", dict(max_new_tokens=-5), "new_tokens must be a whole number from 1"),
    ("new tokens huge", dict(max_new_tokens=10**12), "new_tokens must be a whole number from 1 to 32768"),
    ("new tokens not a number", dict(max_new_tokens="lots"), "new_tokens must be a whole number, got 'lots'"),
    ("repeats 0", dict(repeats=0), "repeats must be a whole number from 1"),
    ("empty prompt", dict(prompt=""), "prompt is empty"),
    ("whitespace prompt", dict(prompt=" \n\t "), "prompt is empty or only whitespace"),
    ("use_cache as the text 'false'", dict(use_cache="false"), "use_cache must be true or false (a JSON boolean), got 'false'"),
    ("use_cache as the text 'no'", dict(use_cache="no"), "use_cache must be true or false (a JSON boolean), got 'no'"),
    ("use_cache as a number", dict(use_cache=0), "use_cache must be true or false (a JSON boolean), got 0"),
    ("model not text", dict(model=5), "model must be text, got 5"),
    ("model as a list", dict(model=["a"]), "model must be text, got ['a']"),
    ("attn not text", dict(attn=None), "attn must be text, got None"),
    ("model name over 255 characters", dict(model="m" * 300), "no directory or Hugging Face id has a part over 255"),
]
ODD_PROMPTS = {  # must run, and come back exactly as sent
    "emoji, right-to-left and control characters": "héllo 👋🏽 مرحبا بالعالم שלום \x00\x07\x1b[31m\u202e",
    "HTML and script tags": "<script>alert('x')</script><img src=x onerror=alert(1)><b>{{7*7}}</b> ${x}",
}


def _healthy(client) -> None:
    assert client.predict("still serving?", TINY, **FAST, api_name="/run")["state"] == "ok"


@pytest.mark.parametrize("case, kwargs, words", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_gets_a_clear_message_and_the_app_serves_on(launched, figures, case, kwargs, words):
    demo, _ = launched
    client = client_for(demo.local_url)
    request = {"prompt": "hi", "model": TINY, **FAST, **kwargs}
    final = client.predict(**request, api_name="/run")
    assert final["state"] == "invalid" and words in final["message"] and final["record"] is None
    _healthy(client)
    figures["bad inputs tried"] = figures.get("bad inputs tried", 0) + 1


@pytest.mark.parametrize("prompt", ODD_PROMPTS.values(), ids=list(ODD_PROMPTS))
def test_odd_characters_and_markup_run_as_plain_text(launched, figures, prompt):
    demo, _ = launched
    final = client_for(demo.local_url).predict(prompt, TINY, **FAST, api_name="/run")
    assert final["state"] == "ok" and final["record"]["config"]["prompt"] == prompt
    figures["bad inputs tried"] = figures.get("bad inputs tried", 0) + 1


def test_a_lone_surrogate_is_refused_clearly(launched, figures):
    """gradio_client cannot even encode one (UnicodeEncodeError), so send the JSON escape over plain HTTP, in the
    published positional order."""
    demo, _ = launched
    client = client_for(demo.local_url)
    with pytest.raises(UnicodeEncodeError):
        client.predict("a\ud800b", TINY, **FAST, api_name="/run")
    published = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/run"]["parameters"]
    sent_values = {"prompt": "a\ud800b", "model": TINY, **FAST}
    body = json.dumps({"data": [sent_values.get(p["parameter_name"], p["parameter_default"]) for p in published]})
    base = demo.local_url + "gradio_api/call/run"
    sent = httpx.post(base, content=body, headers={"content-type": "application/json"}, timeout=30)
    event_id = sent.json()["event_id"]
    stream = httpx.get(f"{base}/{event_id}", timeout=60).text
    assert "event: complete" in stream and "prompt contains invalid Unicode (a lone surrogate at character 1)" in stream
    _healthy(client)
    figures["bad inputs tried"] = figures.get("bad inputs tried", 0) + 1


# ---- per-session history: bounded, and no visitor can wipe another's ---------------------------------

class FakeRequest:
    """What Gradio hands a handler: the session hash and the connection's peer."""

    def __init__(self, session: str, host: str) -> None:
        self.session_hash, self.client, self.headers = session, type("Peer", (), {"host": host})(), {}


def _tiny_record(prompt: str):
    from playground.record import RunRecord

    return RunRecord(model=TINY, attn="sdpa", use_cache=True, cache_impl="dynamic", dtype="fp32", compile="off",
                     device="cpu", batch_size=1, prompt_tokens=2, new_tokens=2, mode="benchmark", repeats=1,
                     warmup=0, config={"prompt": prompt})


def test_fresh_sessions_that_only_read_take_no_slot_and_evict_nobody():
    from playground.ui.api import make_endpoints

    app = events.Playground(None, TINY, HOSTED)
    alice = FakeRequest("alice", "10.0.0.1")
    app.history(events.session_of(alice)).add(_tiny_record("alice's run"))
    history = make_endpoints(app)[2]
    for i in range(300):  # more fresh sessions than there are slots, as a script would send
        assert history(FakeRequest(f"fresh-{i}", "10.0.0.2"))["runs"] == []
    assert [r["config"]["prompt"] for r in history(alice)["runs"]] == ["alice's run"]


def test_one_client_with_many_sessions_cannot_push_out_the_others():
    from playground.ui.sessions import MAX_SESSIONS_PER_CLIENT, SessionHistories

    histories = SessionHistories(max_sessions=16)
    others = [events.session_of(FakeRequest(f"visitor-{i}", f"10.0.1.{i}")) for i in range(15)]
    for key in others:
        histories.history(key).add(_tiny_record(key))
    for i in range(300):  # one address, a new session and a real run each time
        histories.history(events.session_of(FakeRequest(f"mallory-{i}", "10.6.6.6"))).add(_tiny_record("m"))
    assert all(histories.history(key).records() for key in others[1:])  # only the oldest visitor made room
    assert sum(key.startswith("10.6.6.6 ") for key in histories._sessions) <= MAX_SESSIONS_PER_CLIENT
    newest = events.session_of(FakeRequest("mallory-299", "10.6.6.6"))
    assert histories.history(newest).records()  # its own newest session is kept


def test_the_forwarded_address_is_trusted_only_behind_the_space_proxy(monkeypatch):
    request = FakeRequest("s", "10.9.9.9")
    request.headers = {"x-forwarded-for": "1.2.3.4, 5.6.7.8"}
    assert events.client_address(request) == "10.9.9.9"
    monkeypatch.setenv("SPACE_ID", "me/playground")
    assert events.client_address(request) == "5.6.7.8"  # the hop the proxy added, not the one the client sent


# ---- the prompt limit counts the model's tokens; run cost is bounded, not only sizes ---------------------

@pytest.mark.parametrize("prompt, tokens", [("😀" * 400, "1,600 tokens"), ("é" * 300, "600 tokens"),
                                            ("\x00" * 150, "150 tokens")])
def test_the_prompt_limit_counts_the_models_own_tokens(prompt, tokens):
    policy = HOSTED.replace(max_prompt_tokens=100)
    with pytest.raises(ConfigError, match=f"the prompt is {tokens} for {TINY} .* up to 100 tokens"):
        policy.check(RunConfig(model=TINY, prompt=prompt))  # a byte-level tokenizer: one token per UTF-8 byte
    policy.check(RunConfig(model=TINY, prompt="😀" * 24))  # 96 tokens pass


@pytest.mark.parametrize("changes, words", [
    (dict(model="qwen2.5-7b-shape", device="cpu"), "of cpu time here"),
    (dict(model="llama-3.1-8b-shape", device="cpu", dtype="bf16"), "of cpu time here"),
    (dict(model="llama-3.1-8b-shape", device="cpu", cache_impl="static", compile="default"),
     "(compile, llama-3.1-8b-shape"),
])
def test_hosted_mode_bounds_what_a_run_costs_on_this_host(changes, words):
    config = RunConfig(prompt="hi", new_tokens=64, repeats=1, warmup=1, **changes)
    with pytest.raises(ConfigError, match=r"this run would take about [\d,]+ s .*allows 120 s a run "
                                          r"\(PLAYGROUND_MAX_RUN_S\)"):
        HOSTED.check(config)
    with pytest.raises(ConfigError, match=re.escape(words)):
        HOSTED.check(config)
    HostingPolicy().check(config)  # the local app trusts its user


def test_a_small_model_on_a_cpu_is_within_the_cost_limit():
    HOSTED.check(RunConfig(model=TINY, prompt="hi", device="cpu", new_tokens=512, repeats=5, warmup=5))
