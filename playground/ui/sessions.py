"""Per-browser-session run history for hosted mode, so one visitor never sees another's prompts.

`SessionHistories.history(session)` is the part of `RunStore` the UI uses (add, records, clear), in
memory: a hosted app writes nothing a visitor typed to the server's disk. Memory stays bounded
without letting one visitor wipe the others:

- reading a history takes no slot: a session is admitted only when its first run is saved, so
  requests with fresh session ids evict nobody;
- one client address holds at most `MAX_SESSIONS_PER_CLIENT` sessions; past that its own least
  recently used session goes;
- when all `MAX_SESSIONS` slots are taken, the least recently used session of the client holding
  the most slots goes, so a client can only push out sessions while it holds no more than they do.

A session's runs are dropped when its page closes. The local app keeps using the one shared,
durable `RunStore`.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict

from playground.record import RunRecord

MAX_RUNS_PER_SESSION = 100  # oldest dropped first; a record with its output and latencies is a few kB
MAX_SESSIONS = 256  # sessions with runs kept at once, so memory stays bounded under many visitors
MAX_SESSIONS_PER_CLIENT = 8  # per client address: a few tabs and API scripts, not the whole table


def session_key(client: str, session: str) -> str:
    """The key of one browser or API session: the client's address, then Gradio's session hash."""
    return f"{client} {session}"


def client_of(key: str) -> str:
    return key.split(" ", 1)[0]


class SessionRuns:
    """One session's finished runs, newest first, numbered from 1."""

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


class SessionHistory:
    """One session's history as the UI and the API see it; it takes a slot only once a run is saved."""

    path = "this browser session (not saved on the server)"
    recovered_from = problem = None  # what RunStore reports about its file; a session has none
    skipped = unsaved = 0

    def __init__(self, histories: SessionHistories, session: str) -> None:
        self._histories, self._session = histories, session

    def add(self, record: RunRecord) -> int:
        return self._histories.admit(self._session).add(record)

    def records(self) -> list[RunRecord]:
        runs = self._histories.find(self._session)
        return runs.records() if runs else []

    def clear(self) -> int:
        runs = self._histories.find(self._session)
        return runs.clear() if runs else 0


class SessionHistories:
    def __init__(self, max_sessions: int = MAX_SESSIONS, per_client: int = MAX_SESSIONS_PER_CLIENT) -> None:
        self.max_sessions, self.per_client = max_sessions, per_client
        self._sessions: OrderedDict[str, SessionRuns] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()

    def history(self, session: str) -> SessionHistory:
        return SessionHistory(self, session)

    def find(self, session: str) -> SessionRuns | None:
        with self._lock:
            runs = self._sessions.get(session)
            if runs is not None:
                self._sessions.move_to_end(session)
            return runs

    def admit(self, session: str) -> SessionRuns:
        """The session's runs, giving it a slot first if it has none."""
        with self._lock:
            runs = self._sessions.get(session)
            if runs is None:
                self._make_room(client_of(session))
                runs = self._sessions[session] = SessionRuns()
            self._sessions.move_to_end(session)
            return runs

    def _make_room(self, client: str) -> None:
        holders = Counter(client_of(key) for key in self._sessions)
        if holders[client] >= self.per_client:
            victim = client
        elif len(self._sessions) >= self.max_sessions:
            most = max(holders.values())
            victim = next(client_of(key) for key in self._sessions if holders[client_of(key)] == most)
        else:
            return
        del self._sessions[next(key for key in self._sessions if client_of(key) == victim)]

    def drop(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)
