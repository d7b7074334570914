"""llama.cpp in-process through llama-cpp-python, with JSON-schema grammars.

llama-cpp-python reuses the KV cache of the previous prompt's longest common
prefix; PrefixStates extends that to the last few prompts, so the shared
system message and a window's conversation are read once (see
llm/prefix_states.py). NEMORI_PREFIX_CACHE=0 turns the snapshots off, for
measuring what they save (read by config.py, passed in as prefix_cache). One
Llama object per process.

With ``lookup`` set (NEMORI_LOOKUP=N, read by config.py), greedy calls
(temperature 0, nearly all of them) are decoded by our own loop
(llm/lookup_decoding.py), which checks up to N tokens guessed from the prompt
at a time (prompt lookup; 0: none, the same text as llama-cpp-python's loop).
By default (None) every call goes through llama-cpp-python's loop: on 2 cores
the guesses barely paid (docs/PERFORMANCE.md section 9).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from nemori_cli.errors import LLMOutputError, ModelError
from nemori_cli.llm.base import ChatMessages, ChatRequest, RawCompletion
from nemori_cli.llm.prefix_states import PrefixStates, Snapshot, prompt_key, shared_tokens
from nemori_cli.presets import DEFAULT_N_CTX

if TYPE_CHECKING:  # imported when first needed
    from nemori_cli.llm.batched import BatchedDecoder
    from nemori_cli.llm.lookup_decoding import LookupDecoder


def default_threads() -> int:
    # llama.cpp threads spin-wait: more of them than the cores this process may run on slow each other badly;
    # use exactly those cores.
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return max(1, os.cpu_count() or 1)


class LlamaCppBackend:
    def __init__(
        self,
        path: Path,
        *,
        name: str,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        seed: int = 42,
        prefix_cache: bool = True,
        parallel: int = 1,
        lookup: int | None = None,
        flash_attn: bool = False,
    ):
        try:
            from llama_cpp import Llama
        except ImportError as e:  # pragma: no cover - install problem
            raise ModelError(f"llama-cpp-python is not installed ({e}); run `make install`") from None
        self.model_id = name
        self.path = path
        self.n_ctx = n_ctx
        self.tokens_read = 0  # prompt tokens evaluated, not taken from a cached prefix (the bench reports it per answer)
        self.parallel = max(1, parallel)  # sequences chat_many decodes together (llm/batched.py)
        self._threads = n_threads or default_threads()
        self._batched: BatchedDecoder | None = None  # made on the first chat_many that needs it
        self._lookup: LookupDecoder | None = None  # made on the first greedy call
        self.lookup = lookup  # guessed tokens checked per step; None: llama-cpp-python's loop
        self._formatter = None
        self.flash_attn = flash_attn
        self._grammars: dict[str, str] = {}
        try:
            self.llama = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=self._threads,
                n_batch=512,
                seed=seed,
                verbose=False,
                flash_attn=flash_attn,
            )
        except MemoryError:
            # Python's own allocation failed (llama.cpp's failures arrive as the ValueError below).
            size = path.stat().st_size / 2**20 if path.exists() else 0
            raise ModelError(
                f"model {name}: not enough memory to load {path} ({size:,.0f} MB, with a {n_ctx}-token context);"
                " free memory, or choose a smaller model (`nemori models`)"
            ) from None
        except (ValueError, RuntimeError) as e:
            raise ModelError(
                f"model {name}: llama.cpp cannot load {path} ({e}); if memory is short, choose a smaller model (`nemori models`)"
            ) from None
        self.states = PrefixStates(self.llama)
        self.states.enabled &= prefix_cache

    def _grammar(self, schema: dict) -> str:
        """GBNF text for a schema, converted once per process per schema."""
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        key = json.dumps(schema)  # key order kept: the grammar emits properties in this order
        if key not in self._grammars:
            self._grammars[key] = json_schema_to_gbnf(key)
        return self._grammars[key]

    def count_tokens(self, text: str) -> int:
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False))

    def chat(self, messages: ChatMessages, *, schema: dict, max_tokens: int, temperature: float) -> RawCompletion:
        key = prompt_key(messages)
        self.states.before(key)
        self._count_read(messages)
        try:
            if temperature == 0 and self.lookup is not None and self._can_batch():
                out = self._chat_lookup(messages, schema, max_tokens, self.lookup)
            else:
                out = self._chat_llama(messages, schema, max_tokens, temperature)
        except ValueError as e:
            # llama.cpp raises ValueError when the prompt exceeds the context.
            self.states.failed()
            raise ModelError(f"model {self.model_id}: {e}") from None
        except BaseException:  # Ctrl-C mid-decode included
            self.states.failed()
            raise
        self.states.after(key)
        return out

    def _count_read(self, messages: ChatMessages) -> None:
        """Add the tokens this prompt will evaluate: all but the prefix the KV cache already holds."""
        if not self._can_batch():
            return
        try:
            tokens = self._prompt(messages)
        except Exception:  # only a count: a template it cannot render here is rendered by the call itself
            return
        held = self.llama.input_ids[: self.llama.n_tokens]
        same = shared_tokens(held, tokens[:-1])  # llama-cpp-python evaluates at least the last token
        self.tokens_read += len(tokens) - same

    # -- a prefix read ahead of its questions (retrieval/core_cache.py) ------

    def state_identity(self) -> dict:
        """What a saved KV state depends on: a state saved under another identity is never loaded."""
        import llama_cpp

        try:
            size = self.path.stat().st_size
        except OSError:
            size = None
        return {
            "model": self.model_id,
            "file": self.path.name,
            "bytes": size,
            "n_ctx": self.n_ctx,
            "n_batch": self.llama.n_batch,
            "llama_cpp": getattr(llama_cpp, "__version__", "?"),
            # Flash attention lays the V cache out otherwise: a state saved with it on is never loaded with it off.
            "kv": "flash" if self.flash_attn else "default",
        }

    def can_prefill(self) -> bool:
        return self.states.enabled and self._can_batch()

    def prefill(self, messages: ChatMessages) -> Snapshot | None:
        """Make the KV cache hold these messages as far as the end of the last one's text (no reply begun), pinned.

        Returns the snapshot, or None where snapshots are off. What a snapshot
        held already shares (a grown chat's core begins like the last one) is
        not read again.
        """
        if not self.can_prefill():
            return None
        key = prompt_key(messages)
        if key in self.states.snapshots:
            self.states.before(key)
            return self.states.pin(key)
        tokens = self.prefix_tokens(messages)
        if len(tokens) >= self.n_ctx:
            raise ModelError(f"model {self.model_id}: the core context is {len(tokens)} tokens, more than its {self.n_ctx}-token window")
        self.states.before(key)
        same = shared_tokens(self.llama.input_ids[: self.llama.n_tokens], tokens)
        try:
            self.llama.n_tokens = same
            self.llama._ctx.kv_cache_seq_rm(0, same, -1)
            self.llama.eval(tokens[same:])
        except BaseException:
            self.states.failed()
            raise
        self.tokens_read += len(tokens) - same
        self.states.after(key)
        return self.states.pin(key)

    def adopt_prefix(self, snapshot: Snapshot) -> None:
        """Make a snapshot loaded from a file the live, pinned state (raises if llama.cpp refuses it)."""
        self.states.adopt(snapshot)

    def prefix_tokens(self, messages: ChatMessages) -> list[int]:
        """The tokens of the chat prompt up to the end of the last message's text, as the whole prompt begins."""
        mark = "\u2063nemori-prefix-end\u2063"
        marked = [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] + mark}]
        result = self._formatter_of()(messages=marked)
        text = result.prompt[: result.prompt.index(mark)]
        return self.llama.tokenize(text.encode("utf-8"), add_bos=not result.added_special, special=True)

    def _constraint(self, schema: dict):
        from nemori_cli.llm.fast_grammar import ShortlistGrammar

        try:
            return ShortlistGrammar(self.llama, self._grammar(schema))
        except ValueError as e:
            raise ModelError(f"model {self.model_id}: {e}") from None

    def _chat_llama(self, messages: ChatMessages, schema: dict, max_tokens: int, temperature: float) -> RawCompletion:
        """llama-cpp-python's own sampling loop: for a temperature above 0, or with lookup off."""
        from llama_cpp import LogitsProcessorList

        constraint = self._constraint(schema)
        try:
            with _interrupt_after_the_call():
                out = self.llama.create_chat_completion(
                    messages=messages,  # type: ignore[arg-type]  # role/content dicts; llama_cpp wants one TypedDict per role
                    logits_processor=LogitsProcessorList([constraint]),
                    max_tokens=max_tokens,
                    temperature=temperature,
                    repeat_penalty=1.1,
                )
        finally:
            constraint.close()
        if not isinstance(out, dict):  # stream=False: never an iterator of chunks
            raise ModelError(f"model {self.model_id}: llama-cpp-python streamed an answer that was asked for whole")
        usage = out.get("usage") or {}
        text = out["choices"][0]["message"].get("content") or ""
        return RawCompletion(text, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))

    def _chat_lookup(self, messages: ChatMessages, schema: dict, max_tokens: int, lookup: int) -> RawCompletion:
        """Greedy decoding in our own loop, ``lookup`` guesses from the prompt checked in bulk when it is above 0."""
        from nemori_cli.llm.lookup_decoding import LookupDecoder

        if self._lookup is None or self._lookup.draft_max != lookup:
            self._lookup = LookupDecoder(self.llama, draft_max=lookup)
        # No hold on Ctrl-C: this loop makes no Python callbacks from C, so an interrupt
        # between two decodes stops cleanly (the decoder forgets the cache it left half-written).
        # A grammar llama.cpp cannot parse is a ValueError here, a ModelError in chat(), as on the other path.
        out = self._lookup.generate(self._prompt(messages), self._grammar(schema), max_tokens)
        text = self.llama.detokenize(out.tokens).decode("utf-8", errors="ignore")
        return RawCompletion(text, out.prompt_tokens, len(out.tokens))

    # -- several at once (llm/batched.py) -----------------------------------

    def chat_many(self, requests: list[ChatRequest]) -> list[RawCompletion | LLMOutputError]:
        """Each request's completion, those at temperature 0 decoded together, ``parallel`` at a time.

        A request the batch cannot take (a temperature above 0, a model whose
        chat template llama-cpp-python does not take from the file) goes
        through `chat` on its own; so does everything when ``parallel`` is 1.
        A prompt too long for the context fails as it would on its own.
        """
        results: list[RawCompletion | LLMOutputError | None] = [None] * len(requests)
        together = (
            [i for i, r in enumerate(requests) if r.temperature == 0 and self._can_batch()]
            if self.parallel > 1 and len(requests) > 1
            else []
        )
        for i, r in enumerate(requests):
            if i not in together:
                results[i] = self._one(r)
        for start in range(0, len(together), self.parallel):
            chunk = together[start : start + self.parallel]
            if len(chunk) == 1:
                results[chunk[0]] = self._one(requests[chunk[0]])
                continue
            for i, done in zip(chunk, self._decode_together([requests[i] for i in chunk])):
                results[i] = done
        return results  # type: ignore[return-value]

    def _one(self, r: ChatRequest) -> RawCompletion | LLMOutputError:
        try:
            return self.chat(r.messages, schema=r.schema, max_tokens=r.max_tokens, temperature=r.temperature)
        except LLMOutputError as e:
            return e

    def _can_batch(self) -> bool:
        return self.llama.chat_format == "chat_template.default"

    def _prompt(self, messages: ChatMessages) -> list[int]:
        """The prompt's tokens exactly as create_chat_completion makes them (the file's own chat template)."""
        result = self._formatter_of()(messages=messages)
        return self.llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)

    def _formatter_of(self):
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            model = self.llama._model
            eos, bos = self.llama.token_eos(), self.llama.token_bos()
            self._formatter = Jinja2ChatFormatter(
                template=self.llama.metadata["tokenizer.chat_template"],
                eos_token=model.token_get_text(eos) if eos != -1 else "",
                bos_token=model.token_get_text(bos) if bos != -1 else "",
                stop_token_ids=[eos],
            )
        return self._formatter

    def _decode_together(self, requests: list[ChatRequest]) -> list[RawCompletion | LLMOutputError]:
        from nemori_cli.llm.batched import BatchedDecoder, Request

        if self._batched is None or self._batched.sequences < len(requests):  # made again when --parallel grew
            if self._batched is not None:
                self._batched.close()
            self._batched = BatchedDecoder(self.llama, sequences=self.parallel, n_ctx_per_sequence=self.n_ctx, n_threads=self._threads)
        out: list[RawCompletion | LLMOutputError | None] = [None] * len(requests)
        batch: list[tuple[int, Request]] = []
        for i, r in enumerate(requests):
            prompt = self._prompt(r.messages)
            if len(prompt) + r.max_tokens > self.n_ctx:
                out[i] = self._one(r)  # fails as a call on its own would, in the same words
            else:
                batch.append((i, Request(prompt, self._grammar(r.schema), r.max_tokens)))
        # No hold on Ctrl-C here: the batched path makes no Python callbacks from C, so an
        # interrupt between two decodes stops cleanly (the grammars are freed, the batch discarded).
        try:
            generated = self._batched.generate([req for _i, req in batch])
        except ValueError as e:
            raise ModelError(f"model {self.model_id}: {e}") from None
        for (i, _req), g in zip(batch, generated):
            text = self.llama.detokenize(g.tokens).decode("utf-8", errors="ignore")
            out[i] = RawCompletion(text, g.prompt_tokens, len(g.tokens))
        return out  # type: ignore[return-value]


@contextmanager
def _interrupt_after_the_call() -> Iterator[None]:
    """Hold Ctrl-C until llama.cpp returns, then raise it.

    A KeyboardInterrupt raised inside llama-cpp-python's sampler callback is
    swallowed by ctypes and leaves the grammar half-advanced; llama.cpp then
    throws a C++ exception and the process aborts (seen: "Unexpected empty
    grammar stack", exit -6) instead of stopping cleanly with its work kept.
    A call takes seconds, so waiting for it costs little.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
