"""How long `small` takes to read new tokens after a cached prefix, with and without flash attention.

The answer roads read a few hundred new tokens after a cached core of
1,000-6,000 tokens; the bench shows the cost per new token growing with the
prefix (about 6 ms a token after nothing, 15 ms after 6,000). This script
separates that from everything else: the same tokens, read by the same model
file, in one process, for each prefix length and each attention setting.

    .venv/bin/python scripts/attn_speed.py [--model PATH] [--repeats 3]

Prints one line per (setting, prefix, new) with the median seconds, and the
ratio of flash attention's time to the default's measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

CASES = [(0, 780), (1150, 940), (6000, 380), (6000, 940)]  # (cached prefix, new tokens): rag-256, lean, core, wide


def _text(tokens_wanted: int) -> str:
    data = json.loads(Path("../shared/data/locomo/locomo-dev.json").read_text())
    lines = []
    for sample in data:
        conv = sample["conversation"]
        for key in sorted(k for k in conv if k.startswith("session_") and not k.endswith("date_time")):
            for turn in conv[key]:
                lines.append(f"{turn['speaker']}: {turn['text']}")
    return "\n".join(lines)


def measure(path: Path, flash: bool, repeats: int, threads: int) -> dict:
    from llama_cpp import Llama

    llama = Llama(model_path=str(path), n_ctx=8192, n_threads=threads, n_batch=512, seed=42, verbose=False, flash_attn=flash)
    tokens = llama.tokenize(_text(9000).encode(), add_bos=False)
    out = {}
    for prefix, new in CASES:
        times = []
        for _ in range(repeats):
            llama.reset()
            if prefix:
                llama.eval(tokens[:prefix])
            began = time.perf_counter()
            llama.eval(tokens[prefix : prefix + new])
            times.append(time.perf_counter() - began)
        # Twelve greedy tokens after it: the answer's own cost.
        began = time.perf_counter()
        for _ in range(12):
            token = llama.sample(temp=0)
            llama.eval([token])
        gen = time.perf_counter() - began
        out[f"{prefix}+{new}"] = (statistics.median(times), gen)
    del llama
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, default=next((Path.home() / ".cache/nemori/models").glob("small-*.gguf"), None))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    results = {flash: measure(args.model, flash, args.repeats, args.threads) for flash in (False, True)}
    print(f"model {args.model.name}, {args.threads} threads, median of {args.repeats}")
    print(f"{'prefix+new':>12} {'default s':>10} {'flash s':>8} {'ratio':>6} {'gen12 default':>14} {'gen12 flash':>12}")
    for case in results[False]:
        (d, dg), (f, fg) = results[False][case], results[True][case]
        print(f"{case:>12} {d:10.2f} {f:8.2f} {f / d:6.2f} {dg:14.2f} {fg:12.2f}")


if __name__ == "__main__":
    main()
