"""Loading real checkpoints from disk, and what a user sees when that cannot work."""

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

from playground.config import RunConfig
from playground.engine import run
from playground.loader import MODELS, LoadError, matmul_shape, model_source
from playground.presets import noise_tokenizer

RUN = dict(device="cpu", new_tokens=6, repeats=1, warmup=0)


def save_model(path, model_type, auto=AutoModelForCausalLM, **shape):
    config = AutoConfig.for_model(model_type, vocab_size=512, **shape)
    torch.manual_seed(0)
    auto.from_config(config).save_pretrained(path)
    noise_tokenizer(512).save_pretrained(path)
    return path


@pytest.mark.parametrize(
    "model_type, shape",
    [
        ("qwen2", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=256)),
        ("gpt2", dict(n_embd=64, n_layer=2, n_head=4, n_positions=256)),
    ],
)
def test_local_directory_of_another_architecture_loads_and_runs(tmp_path, model_type, shape):
    path = save_model(tmp_path / model_type, model_type, **shape)
    base = dict(RUN, model=str(path), prompt="hello local model", profile_kernels=False)
    cached = run(RunConfig(**base))
    uncached = run(RunConfig(use_cache=False, **base))
    assert cached.status == "ok", cached.reason
    assert cached.model_source == "local" and cached.random_weights is False
    assert cached.output_ids == uncached.output_ids and len(cached.output_ids) == 6


def test_loaded_model_is_reused_until_a_load_setting_changes(tmp_path):
    path = str(save_model(tmp_path / "m", "qwen2", hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                          num_attention_heads=4, num_key_value_heads=2))
    first, reused_first = MODELS.get(path, "cpu", "fp32", "sdpa")
    second, reused_second = MODELS.get(path, "cpu", "fp32", "sdpa")
    third, reused_third = MODELS.get(path, "cpu", "fp32", "eager")
    assert (reused_first, reused_second, reused_third) == (False, True, False)
    assert first is second and third is not first and third.attn_effective == "eager"


def test_broken_config_json_names_the_file(tmp_path):
    (tmp_path / "config.json").write_text("{ not json")
    record = run(RunConfig(model=str(tmp_path), prompt="x", **RUN))
    assert record.status == "error" and "config.json is not valid JSON" in record.reason


def test_a_model_that_is_not_a_causal_lm_is_refused(tmp_path):
    path = save_model(tmp_path / "t5", "t5", auto=AutoModelForSeq2SeqLM, d_model=32, d_kv=8, d_ff=64,
                      num_layers=1, num_heads=4)
    record = run(RunConfig(model=str(path), prompt="x", **RUN))
    assert record.status == "error" and "not a causal language model" in record.reason


def test_missing_directory_and_bad_names():
    assert model_source("tiny-random-llama") == "preset"
    assert model_source("meta-llama/Llama-3.2-1B") == "hub"
    with pytest.raises(LoadError, match="not a preset"):
        model_source("no spaces allowed/in ids!")
    record = run(RunConfig(model="/definitely/not/here", prompt="x", **RUN))
    assert record.status == "error" and "no config.json" in record.reason


def test_hub_id_without_network_says_so():
    record = run(RunConfig(model="Qwen/Qwen2.5-0.5B", prompt="x", **RUN))
    assert record.status == "error"
    assert "Hugging Face Hub" in record.reason


def test_noise_tokenizer_covers_the_whole_vocabulary():
    tok = noise_tokenizer(4096)
    assert len(tok) == 4096
    ids = tok("Ünïcode 😀 text")["input_ids"]
    assert max(ids) < 4096 and tok.decode(ids) == "Ünïcode 😀 text"
    assert tok.decode([4095]).strip().isalpha()  # every id the model can emit decodes to a word


def test_a_long_load_reports_progress(monkeypatch):
    from playground import engine

    MODELS.clear()
    monkeypatch.setattr(engine, "LOAD_POLL_S", 0.01)
    events = list(engine.generate(RunConfig(model="stdlib-llama-tiny", prompt="x", **RUN)))
    loading = [e.detail for e in events if isinstance(e, engine.Phase) and e.phase == "loading"]
    assert len(loading) >= 2 and loading[-1].endswith(" s") and "stdlib-llama-tiny" in loading[0]


