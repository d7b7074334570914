"""Raw llama.cpp speed on this machine: prompt and generation tokens per second.

Every ingest figure is a multiple of these two numbers, so they are measured
first (docs/PERFORMANCE.md). Usage:

    .venv/bin/python scripts/bench_llama_speed.py MODEL.gguf [--prompt 600] [--generate 40]

Each configuration loads the model afresh, reads a prompt of --prompt tokens
in one batch, then decodes --generate tokens one at a time (no sampling, so
only llama.cpp is timed).
"""

from __future__ import annotations

import argparse
import time

CONFIGS = {
    "2 threads (nemori's default here)": {},
    "1 thread": {"n_threads": 1},
    "2 threads, flash attention": {"flash_attn": True},
    "2 threads, n_batch 128": {"n_batch": 128, "n_ubatch": 128},
}


def measure(path: str, extra: dict, prompt: int, generate: int) -> tuple[float, float]:
    from llama_cpp import Llama

    args = {"model_path": path, "n_ctx": 4096, "n_threads": 2, "n_batch": 512, "verbose": False, "seed": 1, **extra}
    llm = Llama(**args)
    text = "Caroline said she went to the LGBTQ support group yesterday and it was powerful. " * 80
    tokens = llm.tokenize(text.encode())[:prompt]
    started = time.perf_counter()
    llm.eval(tokens)
    pp = len(tokens) / (time.perf_counter() - started)
    started = time.perf_counter()
    for token in tokens[:generate]:
        llm.eval([token])
    tg = generate / (time.perf_counter() - started)
    return pp, tg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--prompt", type=int, default=600)
    parser.add_argument("--generate", type=int, default=40)
    args = parser.parse_args()
    print("| configuration | prompt tok/s | generation tok/s |\n|---|---|---|")
    for name, extra in CONFIGS.items():
        pp, tg = measure(args.model, extra, args.prompt, args.generate)
        print(f"| {name} | {pp:.1f} | {tg:.1f} |", flush=True)


if __name__ == "__main__":
    main()
