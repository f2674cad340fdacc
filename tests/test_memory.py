from transformers import LlamaConfig

from playground.memory import HEADROOM, Estimate, kv_cache_bytes, prefill_transient_bytes

LLAMA_8B = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8)


def test_kv_per_token_of_the_llama_3_1_8b_shape():
    assert kv_cache_bytes(LLAMA_8B, 1, 1, "bf16") == 2 * 32 * 8 * 128 * 2  # 128 KiB


def test_prefill_transient_is_the_mlp_and_the_residual_stream_per_prompt_token():
    assert prefill_transient_bytes(LLAMA_8B, 512, "bf16") == (4 * 14336 + 3 * 4096) * 512 * 2


def test_largest_batch_is_what_is_free_beyond_the_weights_over_one_sequence():
    est = Estimate(weights_bytes=16 * 10**9, kv_bytes=0, free_bytes=int(HEADROOM * 116.05 * 10**9),
                   sequence_bytes=10**8)
    assert est.max_batch == 1000  # (116.05 GB - 16 GB) / 0.1 GB, rounded down
    assert Estimate(16 * 10**9, 0, 10**9, 10**8).max_batch == 0  # not even the weights fit
    assert Estimate(1, 0, 10**9).max_batch is None  # no KV cache: the context does not bound the batch
