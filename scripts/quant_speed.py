"""Prompt and generation speed of GGUF files on this machine, for the fresh-`ask` bar (docs/BEYOND.md, seventh round).

    python scripts/quant_speed.py MODEL.gguf [MODEL.gguf ...]

Each file reads the same 500 tokens (the README's text) three times and writes 16 tokens one at a time; the best
of three is printed. Nothing else should run on the cores. A requantized copy of `small` for comparison:

    python -c "import llama_cpp as l; p = l.llama_model_quantize_default_params(); p.ftype = l.LLAMA_FTYPE_MOSTLY_Q4_0; \
        p.allow_requantize = True; l.llama_model_quantize(b'SMALL.gguf', b'/tmp/small-q4_0.gguf', p)"
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import llama_cpp

TOKENS = 500
WRITTEN = 16


def main() -> int:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()[:6000]
    for path in sys.argv[1:]:
        llm = llama_cpp.Llama(model_path=path, n_ctx=2048, n_threads=2, n_batch=512, verbose=False)
        tokens = llm.tokenize(text.encode())[:TOKENS]
        tries = []
        for _ in range(3):
            llm.reset()
            began = time.perf_counter()
            llm.eval(tokens)
            read = time.perf_counter() - began
            began = time.perf_counter()
            for token in tokens[:WRITTEN]:
                llm.eval([token])
            tries.append((read, time.perf_counter() - began))
        read = min(t[0] for t in tries)
        written = min(t[1] for t in tries)
        print(
            f"{Path(path).name}: prompt {len(tokens) / read:.0f} tok/s ({read:.2f} s for {len(tokens)}), generation {WRITTEN / written:.1f} tok/s"
        )
        del llm
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
