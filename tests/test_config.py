import pytest

from playground import capabilities
from playground import config as config_module
from playground.config import ConfigError, RunConfig


def test_defaults_are_valid_and_round_trip():
    config = RunConfig(prompt="hi")
    assert RunConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(prompt=""), "prompt is empty"),
        (dict(prompt="   \n\t"), "only whitespace"),
        (dict(prompt="a", prompt_tokens=4), "exactly one of prompt"),
        (dict(prompt="a", new_tokens=0), "new_tokens must be a whole number from 1"),
        (dict(prompt="a", new_tokens=-5), "new_tokens must be"),
        (dict(prompt="a", new_tokens=10**9), "new_tokens must be"),
        (dict(prompt="a", repeats=0), "repeats must be"),
        (dict(prompt="a", dtype="fp8"), "dtype='fp8' is not one of"),
        (dict(prompt="a", attn="flash"), "attn='flash' is not one of"),
        (dict(prompt="a", use_cache=False, cache_impl="static"), "cache_impl=static needs use_cache on"),
        (dict(prompt="a", compile="default", cache_impl="dynamic"), "needs use_cache on and cache_impl=static"),
        (dict(prompt="a", compile="default", use_cache=False), "needs use_cache on and cache_impl=static"),
        (dict(prompt="a", compile="default", cache_impl="static", warmup=0), "needs warmup >= 1"),
        (dict(prompt="a", dtype="fp32", attn="flash_attention_2"), "runs only in fp16 or bf16"),
        (dict(prompt="a", use_cache="yes"), "use_cache must be true or false"),
        (dict(prompt="a\ud800b"), "invalid Unicode"),
        (dict(prompt_tokens=0), "prompt_tokens must be"),
        (dict(prompt="a", model=" "), "model is empty"),
        (dict(prompt="a", backend="fast", cache_impl="static", attn="flex_attention"),
         "takes attn eager, sdpa, sdpa:<backend> or flash_attention_2 only"),
        (dict(prompt="a", backend="fast", cache_impl="dynamic"), "own static KV cache"),
        (dict(prompt="a", backend="fast", use_cache=False), "own static KV cache"),
        (dict(prompt="a", cache_impl="static", compile="reduce-overhead", kernels="tuned"),
         "with backend=transformers and compile=reduce-overhead the playground times no launch config, so leave it "
         "at fixed"),
        (dict(prompt="a", backend="fast", cache_impl="static", kernels="tuned"), "compile=off the playground times no"),
        (dict(prompt="a", backend="fast", cache_impl="static", compile="aot", kernels="tuned"),
         "compile=aot the playground times no"),
        (dict(prompt="a", backend="fast", cache_impl="static", compile="max-autotune"),
         "max-autotune times kernels while compiling and kernels=fixed times none"),
    ],
)
def test_nonsense_is_refused_with_the_reason(fields, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(**fields)


@pytest.mark.parametrize("fields, layout", [
    (dict(), "dynamic"),
    (dict(backend="fast"), "static"),  # the fast backend decodes from its own static cache: no need to ask for it
    (dict(compile="default"), "static"),  # transformers compiles the decode step over a static cache only
    (dict(backend="fast", compile="aot"), "static"),
    (dict(cache_impl="static"), "static"),
    (dict(cache_impl="dynamic"), "dynamic"),
    (dict(use_cache=False), "none"),
])
def test_cache_auto_resolves_to_the_layout_the_backend_decodes_from(fields, layout):
    config = RunConfig(prompt="a", **fields)
    assert config.cache_impl == fields.get("cache_impl", config_module.AUTO_CACHE)  # the request is kept as asked
    assert config.cache_impl_effective == layout


def test_unknown_field_from_api_is_refused():
    with pytest.raises(ConfigError, match="unknown configuration field"):
        RunConfig.from_dict({"prompt": "a", "flash": True})


CPU_HOST = capabilities.Host(cuda=False, device_name="cpu", capability=None, bf16=True,
                             packages={"flash-attn": None, "flash-attn-3": None, "flash-attn-4": None})
OLD_GPU = capabilities.Host(cuda=True, device_name="Tesla T4", capability=(7, 5), bf16=False,
                            packages={"flash-attn": "2.8.3", "flash-attn-3": None, "flash-attn-4": None})


def test_auto_resolves_to_fp32_on_cpu():
    assert capabilities.check(RunConfig(prompt="a"), CPU_HOST) == ("cpu", "fp32")


@pytest.mark.parametrize(
    "fields, host, message",
    [
        (dict(device="cuda"), CPU_HOST, "no CUDA GPU is visible"),
        (dict(attn="sdpa:efficient"), CPU_HOST, "needs a CUDA GPU"),
        (dict(attn="flash_attention_2", dtype="bf16"), CPU_HOST, "needs a CUDA GPU"),
        (dict(attn="flash_attention_2", dtype="fp16"), OLD_GPU, "needs compute capability 8.0"),
        (dict(dtype="bf16", device="cuda"), OLD_GPU, "bf16 is not supported by Tesla T4"),
        (dict(attn="sdpa:flash", dtype="fp32", device="cuda"), OLD_GPU, "needs fp16 or bf16"),
    ],
)
def test_host_checks_name_the_problem(fields, host, message):
    with pytest.raises(ConfigError, match=message):
        capabilities.check(RunConfig(prompt="a", **fields), host)


def test_missing_flash_attn_says_how_to_install():
    gpu = capabilities.Host(cuda=True, device_name="H200", capability=(9, 0), bf16=True,
                            packages={"flash-attn": None, "flash-attn-3": None, "flash-attn-4": None})
    reason = capabilities.attention_unavailable("flash_attention_2", "cuda", "bf16", gpu)
    assert reason == "flash-attn not installed: pip install flash-attn --no-build-isolation"
