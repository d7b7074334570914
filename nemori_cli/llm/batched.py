"""Several grammar-constrained generations decoded together in one llama.cpp context.

On a CPU, writing a token is bound by memory bandwidth: every step reads all
the weights once, whatever the number of rows it multiplies them with. So one
`llama_decode` that advances 4 sequences by a token each costs far less than
4 decodes of one. llama-cpp-python's `Llama` decodes one sequence at a time
(its context has one sequence slot), and its server does too, so this module
drives llama.cpp's batch API itself: one context with a slot per sequence,
on the model the `Llama` object already loaded (no second copy of the
weights).

Each sequence keeps its own grammar (llm/fast_grammar.ShortlistGrammar, the
same constraint as the one-at-a-time path) and is decoded greedily with
llama-cpp-python's default repeat penalty, so at temperature 0 it writes what
the one-at-a-time path writes, up to the rounding of batched arithmetic.
A prefix every prompt shares (the system message) is read once, on the first
sequence, and copied to the others in the KV cache.

Written here rather than taken from a library because nothing on PyPI wraps
llama.cpp's multi-sequence decoding with grammars for Python; the calls are
llama.cpp's own (llama_batch, llama_decode, llama_memory_seq_cp).
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from dataclasses import dataclass

import numpy as np

from nemori_cli.errors import ModelError
from nemori_cli.llm.fast_grammar import ShortlistGrammar, greedy_choice, read_logits

PREFILL_CHUNK = 512  # tokens per llama_decode while reading prompts (the context's n_batch)
PENALTY_WINDOW = 64  # llama-cpp-python's default last_n_tokens_size: how far the repeat penalty looks back


@dataclass(frozen=True)
class Request:
    prompt: list[int]  # the prompt's tokens, chat template applied
    grammar: str  # GBNF text
    max_tokens: int


@dataclass(frozen=True)
class Timing:
    """Where the last `generate` spent its time: reading the prompts, then writing."""

    prefill_s: float
    prefill_tokens: int  # prompt tokens actually decoded (a shared prefix counts once)
    decode_s: float
    steps: int  # llama_decode calls while writing


@dataclass(frozen=True)
class Generated:
    tokens: list[int]
    prompt_tokens: int
    finished: bool  # ended on an end-of-generation token (False: cut at max_tokens)


class BatchedDecoder:
    """Up to ``sequences`` generations at once over a loaded ``llama_cpp.Llama``."""

    def __init__(
        self, llama, *, sequences: int, n_ctx_per_sequence: int, n_threads: int, repeat_penalty: float = 1.1, unified: bool = False
    ):
        import llama_cpp

        self._lib, self._llama = llama_cpp, llama
        self.sequences, self.n_ctx_per_sequence = sequences, n_ctx_per_sequence
        self.repeat_penalty = repeat_penalty
        self.penalty_window = getattr(llama, "last_n_tokens_size", PENALTY_WINDOW)
        # The loaded Llama's own context settings (flash attention as its preset says, the KV types...), so the
        # arithmetic is the one-at-a-time path's; llama.cpp's defaults differ (flash attention "auto"
        # where it can), which moved logits by up to 0.55 and changed answers.
        params = llama_cpp.llama_context_params()
        ctypes.pointer(params)[0] = llama.context_params
        params.n_ctx = sequences * n_ctx_per_sequence
        params.n_batch = params.n_ubatch = PREFILL_CHUNK
        params.n_seq_max = sequences
        params.n_threads = params.n_threads_batch = n_threads
        # A KV stream per sequence (unified=False): each token attends over its own sequence's
        # cells only. One unified pool would let a long prompt use what short ones leave, but
        # every token's attention then runs over all sequences' cells, masked.
        params.kv_unified = unified
        params.no_perf = True
        self._ctx = llama_cpp.llama_init_from_model(llama._model.model, params)
        if not self._ctx:
            raise ModelError(f"llama.cpp could not make a context for {sequences} sequences of {n_ctx_per_sequence} tokens (memory?)")
        self._vocab = llama_cpp.llama_model_get_vocab(llama._model.model)
        self._n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._batch = llama_cpp.llama_batch_init(max(PREFILL_CHUNK, sequences), 0, 1)
        self.timing = Timing(0.0, 0, 0.0, 0)
        self._prefilled = 0

    def close(self) -> None:
        if self._ctx:
            self._lib.llama_batch_free(self._batch)
            self._lib.llama_free(self._ctx)
            self._ctx = None

    def __del__(self):  # pragma: no cover - interpreter shutdown order varies
        with contextlib.suppress(Exception):
            self.close()

    # -- the batch ----------------------------------------------------------

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        """One llama_decode of (token, position, sequence, wants logits) items."""
        b = self._batch
        for i, (token, pos, seq, logits) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, logits
            b.seq_id[i][0] = seq
        b.n_tokens = len(items)
        status = self._lib.llama_decode(self._ctx, b)
        if status != 0:
            raise ModelError(
                f"llama_decode failed with status {status} (the context of {self.sequences * self.n_ctx_per_sequence} tokens is full?)"
            )

    def _logits(self, index: int) -> np.ndarray:
        return read_logits(self._lib, self._ctx, index, self._n_vocab)

    def _prefill(self, prompts: list[list[int]]) -> list[np.ndarray]:
        """Read every prompt; returns each one's next-token logits. A prefix all share is read once and copied."""
        memory = self._lib.llama_get_memory(self._ctx)
        self._lib.llama_memory_clear(memory, False)  # the cells' metadata: their data is overwritten as they are reused
        shared = _common_prefix(prompts) if len(prompts) > 1 else 0
        shared = min(shared, min(len(p) for p in prompts) - 1)  # each sequence reads at least its last token itself
        pending: list[tuple[int, int, int, bool]] = [(t, pos, 0, False) for pos, t in enumerate(prompts[0][:shared])]
        self._prefilled = shared + sum(len(p) - shared for p in prompts)
        for chunk in _chunks(pending, PREFILL_CHUNK):
            self._decode(chunk)
        for seq in range(1, len(prompts)):
            if shared:
                self._lib.llama_memory_seq_cp(memory, 0, seq, -1, -1)
        rest = [(t, pos, seq, pos == len(p) - 1) for seq, p in enumerate(prompts) for pos, t in enumerate(p) if pos >= shared]
        logits: list[np.ndarray | None] = [None] * len(prompts)
        for chunk in _chunks(rest, PREFILL_CHUNK):
            self._decode(chunk)
            for i, (_t, _pos, seq, wanted) in enumerate(chunk):
                if wanted:
                    logits[seq] = self._logits(i)
        return logits  # type: ignore[return-value]

    # -- generation ---------------------------------------------------------

    def generate(self, requests: list[Request]) -> list[Generated]:
        """Greedy, grammar-constrained generation of every request, decoded together."""
        if not requests:
            return []
        if len(requests) > self.sequences:
            raise ValueError(f"{len(requests)} requests for a decoder of {self.sequences} sequences")
        for r in requests:
            if len(r.prompt) + r.max_tokens > self.n_ctx_per_sequence:
                raise ValueError(f"Requested tokens ({len(r.prompt) + r.max_tokens}) exceed context window of {self.n_ctx_per_sequence}")
        grammars: list[ShortlistGrammar] = []
        try:
            grammars += [ShortlistGrammar(self._llama, r.grammar) for r in requests]
            began = time.perf_counter()
            logits = self._prefill([r.prompt for r in requests])
            read = time.perf_counter()
            steps = 0
            seen = [list(r.prompt) for r in requests]
            out: list[list[int]] = [[] for _ in requests]
            finished = [False] * len(requests)
            active = list(range(len(requests)))
            while active:
                step: list[tuple[int, int, int, bool]] = []
                for seq in active:
                    token = self._choose(logits[seq], out[seq], seen[seq], grammars[seq])
                    if self._lib.llama_vocab_is_eog(self._vocab, token):
                        finished[seq] = True
                        continue
                    out[seq].append(token)
                    seen[seq].append(token)
                    if len(out[seq]) >= requests[seq].max_tokens:
                        continue
                    step.append((token, len(seen[seq]) - 1, seq, True))
                active = [seq for _t, _pos, seq, _l in step]
                if step:
                    steps += 1
                    self._decode(step)
                    for i, seq in enumerate(active):
                        logits[seq] = self._logits(i)
            self.timing = Timing(read - began, self._prefilled, time.perf_counter() - read, steps)
            return [Generated(out[i], len(r.prompt), finished[i]) for i, r in enumerate(requests)]
        finally:
            for g in grammars:
                g.close()

    def _choose(self, logits: np.ndarray, written: list[int], seen: list[int], grammar: ShortlistGrammar) -> int:
        return greedy_choice(grammar, np.asarray(seen, dtype=np.intc), logits, written, self.repeat_penalty, self.penalty_window)


def _common_prefix(prompts: list[list[int]]) -> int:
    first = prompts[0]
    n = min(len(p) for p in prompts)
    for i in range(n):
        t = first[i]
        if any(p[i] != t for p in prompts[1:]):
            return i
    return n


def _chunks(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]
