"""Greedy, grammar-constrained decoding that checks guessed tokens in bulk (prompt lookup).

Narratives and facts mostly copy names, dates and phrases from the messages
they were given. When the last few tokens written also occur in the prompt (or
earlier in the answer), the tokens that followed them there are a cheap guess
at what comes next. One llama_decode of the current token plus the guess
computes the model's own logits at every guessed position; each position is
then chosen exactly as one-at-a-time greedy decoding would choose it (the
grammar shortlisted on the raw logits, the repeat penalty, argmax), and the
guess is kept up to the first token the model would not have written. That
token is the model's choice, so it is kept too, and the rest of the guess is
dropped from the KV cache. At temperature 0 the text is therefore the one
token-by-token decoding writes, up to the rounding of a multi-token decode;
only the number of llama_decode calls changes.

It runs on the `Llama` object's own context (sequence 0) and keeps its
bookkeeping (``input_ids``, ``n_tokens``) true, so llama-cpp-python's prefix
reuse and our KV snapshots (llm/prefix_states.py) work across both paths.

Written here rather than taken from llama-cpp-python: its LlamaPromptLookupDecoding
draft model forces ``logits_all`` on, which computes and copies the
151k-wide output layer for every prompt token (prompt reading is most of an
ingest's time here), and it applies logits processors to the draft's
positions in a way that does not keep a grammar's state. The guessing idea is
the prompt-lookup decoding of Saxena (2023), as llama.cpp's n-gram drafts use it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from nemori_cli.llm.fast_grammar import ShortlistGrammar, greedy_choice, read_logits

CHUNK = 512  # tokens per llama_decode while reading a prompt (the Llama context's n_batch)
PENALTY_WINDOW = 64  # llama-cpp-python's default last_n_tokens_size


def propose(history: np.ndarray, k: int, *, ngram_max: int = 3, ngram_min: int = 2) -> np.ndarray:
    """Up to ``k`` tokens that followed the latest earlier occurrence of the history's last n tokens.

    The longest n from ``ngram_max`` down to ``ngram_min`` that occurs earlier
    wins; a longer match is a surer guess. Returns an empty array when none does.
    """
    length = len(history)
    if k <= 0:
        return history[:0]
    for n in range(min(ngram_max, length - 1), ngram_min - 1, -1):
        tail = history[length - n :]
        hits = history[: length - n] == tail[0]  # candidate starts 0 .. length-n-1 (the tail itself excluded)
        for j in range(1, n):
            hits &= history[j : length - n + j] == tail[j]
        found = np.flatnonzero(hits)
        if len(found):
            start = int(found[-1]) + n
            return history[start : start + k]
    return history[:0]


@dataclass
class LookupStats:
    """What guessing saved: cumulative over a backend's life (the bench reads it)."""

    written: int = 0  # tokens kept
    decodes: int = 0  # llama_decode calls while writing
    drafted: int = 0  # guessed tokens checked
    accepted: int = 0  # of them, those the model would have written anyway

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


@dataclass(frozen=True)
class Written:
    tokens: list[int]
    prompt_tokens: int
    finished: bool  # ended on an end-of-generation token (False: cut at max_tokens)


