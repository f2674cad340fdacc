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


# ---- faults: each is told apart from damage, and no finished run is lost -------------------------

import sqlite3  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from playground import store as store_module  # noqa: E402
from playground.ui.events import history_note, history_view  # noqa: E402

MALFORMED_ROWS = {"not JSON": "{broken", "an empty object": "{}", "a list": "[1, 2]", "a number": "7",
                  "null": "null"}


@pytest.mark.parametrize("text", MALFORMED_ROWS.values(), ids=list(MALFORMED_ROWS))
def test_a_malformed_row_is_skipped_counted_and_kept(tmp_path, text):
    store = RunStore(tmp_path / "runs.sqlite3")
    good = store.add(record())
    store._db.execute("INSERT INTO runs (created_at, record) VALUES ('x', ?)", (text,))
    newer = store.add(record(decode_tok_s=5.0))
    assert [r.run_id for r in store.records()] == [newer, good] and store.skipped == 1
    view = history_view(store, None, tmp_path / "export")  # what page load and the end of a run show
    assert "1 unreadable row(s) skipped" in view["history_note"] and len(view["history"]) == 2
    assert store._db.execute("SELECT count(*) FROM runs").fetchone()[0] == 3  # still on disk


def test_a_runs_table_of_another_shape_is_left_alone_and_named(tmp_path):
    path = tmp_path / "runs.sqlite3"
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE runs (id INTEGER, name TEXT)")
        other.execute("INSERT INTO runs VALUES (1, 'theirs')")
    other.close()
    store = RunStore(path)
    assert "columns (id, name), not this app's (run_id, created_at, record)" in store.problem
    assert store.recovered_from is None and not list(tmp_path.glob("*.damaged-*"))
    assert store.add(record()) is not None and len(store.records()) == 1  # this process's runs, in memory
    store.close()
    with sqlite3.connect(path) as other:
        assert other.execute("SELECT * FROM runs").fetchall() == [(1, "theirs")]


def test_a_data_dir_that_cannot_be_created_runs_in_memory_and_says_so(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PLAYGROUND_DATA_DIR", str(blocker / "data"))
    store = RunStore()
    assert f"cannot create {blocker / 'data'}" in store.problem and "not saved" in store.problem
    store.add(record())
    assert len(store.records()) == 1 and "History not saved" in history_note(store, store.records())


def _hold_lock(path, seconds: float, readers_too: bool = True) -> threading.Thread:
    """Another connection (as another process would) holding the database for `seconds`: against every
    other connection, or (`readers_too=False`, all WAL allows while others are open) against writers."""
    held = threading.Event()

    def hold():
        other = sqlite3.connect(path, isolation_level=None)
        if readers_too:
            other.execute("PRAGMA locking_mode=EXCLUSIVE")
        other.execute("BEGIN EXCLUSIVE")
        other.execute("INSERT INTO runs (created_at, record) VALUES ('x', '{}')")
        held.set()
        time.sleep(seconds)
        other.execute("ROLLBACK")
        other.close()
    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(5), "the other connection could not take its lock"
    return thread


def test_a_lock_held_by_another_process_is_waited_for_not_taken_for_damage(tmp_path):
    path = tmp_path / "runs.sqlite3"
    first = RunStore(path)
    first.add(record())
    first.close()
    holder = _hold_lock(path, 0.5)
    store = RunStore(path)  # opens once the lock is released
    holder.join()
    assert store.problem is None and store.recovered_from is None and not list(tmp_path.glob("*.damaged-*"))
    assert len(store.records()) == 1


def test_a_lock_held_too_long_still_moves_nothing_aside(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "LOCK_WAIT_S", 0.3)
    path = tmp_path / "runs.sqlite3"
    RunStore(path).close()
    holder = _hold_lock(path, 1.5)
    store = RunStore(path)
    holder.join()
    assert "database is locked" in store.problem and not list(tmp_path.glob("*.damaged-*"))


def test_a_locked_save_waits_and_retries(tmp_path):
    path = tmp_path / "runs.sqlite3"
    store = RunStore(path)
    holder = _hold_lock(path, 0.5, readers_too=False)
    run = record()
    assert store.add(run) is not None and run.reason == ""
    holder.join()
    assert len(store.records()) == 1


def test_a_save_that_fails_keeps_the_run_says_why_and_retries_it_later(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count={pages}")  # a full disk, as SQLite sees one
    lost = record(output_ids=list(range(5000)))
    assert store.add(lost) is None
    assert lost.reason.startswith("not saved to the history: database or disk is full") and store.unsaved == 1
    assert "1 finished run(s) could not be saved yet" in history_note(store, store.records())
    store._db.execute("PRAGMA max_page_count=1000000")  # space again
    later = record()
    assert store.add(later) is not None and store.unsaved == 0
    saved = store.records()
    assert [r.run_id for r in saved] == [later.run_id, lost.run_id] and lost.reason == ""
    assert saved[1].output_ids == list(range(5000)) and saved[1].reason == ""
