import json

from playground.record import RunRecord
from playground.store import RunStore


def record(**changes):
    base = dict(model="m", attn="sdpa", use_cache=True, cache_impl="dynamic", dtype="fp32", compile="off",
                device="cpu", batch_size=1, prompt_tokens=4, new_tokens=8, mode="benchmark", repeats=1, warmup=0,
                decode_tok_s=100.0, attn_kernels={"decode": ["k"]})
    return RunRecord(**{**base, **changes})


def test_runs_survive_a_reopen_newest_first(tmp_path):
    path = tmp_path / "runs.sqlite3"
    store = RunStore(path)
    ids = [store.add(record(decode_tok_s=float(i))) for i in range(3)]
    store.close()
    reopened = RunStore(path)
    records = reopened.records()
    assert [r.run_id for r in records] == ids[::-1]
    assert records[0].decode_tok_s == 2.0 and records[0].attn_kernels == {"decode": ["k"]}
    frame = reopened.dataframe()
    assert list(frame["decode_tok_s"]) == [2.0, 1.0, 0.0]


def test_clear_removes_everything(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    store.add(record())
    assert store.clear() == 1 and store.records() == []


def test_a_damaged_file_is_kept_aside_and_a_new_store_starts(tmp_path):
    path = tmp_path / "runs.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    store = RunStore(path)
    assert store.recovered_from is not None and store.recovered_from.read_bytes().startswith(b"this is not")
    store.add(record())
    assert len(store.records()) == 1


def test_records_round_trip_through_json():
    r = record(output_ids=[1, 2, 3], env={"torch": "x"})
    assert RunRecord.from_dict(json.loads(json.dumps(r.to_dict()))) == r