class LookupDecoder:
    """Prompt-lookup greedy decoding on a loaded ``llama_cpp.Llama``'s own context."""

    def __init__(self, llama, *, draft_max: int = 8, ngram_max: int = 3, ngram_min: int = 2, repeat_penalty: float = 1.1):
        import llama_cpp

        self._lib, self._llama = llama_cpp, llama
        self.draft_max, self.ngram_max, self.ngram_min = draft_max, ngram_max, ngram_min
        self.repeat_penalty = repeat_penalty
        self.penalty_window = getattr(llama, "last_n_tokens_size", PENALTY_WINDOW)
        self._vocab = llama_cpp.llama_model_get_vocab(llama._model.model)
        self._n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._batch = llama_cpp.llama_batch_init(max(CHUNK, draft_max + 1), 0, 1)
        self.stats = LookupStats()

    def close(self) -> None:
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None

    def __del__(self):  # pragma: no cover - interpreter shutdown order varies
        with contextlib.suppress(Exception):
            self.close()

    # -- the context ----------------------------------------------------------

    def _decode(self, tokens: list[int] | np.ndarray, start: int, logits_from: int) -> None:
        """Decode ``tokens`` at positions ``start``...; logits wanted for batch indexes >= ``logits_from``."""
        b = self._batch
        for i, token in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = int(token), start + i, 1, i >= logits_from
            b.seq_id[i][0] = 0
        b.n_tokens = len(tokens)
        status = self._lib.llama_decode(self._llama._ctx.ctx, b)
        if status != 0:
            raise ValueError(f"llama_decode failed with status {status}")
        llama = self._llama
        llama.input_ids[start : start + len(tokens)] = tokens
        llama.n_tokens = start + len(tokens)

    def _logits(self, index: int) -> np.ndarray:
        return read_logits(self._lib, self._llama._ctx.ctx, index, self._n_vocab)

    def _truncate(self, keep: int) -> None:
        """Forget every KV cell from position ``keep`` on (a rejected guess, a prompt that differs)."""
        self._llama._ctx.kv_cache_seq_rm(0, keep, -1)
        self._llama.n_tokens = keep

    def _read(self, prompt: list[int]) -> np.ndarray:
        """Make the context hold ``prompt``, reading only what it does not share with what is live; the next-token logits."""
        llama = self._llama
        live = int(llama.n_tokens)
        held = np.asarray(llama.input_ids[:live])
        n = min(live, len(prompt) - 1)  # the last prompt token is always read: its logits are needed
        mismatch = np.flatnonzero(held[:n] != np.asarray(prompt[:n], dtype=held.dtype))
        keep = int(mismatch[0]) if len(mismatch) else n
        self._truncate(keep)
        rest = prompt[keep:]
        chunk: list[int] = []
        for at in range(0, len(rest), CHUNK):
            chunk = rest[at : at + CHUNK]
            last = at + len(chunk) == len(rest)
            self._decode(chunk, keep + at, len(chunk) - 1 if last else len(chunk))
        if hasattr(llama, "_requires_eval"):
            llama._requires_eval = True  # llama-cpp-python's own scores buffer does not hold these logits
        return self._logits(len(chunk) - 1)

    # -- generation -------------------------------------------------------------

    def generate(self, prompt: list[int], grammar_text: str, max_tokens: int) -> Written:
        """Greedy, grammar-constrained tokens for ``prompt``, guesses checked in bulk."""
        n_ctx = int(self._llama.n_ctx())
        if len(prompt) >= n_ctx:  # llama-cpp-python's own check, in its words
            raise ValueError(f"Requested tokens ({len(prompt)}) exceed context window of {n_ctx}")
        max_tokens = min(max_tokens, n_ctx - len(prompt))  # as create_completion clamps it
        grammar = ShortlistGrammar(self._llama, grammar_text)
        try:
            return self._generate(prompt, grammar, max_tokens)
        except BaseException:
            self._llama.n_tokens = 0  # what the cache holds is unknown now: read everything next time
            self._llama._ctx.kv_cache_clear()
            raise
        finally:
            grammar.close()

    def _generate(self, prompt: list[int], grammar: ShortlistGrammar, max_tokens: int) -> Written:
        # The context always holds the prompt and every kept token but the last one chosen:
        # that one is decoded next, together with the guess that follows it.
        history = np.empty(len(prompt) + max_tokens + 1, dtype=np.intc)
        history[: len(prompt)] = prompt
        size = len(prompt)
        written: list[int] = []
        decodes = 0

        def choose(logits: np.ndarray) -> int:
            return greedy_choice(grammar, history[:size], logits, written, self.repeat_penalty, self.penalty_window)

        def keep(chosen: int) -> None:
            nonlocal size
            written.append(chosen)
            history[size] = chosen
            size += 1

        token = choose(self._read(prompt))
        finished = False
        while True:
            if self._lib.llama_vocab_is_eog(self._vocab, token):
                finished = True
                break
            keep(token)
            if len(written) >= max_tokens:
                break
            guess = propose(
                history[:size], min(self.draft_max, max_tokens - len(written)), ngram_max=self.ngram_max, ngram_min=self.ngram_min
            )
            self._decode([token, *guess], size - 1, 0)
            decodes += 1
            self.stats.drafted += len(guess)
            token = -1
            for j, guessed in enumerate(guess):
                chosen = choose(self._logits(j))
                if chosen != guessed or self._lib.llama_vocab_is_eog(self._vocab, chosen):
                    token = chosen  # the model's own choice at the first wrong guess
                    break
                keep(chosen)
                self.stats.accepted += 1
                if len(written) >= max_tokens:
                    break
            if self._llama.n_tokens > size:
                self._truncate(size)  # the wrong part of the guess leaves the cache
            if len(written) >= max_tokens:
                break
            if token == -1:  # the whole guess was right: the next choice comes from its last position
                token = choose(self._logits(len(guess)))
        self.stats.written += len(written)
        self.stats.decodes += decodes
        return Written(written, len(prompt), finished)
