"""Grammar-constrained greedy decoding without checking the whole vocabulary.

llama-cpp-python applies a grammar to every token of the vocabulary at every
step (151k tokens for Qwen): measured here, that made the 0.5B model generate
several times slower (docs/PERFORMANCE.md, section 3, has the figure). llama.cpp's
own tools avoid it by checking the best candidates first; we do the same as a
logits processor: the grammar is applied to the top ``shortlist`` tokens, and
only when none of them is allowed to the whole vocabulary. The result is the
same set of admissible tokens the full check would allow among those
candidates, so the output still always parses under the grammar.

The grammar is parsed by llama.cpp itself, which returns NULL for a grammar it
cannot parse; that is raised here as ValueError (llama-cpp-python's own path
crashed the process instead).
"""

from __future__ import annotations

import contextlib
import ctypes

import numpy as np


class ShortlistGrammar:
    """A logits processor enforcing a GBNF grammar, cheap on the common path."""

    def __init__(self, llama, grammar_text: str, *, shortlist: int = 40):
        import llama_cpp

        self._lib = llama_cpp
        vocab = llama_cpp.llama_model_get_vocab(llama._model.model)
        self._sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar_text.encode("utf-8"), b"root")
        if not self._sampler:
            raise ValueError("llama.cpp could not parse the grammar for this schema")
        self._shortlist = shortlist
        self._seen: int | None = None  # how many input ids the grammar has accounted for
        self._full: tuple | None = None  # reusable full-vocabulary buffer, made on first need

    def reset(self) -> None:
        self._lib.llama_sampler_reset(self._sampler)
        self._seen = None

    def close(self) -> None:
        if self._sampler:
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = None

    def __del__(self):  # pragma: no cover - interpreter shutdown order varies
        with contextlib.suppress(Exception):
            self.close()

    def _apply(self, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        """Allowed mask for ``ids`` under the grammar's current state."""
        n = len(ids)
        data = (self._lib.llama_token_data * n)()
        view = np.ctypeslib.as_array(data).view(np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True))
        view["id"] = ids
        view["logit"] = logits
        view["p"] = 0.0
        array = self._lib.llama_token_data_array(data=data, size=n, selected=-1, sorted=False)
        self._lib.llama_sampler_apply(self._sampler, ctypes.byref(array))
        return np.isfinite(view["logit"])

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        # The processor sees the whole sequence; feed the grammar what was
        # generated since the last call (the prompt itself is not grammar text).
        if self._seen is None:
            self._seen = len(input_ids)
        for token in input_ids[self._seen :]:
            self._lib.llama_sampler_accept(self._sampler, int(token))
        self._seen = len(input_ids)

        k = min(self._shortlist, len(scores))
        top: np.ndarray = np.argpartition(-scores, k - 1)[:k]  # ids: the shortlist, or every token below
        allowed = self._apply(top.astype(np.intc), scores[top])
        if not allowed.any():
            every = np.arange(len(scores), dtype=np.intc)
            allowed_all = self._apply(every, scores)
            top, allowed = every, allowed_all
        masked = np.full_like(scores, -np.inf)
        keep = top[allowed]
        masked[keep] = scores[keep]
        return masked


def greedy_choice(
    grammar: ShortlistGrammar, seen: np.ndarray, logits: np.ndarray, written: list[int], repeat_penalty: float, window: int
) -> int:
    """The token llama-cpp-python's greedy path picks: its sampler chain, in its order.

    The chain is: the logits processor (the grammar, shortlisted on the raw
    logits), then the repeat penalty, then greedy. Its penalty sampler
    remembers only the tokens it sampled (llama_sampler_sample accepts each
    one), not the prompt: so the penalty looks back over what was written.
    ``seen`` is the prompt and what was written, as the processor is given it.
    """
    masked = grammar(np.asarray(seen, dtype=np.intc), logits)
    if repeat_penalty != 1.0 and written:
        recent = np.unique(np.asarray(written[-window:], dtype=np.intc))
        values = masked[recent]
        masked[recent] = np.where(values > 0, values / repeat_penalty, values * repeat_penalty)
    return int(np.argmax(masked))


def read_logits(lib, ctx, index: int, n_vocab: int) -> np.ndarray:
    """A copy of the logits llama.cpp computed for batch position ``index`` (the next decode overwrites its buffer)."""
    pointer = lib.llama_get_logits_ith(ctx, index)
    return np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(n_vocab,)).copy()
