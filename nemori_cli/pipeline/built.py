"""How much of a memory is built: what `stats`, `ask --json`, MCP and `build` report.

Messages are searchable as raw turns the moment `ingest` stores them; the
episodes, facts and notes are built from them later (`nemori build`), oldest
first. So the built part is always a prefix of the history in time:
everything said up to ``built_through`` is built, everything from
``pending_from`` on is not (yet). The estimate of what is left is the caller's
(deps.build_eta: estimate.py at the best rates known, this database's own
calls first), the same figures `ingest --dry-run` shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from nemori_cli.domain import Backlog
from nemori_cli.memory import modes
from nemori_cli.memory.profile import Profile
from nemori_cli.store import messages as message_sql
from nemori_cli.store.contract import Store


@dataclass(frozen=True)
class BuildState:
    pending: int  # messages stored (and searchable) but not yet made into memory
    built_through: datetime | None  # every message said up to this moment is built (None: none is); UTC
    pending_from: datetime | None  # the oldest message not built yet (None: all are); UTC
    eta_seconds: float | None = None  # LLM time to build the rest, at ``eta_source``'s rates
    eta_source: str | None = None  # rates.Rates.source: "this database", "nemori doctor", "built-in", ...
    worker_pid: int | None = None  # a `nemori build` holding this database's build lock (pipeline/lock.py)

    @property
    def complete(self) -> bool:
        return self.pending == 0

    def as_json(self) -> dict:
        return {
            "pending": self.pending,
            "built_through": _iso(self.built_through),
            "pending_from": _iso(self.pending_from),
            "eta_seconds": None if self.eta_seconds is None else round(self.eta_seconds, 1),
            "eta_source": self.eta_source,
            "building": self.worker_pid is not None,
            "worker_pid": self.worker_pid,
        }

    def line(self) -> str:
        """One line for a person: empty when everything is built."""
        if self.complete:
            return ""
        since = f" (said from {self.pending_from:%Y-%m-%d} on)" if self.pending_from else ""
        eta = f", about {clock(self.eta_seconds)} of model time left ({self.eta_source} rates)" if self.eta_seconds is not None else ""
        who = f"; a build is running (pid {self.worker_pid})" if self.worker_pid else "; `nemori build` builds them"
        return f"{self.pending} messages{since} are searchable as raw turns but not built into episodes and facts yet{eta}{who}"


# What the rest will take: (seconds, where the rates come from) for a backlog (deps.build_eta: estimate.py at rates.best).
Eta = Callable[[Backlog, Profile], tuple[float, str]]


def state(db: Store, user: str, profile: Profile, *, eta: Eta | None = None, worker_pid: int | None = None) -> BuildState:
    """This user's build state; with ``eta``, the time the rest needs."""
    mode = modes.for_profile(profile)
    backlog = mode.backlog(db, user)
    first = mode.first_waiting(db, user) if backlog.messages else None
    through = message_sql.last_before(db, user, first)
    seconds, source = eta(backlog, profile) if eta is not None else (None, None)
    return BuildState(
        pending=backlog.messages,
        built_through=_utc(through),
        pending_from=_utc(first),
        eta_seconds=seconds,
        eta_source=source,
        worker_pid=worker_pid,
    )


def _utc(epoch: float | None) -> datetime | None:
    """Both moments in UTC, whatever offset (or none) the messages were stored with: they compare, and print, alike."""
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def clock(seconds: float) -> str:
    """A duration as a person reads it: 40 s, 12 min, 3.5 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