def test_hub_download_bytes_counts_partial_blobs(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from playground.loader import hub_download_bytes

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    blobs = tmp_path / "models--owner--name" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / "abc").write_bytes(b"x" * 1000)
    (blobs / "def.incomplete").write_bytes(b"x" * 500)
    assert hub_download_bytes("owner/name") == 1500 and hub_download_bytes("owner/other") == 0


def test_matmul_shape_counts_every_linear_weight_of_a_llama_and_refuses_mixture_of_experts():
    config = AutoConfig.for_model("llama", vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2)
    shape = matmul_shape(AutoModelForCausalLM.from_config(config))
    per_layer = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128  # q, o; k, v (2 kv heads of 16); gate, up, down
    assert (shape.body_weights, shape.head_weights) == (2 * per_layer, 512 * 64)
    assert (shape.layers, shape.heads, shape.head_dim) == (2, 4, 16)
    moe = AutoConfig.for_model("mixtral", vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, num_local_experts=4)
    assert matmul_shape(AutoModelForCausalLM.from_config(moe)) is None


def test_matmul_shape_knows_the_sliding_window():
    shape = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2)
    mistral = AutoModelForCausalLM.from_config(AutoConfig.for_model("mistral", sliding_window=256, **shape))
    assert matmul_shape(mistral).window == 256
    qwen2 = AutoModelForCausalLM.from_config(AutoConfig.for_model("qwen2", sliding_window=256, **shape))
    assert matmul_shape(qwen2).window is None  # use_sliding_window is off by default


# ---- an unreachable hub fails fast; every load error names its cause ---------------------------------

import socket  # noqa: E402

import pytest  # noqa: E402

from playground import loader  # noqa: E402


@pytest.fixture
def silent_hub(monkeypatch):
    """A hub endpoint that accepts connections and never answers, as a blocked or black-holed network does."""
    from huggingface_hub import constants
    from transformers import AutoConfig, AutoTokenizer

    for auto in (AutoConfig, AutoTokenizer):  # import transformers' lazy modules now, outside the timing
        with pytest.raises(OSError):
            auto.from_pretrained("nobody/not-cached-model", local_files_only=True)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
    yield server
    server.close()


def requests_sent(server: socket.socket) -> list[str]:
    """The request line of each connection the silent hub has been sent so far (each accepted and closed here)."""
    server.setblocking(False)
    lines = []
    while True:
        try:
            connection, _ = server.accept()
        except BlockingIOError:
            return lines
        with connection:
            connection.settimeout(10)  # the client wrote its request before it began to wait for an answer
            lines.append(connection.recv(256).decode("latin-1").split("\r\n")[0])


@pytest.mark.parametrize("load", [lambda: loader.load_config("nobody/not-cached-model"),
                                  lambda: loader.ModelCache().get("nobody/not-cached-model", "cpu", "fp32", "sdpa")],
                         ids=["config", "model"])
def test_an_unreachable_hub_fails_fast_with_a_clear_message(silent_hub, load):
    """One probe, which gives up after HUB_PROBE_S, then the local cache only: a download would connect again
    and wait out the hub client's own timeouts and retries."""
    with pytest.raises(loader.LoadError, match="could not download 'nobody/not-cached-model' from the Hugging Face Hub"):
        load()
    assert [line.split(" ")[0] for line in requests_sent(silent_hub)] == ["HEAD"]  # the probe alone


def test_an_invalid_model_config_shows_the_validators_whole_message(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 3, '
                                          '"num_hidden_layers": 1, "intermediate_size": 32, "vocab_size": 100}')
    with pytest.raises(loader.LoadError, match=r"hidden size \(64\) is not a multiple of the number of attention "
                                               r"heads \(3\)"):
        loader.load_config(str(tmp_path))
