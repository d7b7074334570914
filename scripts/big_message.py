"""One very large message through `nemori ingest --build later`, with the fake LLM and embedder (issue 42, defect 15).

    .venv/bin/python scripts/big_message.py 50          # wall time and peak RSS of one 50 MB message
    .venv/bin/python scripts/big_message.py 50 --trace  # tracemalloc's peak instead (slower: every allocation is traced)

The CLI runs in this process on a new database in a temporary folder; the
message is ASCII prose of exactly the size asked, on one JSON Lines line,
followed by one short message. One run per process: the peak RSS is the
process's. What the real embedder's tokenizer cost is measured apart (docs/RELIABILITY.md).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest  # noqa: E402

from tests.unit.fake_ingest import isolate, nemori, use_fakes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mb", type=float, help="the message's size in MB (10^6 bytes)")
    parser.add_argument("--trace", action="store_true", help="measure tracemalloc's peak")
    args = parser.parse_args()
    chars = int(args.mb * 1_000_000)
    unit = "alpha beta gamma delta epsilon zeta eta theta iota kappa "
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        with pytest.MonkeyPatch.context() as patch:
            isolate(patch, tmp)
            use_fakes(patch)
            with (tmp / "big.jsonl").open("w", encoding="utf-8") as out:
                text = (unit * (chars // len(unit) + 1))[:chars]
                out.write(json.dumps({"id": "m12", "speaker": "Ann", "content": text, "timestamp": "2024-03-04T19:09:02"}) + "\n")
                out.write(json.dumps({"id": "m13", "speaker": "Bob", "content": "ok", "timestamp": "2024-03-04T19:10:02"}) + "\n")
                del text
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
            if args.trace:
                tracemalloc.start()
            started = time.perf_counter()
            result = nemori("ingest", str(tmp / "big.jsonl"), "--build", "later", "--db", str(tmp / "m.db"))
            seconds = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1] / 1e6 if args.trace else None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    figures = {"mb": args.mb, "exit": result.exit_code, "seconds": round(seconds, 2), "stderr": result.stderr.strip()}
    figures.update(
        {"tracemalloc_peak_mb": round(peak)} if peak is not None else {"peak_rss_mb": round(rss), "rss_before_mb": round(before)}
    )
    print(json.dumps(figures))
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
