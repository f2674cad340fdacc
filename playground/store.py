"""The durable run history: every finished run, from the UI or the CLI, in one SQLite file.

SQLite in WAL mode with one transaction per run means a crash or a kill loses at most the run in
flight. What can go wrong on disk is told apart, because the remedies differ:

- a file that is not a database (or is corrupt) is moved aside, never deleted, and a new store starts;
- a lock held by another process is waited for (up to `LOCK_WAIT_S`), never taken for damage;
- a directory that cannot be written, or a `runs` table of another shape, leaves the file alone: the
  store keeps this process's runs in memory and `problem` says why they are not saved;
- a row that cannot be read is skipped (and counted in `skipped`) but stays in the file;
- a save that fails (disk full, a lock held too long) keeps the run in memory, says so in its
  `reason`, and is retried with the next save.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

if TYPE_CHECKING:
    import pandas as pd

    from playground.record import RunRecord

DATA_DIR_ENV = "PLAYGROUND_DATA_DIR"
STORE_NAME = "runs.sqlite3"
COLUMNS = ("run_id", "created_at", "record")
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    record TEXT NOT NULL
)
"""
LOCK_WAIT_S = 10.0  # how long an open or a save waits for another process's lock
LOCK_POLL_S = 0.1
NOT_SAVED = "not saved to the history: "
DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)  # the only errors that move a file aside
LOCKED = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
T = TypeVar("T")


def data_path() -> Path:
    """$PLAYGROUND_DATA_DIR, else $XDG_DATA_HOME/llm-speed-playground, else ~/.local/share/llm-speed-playground."""
    base = os.environ.get(DATA_DIR_ENV)
    if base:
        return Path(base).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(xdg) / "llm-speed-playground"


def data_dir() -> Path:
    """`data_path()`, created if missing."""
    path = data_path()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _code(exc: BaseException) -> int | None:
    """SQLite's primary result code of `exc` (extended codes carry it in the low byte)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def _describe(exc: BaseException) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


class ForeignTable(sqlite3.DatabaseError):
    """The file holds a `runs` table this app did not create; it is left as it is."""


class RunStore:
    def __init__(self, path: Path | str | None = None) -> None:
        self.recovered_from: Path | None = None
        self.problem: str | None = None  # why runs are kept in memory only; None while they are saved to disk
        self.skipped = 0  # rows of the last read that could not be read (left in the file)
        self._unsaved: list[RunRecord] = []  # finished runs whose save failed, retried with the next save
        self._lock = threading.Lock()
        self.path = Path(path) if path else data_path() / STORE_NAME
        self._db = self._open()

    def _connect(self, target: str | Path) -> sqlite3.Connection:
        db = sqlite3.connect(target, check_same_thread=False, isolation_level=None, timeout=LOCK_POLL_S)
        try:
            self._waiting(lambda: db.execute("PRAGMA journal_mode=WAL"))
            db.execute("PRAGMA synchronous=FULL")
            self._waiting(lambda: db.execute(SCHEMA))
            columns = tuple(row[1] for row in db.execute("PRAGMA table_info(runs)"))
            if not set(COLUMNS) <= set(columns):
                raise ForeignTable(f"its `runs` table has the columns ({', '.join(columns)}), not this app's "
                                   f"({', '.join(COLUMNS)}): it belongs to another program or version")
            self._waiting(lambda: db.execute("SELECT count(*) FROM runs").fetchone())
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _waiting(step: Callable[[], T]) -> T:
        """Run one statement, waiting up to LOCK_WAIT_S while another process holds the database."""
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                return step()
            except sqlite3.OperationalError as exc:
                if _code(exc) not in LOCKED or time.monotonic() >= deadline:
                    raise
                time.sleep(LOCK_POLL_S)

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return self._connect(self.path)
        except ForeignTable as exc:
            return self._in_memory(f"{self.path} was left untouched: {exc}")
        except sqlite3.DatabaseError as exc:
            if _code(exc) not in DAMAGED:
                return self._in_memory(f"cannot use {self.path}: {_describe(exc)}")
        except OSError as exc:
            return self._in_memory(f"cannot create {self.path.parent}: {_describe(exc)}")
        self._move_aside()
        try:
            return self._connect(self.path)
        except (sqlite3.Error, OSError) as exc:
            return self._in_memory(f"cannot start a new history at {self.path}: {_describe(exc)}")

    def _move_aside(self) -> None:
        backup = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        self.path.rename(backup)
        for suffix in ("-wal", "-shm"):
            side = Path(f"{self.path}{suffix}")
            if side.exists():
                side.rename(Path(f"{backup}{suffix}"))
        self.recovered_from = backup

    def _in_memory(self, why: str) -> sqlite3.Connection:
        self.problem = f"{why}. Runs are kept in memory until the app stops and are not saved"
        return self._connect(":memory:")

    def add(self, record: RunRecord) -> int | None:
        """Save `record` and return its run id; None when the save failed.

        A failed save keeps the run in memory, says so in its `reason`, and is retried (oldest first)
        with the next save, so a full disk or a long lock never loses a finished run while the app runs.
        """
        with self._lock:
            self._unsaved.append(record)
            while self._unsaved:
                try:
                    self._insert(self._unsaved[0])
                except (sqlite3.Error, OSError) as exc:
                    for waiting in self._unsaved:
                        waiting.reason = f"{NOT_SAVED}{_describe(exc)}"
                    return None
                self._unsaved.pop(0)
            return record.run_id

    def _insert(self, record: RunRecord) -> None:
        data = record.to_dict()
        if record.reason.startswith(NOT_SAVED):
            data["reason"] = ""  # what the file keeps is the run, not the failure of an earlier save
        cur = self._waiting(lambda: self._db.execute("INSERT INTO runs (created_at, record) VALUES (?, ?)",
                                                     (record.created_at, json.dumps(data))))
        record.reason = data["reason"]
        record.run_id = cur.lastrowid  # the column is the source of truth; records() sets it on read

    @property
    def unsaved(self) -> int:
        """Finished runs kept in memory because their save failed."""
        return len(self._unsaved)

    def records(self) -> list[RunRecord]:
        """All readable runs, newest first; `skipped` counts the rows that could not be read."""
        from playground.record import RunRecord

        with self._lock:
            rows = self._waiting(lambda: self._db.execute(
                "SELECT run_id, record FROM runs ORDER BY run_id DESC").fetchall())
        out = []
        for run_id, text in rows:
            try:
                data = json.loads(text)
                rec = RunRecord.from_dict(data) if isinstance(data, dict) else None
            except (TypeError, ValueError):  # not JSON, or a dict without a record's required fields
                rec = None
            if rec is None:
                continue
            rec.run_id = run_id
            out.append(rec)
        self.skipped = len(rows) - len(out)
        return out

    def get(self, run_id: int) -> RunRecord | None:
        return next((r for r in self.records() if r.run_id == run_id), None)

    def dataframe(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.records()])

    def clear(self) -> int:
        """Delete every run, unreadable rows included (the user asked for an empty history)."""
        with self._lock:
            self._unsaved.clear()
            return self._waiting(lambda: self._db.execute("DELETE FROM runs")).rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()
