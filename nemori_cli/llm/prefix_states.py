"""KV-cache snapshots of earlier prompts, so a shared prefix is read once.

llama-cpp-python reuses the KV cache of the *previous* prompt only. The
pipeline alternates stages (partition, narration, prediction, distillation...)
and each call would otherwise throw away what the one before last had read:
a window of twenty messages read for partitioning is read again for every
episode's narration and distillation. On two cores that is most of the cost
(how fast the 0.5B model reads a prompt here: docs/PERFORMANCE.md, section 1).

So after every call we copy the sequence's KV state (a few MB; its size per
token and what copying costs: docs/PERFORMANCE.md, section 3) and, before the
next call, restore the snapshot whose prompt shares the longest prefix with
the new one when it shares more than what is live. llama-cpp-python then drops the non-shared tail and reads
only the rest. Each stage's prompt starts with that stage's own system
message (its SYSTEM in prompts/<stage>.py), so its fixed instructions are read
once per process; layouts that also shared the conversation between stages
read less but broke the 0.5B model (docs/PERFORMANCE.md, sections 3 and 4).

Snapshots are chosen by the characters of the chat messages: the chat
template wraps every prompt the same way, so a longer shared text is a longer
shared token prefix; llama-cpp-python compares the tokens exactly anyway.

Everything here is an optimisation: if this llama-cpp-python lacks an API it
uses, the cache turns itself off and calls behave exactly as before.
"""

from __future__ import annotations

import ctypes
import os
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

# Restoring costs a copy; only worth it for a real gain.
MIN_GAIN_CHARS = 64


def prompt_key(messages: list[dict[str, str]]) -> str:
    """The text a chat prompt is built from, in order; prefixes compare like the prompts'."""
    return "".join(f"\x1e{m.get('role', '')}\x1f{m.get('content', '')}" for m in messages)


def shared_chars(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def shared_tokens(a, b) -> int:
    """How many token ids two sequences share from their start (lists, or numpy arrays of ids)."""
    same = 0
    for x, y in zip(a, b):
        if x != y:
            break
        same += 1
    return same


@dataclass
class Snapshot:
    key: str
    tokens: np.ndarray  # the token ids the KV state holds
    state: bytes

    @property
    def size(self) -> int:
        return len(self.state) + self.tokens.nbytes


class PrefixStates:
    """Up to ``slots`` snapshots of sequence 0, least recently used evicted first."""

    def __init__(self, llama, *, slots: int = 8, max_bytes: int = 768 << 20):
        self.llama = llama
        self.slots = slots
        self.max_bytes = max_bytes
        self.snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        self.live_key = ""
        self.enabled = _supported(llama)
        self.restores = 0
        self.pinned: set[str] = set()  # kept whatever comes after them (a core context every question shares)

    # -- around one call ---------------------------------------------------
    def before(self, key: str) -> None:
        """Make the KV cache hold the snapshot sharing most with ``key``, if that beats what is live."""
        if not self.enabled or not self.snapshots:
            return
        live = shared_chars(self.live_key, key)
        best_key, best = None, live + MIN_GAIN_CHARS
        for k in self.snapshots:
            n = shared_chars(k, key)
            if n > best:
                best_key, best = k, n
        if best_key is None:
            return
        snapshot = self.snapshots[best_key]
        self.snapshots.move_to_end(best_key)
        try:
            self._restore(snapshot)
        except Exception:  # an API that behaves differently: stop using snapshots, start clean
            self.enabled = False
            self.live_key = ""
            self._reset()
            return
        self.live_key = best_key
        self.restores += 1

    def after(self, key: str) -> None:
        """Remember the state just computed for ``key``."""
        self.live_key = key
        if not self.enabled:
            return
        try:
            snapshot = self._capture(key)
        except Exception:
            self.enabled = False
            return
        for old in [k for k in self.snapshots if key.startswith(k) and k not in self.pinned]:
            del self.snapshots[old]  # a prefix of this one: this snapshot serves every prompt it would
        self.snapshots[key] = snapshot
        self.snapshots.move_to_end(key)
        self._evict()

    def _evict(self) -> None:
        while len(self.snapshots) > self.slots or (
            len(self.snapshots) > 1 and sum(s.size for s in self.snapshots.values()) > self.max_bytes
        ):
            oldest = next((k for k in self.snapshots if k not in self.pinned), None)
            if oldest is None:
                break
            del self.snapshots[oldest]

    # -- a prefix kept on purpose (llm/llamacpp.py's prefill) -----------------
    def pin(self, key: str) -> Snapshot | None:
        """Keep the snapshot of ``key`` until unpinned; only one is pinned at a time (the core of the user answered now)."""
        self.pinned = {key} if key in self.snapshots else set()
        return self.snapshots.get(key)

    def adopt(self, snapshot: Snapshot) -> None:
        """Make a snapshot read elsewhere (a file) the live state, and keep it pinned; raises if llama.cpp refuses it."""
        if not self.enabled:
            raise RuntimeError("KV snapshots are off in this process")
        try:
            self._restore(snapshot)
        except Exception:
            self.live_key = ""
            self._reset()
            raise
        self.live_key = snapshot.key
        self.snapshots[snapshot.key] = snapshot
        self.snapshots.move_to_end(snapshot.key)
        self.pinned = {snapshot.key}
        self._evict()

    def failed(self) -> None:
        """A call broke off: what the cache holds is unknown to us, so nothing counts as live."""
        self.live_key = ""

    # -- llama.cpp state copies --------------------------------------------
    def _capture(self, key: str) -> Snapshot:
        import llama_cpp

        ctx = self.llama._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written == 0 or written > size:
            raise RuntimeError("llama_state_seq_get_data copied nothing")
        n = int(self.llama.n_tokens)
        return Snapshot(key, np.array(self.llama.input_ids[:n], dtype=np.intc), bytes(buffer)[:written])

    def _restore(self, snapshot: Snapshot) -> None:
        import llama_cpp

        llama = self.llama
        ctx = llama._ctx.ctx
        llama._ctx.kv_cache_seq_rm(0, -1, -1)
        data = (ctypes.c_uint8 * len(snapshot.state)).from_buffer_copy(snapshot.state)
        if llama_cpp.llama_state_seq_set_data(ctx, data, len(snapshot.state), 0) == 0:
            raise RuntimeError("llama_state_seq_set_data restored nothing")
        n = len(snapshot.tokens)
        llama.input_ids[:n] = snapshot.tokens
        llama.n_tokens = n
        # The logits on hand belong to another prompt: make generate() decode
        # at least one token of the new prompt before it samples.
        llama._requires_eval = True

    def _reset(self) -> None:
        try:
            self.llama.reset()
            self.llama._ctx.kv_cache_clear()
        except Exception:
            pass


def _supported(llama) -> bool:
    try:
        import llama_cpp

        return all(
            hasattr(llama_cpp, name) for name in ("llama_state_seq_get_size", "llama_state_seq_get_data", "llama_state_seq_set_data")
        ) and all(hasattr(llama, attr) for attr in ("_ctx", "input_ids", "n_tokens"))
    except ImportError:
        return False
