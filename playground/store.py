"""The durable run history: every finished run, from the UI or the CLI, in one SQLite file.

SQLite in WAL mode with one transaction per run means a crash or a kill loses at most the run in
flight. A file that cannot be opened as a database is moved aside (never deleted) and a new store
starts, so a damaged history never stops the app.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from playground.record import RunRecord

DATA_DIR_ENV = "PLAYGROUND_DATA_DIR"
STORE_NAME = "runs.sqlite3"
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    record TEXT NOT NULL
)
"""


def data_dir() -> Path:
    """$PLAYGROUND_DATA_DIR, else $XDG_DATA_HOME/llm-speed-playground, else ~/.local/share/llm-speed-playground."""
    base = os.environ.get(DATA_DIR_ENV)
    if base:
        path = Path(base).expanduser()
    else:
        xdg = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
        path = Path(xdg) / "llm-speed-playground"
    path.mkdir(parents=True, exist_ok=True)
    return path


class RunStore:
    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else data_dir() / STORE_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.recovered_from: Path | None = None
        self._lock = threading.Lock()
        self._db = self._open()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(SCHEMA)
        db.execute("SELECT count(*) FROM runs").fetchone()
        return db

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError:
            backup = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
            self.path.rename(backup)
            for suffix in ("-wal", "-shm"):
                side = Path(f"{self.path}{suffix}")
                if side.exists():
                    side.rename(Path(f"{backup}{suffix}"))
            self.recovered_from = backup
            return self._connect()

    def add(self, record: RunRecord) -> int:
        with self._lock:
            cur = self._db.execute("INSERT INTO runs (created_at, record) VALUES (?, ?)",
                                   (record.created_at, json.dumps(record.to_dict())))
            record.run_id = cur.lastrowid  # the column is the source of truth; records() sets it on read
            return record.run_id

    def records(self) -> list[RunRecord]:
        """All runs, newest first."""
        from playground.record import RunRecord

        with self._lock:
            rows = self._db.execute("SELECT run_id, record FROM runs ORDER BY run_id DESC").fetchall()
        out = []
        for run_id, text in rows:
            rec = RunRecord.from_dict(json.loads(text))
            rec.run_id = run_id
            out.append(rec)
        return out

    def get(self, run_id: int) -> RunRecord | None:
        return next((r for r in self.records() if r.run_id == run_id), None)

    def dataframe(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.records()])

    def clear(self) -> int:
        with self._lock:
            return self._db.execute("DELETE FROM runs").rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()
