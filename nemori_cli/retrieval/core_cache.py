"""The core context's KV state, kept between processes: read once per memory change, loaded by every `ask` after.

One file per user and answer model, in a folder next to the database
(``chat.db.kv/``; for a PostgreSQL store, under the cache directory), and
one more for the short road's fixed head (its instructions: ``Head``). The
file says which model, settings and core it was computed for
(llm/state_files.py); anything else is rebuilt, never used. Saving is an
optimisation: a folder that cannot be written (a read-only database) only
means the next process reads the core again.

The state holds the user's text in another form, so `forget` removes the
user's files with the rest of what it deletes.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from nemori_cli.llm import state_files
from nemori_cli.llm.base import PrefillBackend, StructuredLLM
from nemori_cli.llm.prefix_states import Snapshot, prompt_key, shared_tokens


@dataclass(frozen=True)
class Prepared:
    """How the model came to hold the core: live (already), loaded (from its file), extended (an older core's
    state from its file, then only the tokens it lacked read), built (read now), none (no KV reuse here)."""

    outcome: str
    tokens: int = 0
    ms: float = 0.0
    saved_bytes: int = 0
    read: int = 0  # tokens read now (extended: only those the older core lacked)


class Prefix(Protocol):
    """What a saved state is kept for: a core (retrieval/core.py) or a prompt's fixed head."""

    @property
    def prefix(self) -> list[dict[str, str]]: ...

    @property
    def digest(self) -> str: ...

    @property
    def tokens(self) -> int: ...


@dataclass(frozen=True)
class Head:
    """The start every prompt of a road shares, kept between processes like a core, in a file of its own.

    Beyond the window before a build (the short road) no core is read, but the
    instructions are the same for every question: about 130 tokens, 0.6 s of a
    fresh process's reading with `small` on 2 cores.
    """

    messages: tuple[tuple[str, str], ...]  # (role, content), hashable
    slot: str = "head"  # names the file beside the core's
    tokens: int = field(default=0, compare=False)

    @classmethod
    def of(cls, messages: list[dict[str, str]], slot: str = "head") -> Head:
        return cls(tuple((m["role"], m["content"]) for m in messages), slot)

    @property
    def prefix(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]

    @property
    def digest(self) -> str:
        return hashlib.sha256(prompt_key(self.prefix).encode("utf-8")).hexdigest()


# The key under which an older core's state, loaded to be extended, is held: it names no prompt, so no
# question's prompt is ever matched against it; prefill keeps only the tokens it shares with the new core.
_OLDER = "\x00older-core"


def _name(text: str, n: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


class CoreCache:
    def __init__(self, directory: Path | None):
        self.directory = directory
        self.last: Prepared | None = None  # what the last prepare did (the CLI and the bench report it)

    def path(self, user: str, model_id: str, slot: str = "") -> Path | None:
        """The file of ``user``'s core for this model; with ``slot``, of that head (forget's prefix covers both)."""
        if self.directory is None:
            return None
        return self.directory / f"{_name(user, 16)}-{_name(model_id, 8)}{'-' + slot if slot else ''}.kv"

    @staticmethod
    def _slot(core: Prefix) -> str:
        return core.slot if isinstance(core, Head) else ""

    def to_read(self, llm: StructuredLLM, user: str, core: Prefix) -> int | None:
        """Tokens ``prepare`` would read now to hold this core: 0 when it is live or saved, the tokens a saved older
        core lacks when one is, every token of the core otherwise; None for an endpoint (its own prefix cache decides).

        Cheap: the core's tokens are counted, and a saved file's token ids read without its state.
        """
        backend = llm.backend
        if not (isinstance(backend, PrefillBackend) and backend.can_prefill()):
            return None
        if prompt_key(core.prefix) in backend.states.snapshots:
            return 0
        tokens = backend.prefix_tokens(core.prefix)
        path = self.path(user, backend.model_id, self._slot(core))
        saved = state_files.saved_tokens(path, backend.state_identity()) if path is not None and path.exists() else None
        if saved is None:
            return len(tokens)
        digest, held = saved
        return 0 if digest == core.digest else len(tokens) - shared_tokens(held, tokens)

    def prepare(self, llm: StructuredLLM, user: str, core: Prefix) -> Prepared:
        """Make ``llm`` hold the core's (or a head's) KV state: live, from its file, or read now and saved.

        ``last`` tells what was done for a core; a head leaves it as it was (`ask --json`'s "core" is the core's).
        """
        prepared = self._prepare(llm, user, core)
        if not isinstance(core, Head):
            self.last = prepared
        return prepared

    def _prepare(self, llm: StructuredLLM, user: str, core: Prefix) -> Prepared:
        backend = llm.backend
        if not (isinstance(backend, PrefillBackend) and backend.can_prefill()):
            return Prepared("none")  # an endpoint: the same prefix every time is what its own prefix cache reuses
        started = time.perf_counter()
        key = prompt_key(core.prefix)
        if key in backend.states.snapshots:
            backend.prefill(core.prefix)  # restores and pins it
            return Prepared("live", core.tokens, (time.perf_counter() - started) * 1000)
        path = self.path(user, backend.model_id, self._slot(core))
        identity = backend.state_identity()
        older = None
        if path is not None and path.exists():
            snapshot = state_files.load(path, key, identity, core.digest)
            if snapshot is not None:
                try:
                    backend.adopt_prefix(snapshot)
                    return Prepared("loaded", len(snapshot.tokens), (time.perf_counter() - started) * 1000)
                except Exception:  # llama.cpp refused the bytes: the file is no good, read the core again
                    path.unlink(missing_ok=True)
            else:
                older = self._adopt_older(backend, path, identity)
        read_before = backend.tokens_read
        try:
            snapshot = backend.prefill(core.prefix)  # reads only what the held state does not share with the core
        finally:
            backend.states.snapshots.pop(_OLDER, None)
        ms = (time.perf_counter() - started) * 1000
        read = backend.tokens_read - read_before
        saved = 0
        if snapshot is not None and path is not None:
            try:
                saved = state_files.save(path, snapshot, identity, core.digest)
            except OSError:
                saved = 0  # a folder that cannot be written: the next process reads the core again
        held = len(snapshot.tokens) if snapshot is not None else 0
        # "extended" when most of the old state served (a new core that shares only the system message is "built")
        return Prepared("extended" if older is not None and read * 2 < held else "built", held, ms, saved, read)

    @staticmethod
    def _adopt_older(backend: PrefillBackend, path: Path, identity: dict) -> Snapshot | None:
        """The state of the core saved before this one (same model and settings), made live so that a core that
        grew from it reads only its new turns; None when there is none, or llama.cpp refuses it."""
        older = state_files.load(path, _OLDER, identity, None)
        if older is None:
            return None
        try:
            backend.adopt_prefix(older)
        except Exception:
            return None
        return older

    def forget(self, user: str) -> int:
        """Remove every saved state of ``user`` (any model); returns how many files went."""
        if self.directory is None:
            return 0
        return state_files.remove(self.directory, f"{_name(user, 16)}-")  # the temporary files of killed saves too
