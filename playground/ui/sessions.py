"""Per-browser-session run history for hosted mode, so one visitor never sees another's prompts.

`SessionRuns` speaks the part of `RunStore` the UI uses (add, records, clear), in memory: a
hosted app writes nothing a visitor typed to the server's disk. `SessionHistories` hands each
session its own, forgets the least recently used when there are too many, and drops a session's
runs when its page closes. The local app keeps using the one shared, durable `RunStore`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from playground.record import RunRecord

MAX_RUNS_PER_SESSION = 100  # oldest dropped first; a record with its output and latencies is a few kB
MAX_SESSIONS = 256  # least recently used dropped first, so memory stays bounded under many visitors


class SessionRuns:
    """One session's finished runs, newest first, numbered from 1."""

    path = "this browser session (not saved on the server)"
    recovered_from = problem = None  # what RunStore reports about its file; a session has none
    skipped = unsaved = 0

    def __init__(self) -> None:
        self._runs: list[RunRecord] = []
        self._next_id = 1
        self._lock = threading.Lock()

    def add(self, record: RunRecord) -> int:
        with self._lock:
            record.run_id, self._next_id = self._next_id, self._next_id + 1
            self._runs = [record, *self._runs][:MAX_RUNS_PER_SESSION]
            return record.run_id

    def records(self) -> list[RunRecord]:
        with self._lock:
            return list(self._runs)

    def clear(self) -> int:
        with self._lock:
            count, self._runs = len(self._runs), []
            return count


class SessionHistories:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, SessionRuns] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session: str) -> SessionRuns:
        with self._lock:
            runs = self._sessions.pop(session, None) or SessionRuns()
            self._sessions[session] = runs  # most recently used last
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
            return runs

    def drop(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)
