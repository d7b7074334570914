"""Wall time of `nemori ask`, each question from a new process, on a stored database (issue 41's fresh-ask bar).

    python scripts/fresh_ask.py DB --user bench --questions 10 [--sample conv-26] [--out FILE.json] [--one-process]

The database is copied first (an `ask` writes its telemetry, and may save a
core's KV state beside the file), so the one given is left as it was. The
questions are the sample's own LoCoMo questions (categories 1-4), in order.
Prints one line per question and the p50 and p95; --out keeps them as JSON. --one-process also asks the same
questions through one `nemori ask --questions -` (each written when the answer before it has come back) and
times each answer from its question's writing: the first pays the model's load, the rest only their own reading.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def questions(sample: str, n: int) -> list[str]:
    data = json.loads((REPO.parent / "shared/data/locomo/locomo-dev.json").read_text())
    qa = next(s for s in data if s["sample_id"] == sample)["qa"]
    return [q["question"] for q in qa if q.get("category") in (1, 2, 3, 4)][:n]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--user", default="bench")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--sample", default="conv-26")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one-process", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / args.db.name
        shutil.copy(args.db, db)
        for q in questions(args.sample, args.questions):
            began = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "nemori_cli", "ask", q, "--db", str(db), "--user", args.user, "--json"],
                capture_output=True,
                text=True,
                cwd=REPO,
            )
            seconds = time.perf_counter() - began
            if proc.returncode != 0:
                print(f"failed ({proc.returncode}): {proc.stderr.strip()[-300:]}", file=sys.stderr)
                return 1
            out = json.loads(proc.stdout)
            rows.append({"question": q, "seconds": round(seconds, 2), "answer": out.get("answer"), "core": out.get("core")})
            print(f"{seconds:6.2f} s  {q[:60]!r} -> {str(out.get('answer'))[:40]!r}")
        piped = one_process(db, args.user, [r["question"] for r in rows]) if args.one_process else []
    times = sorted(r["seconds"] for r in rows)
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    print(f"p50 {statistics.median(times):.2f} s, p95 {p95:.2f} s over {len(times)} fresh processes")
    summary: dict = {"p50": statistics.median(times), "p95": p95, "rows": rows}
    if piped:
        rest = sorted(r["seconds"] for r in piped[1:])
        print(f"one process: first {piped[0]['seconds']:.2f} s, then p50 {statistics.median(rest):.2f} s over {len(rest)}")
        summary["one_process"] = {"first": piped[0]["seconds"], "rest_p50": statistics.median(rest), "rows": piped}
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


def one_process(db: Path, user: str, questions: list[str]) -> list[dict]:
    """Each question written to one `nemori ask --questions -`, the next only once the answer before it came back."""
    cmd = [sys.executable, "-m", "nemori_cli", "ask", "--questions", "-", "--db", str(db), "--user", user, "--json"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdin and proc.stdout
    out = []
    for q in questions:
        began = time.perf_counter()
        proc.stdin.write(q + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:  # the process ended: its own error line is on stderr above
            raise SystemExit(f"fresh_ask.py: `nemori ask --questions -` stopped at {q!r} (exit {proc.wait(timeout=60)})")
        reply = json.loads(line)
        seconds = time.perf_counter() - began
        out.append({"question": q, "seconds": round(seconds, 2), "answer": reply.get("answer"), "core": reply.get("core")})
        print(f"{seconds:6.2f} s  one process  {q[:50]!r} -> {str(reply.get('answer'))[:40]!r}")
    proc.stdin.close()
    proc.wait(timeout=120)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
