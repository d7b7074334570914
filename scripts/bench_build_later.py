"""Searchable first, built behind, measured on a generated ChatGPT export (docs/PERFORMANCE.md, "Searchable first").

    python scripts/bench_build_later.py --out docs/bench/build-later --conversations 200 --model small [--skip-builds]

In one sitting, one process at a time:
1. `ingest --build later` of the export: wall time until it returns (searchable).
2. `ingest --dry-run` against the stored database: the estimated build time.
3. `build --background`, polled every --every seconds with `stats --json`:
   the pending count and the ETA it gives, against the time the build then took.
4. `ingest --build now` of the same export into another database (today's one pass):
   its wall time, and its episode and fact counts beside the background build's.
5. `ask` a question about the export's last conversation, on a database with
   nothing built (answered from raw turns).

Each step's JSON goes to OUT as it finishes; summary.json has the figures.
--skip-builds does steps 1, 2 and 5 only (minutes, not hours).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUESTION = "How long have I been doing Duolingo Spanish?"  # the last conversation of the seed-7 export is "Learning Spanish"


def nemori(*args: str, env: dict) -> tuple[float, dict | None, str]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "nemori_cli", *args, "--json"], capture_output=True, text=True, env=env, cwd=REPO)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"nemori {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return seconds, json.loads(proc.stdout), proc.stderr


def save(out: Path, name: str, data) -> None:
    (out / name).write_text(json.dumps(data, indent=1) + "\n")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--model", default="small")
    parser.add_argument("--every", type=float, default=15.0, help="seconds between two looks at the background build")
    parser.add_argument("--skip-builds", action="store_true")
    args = parser.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = REPO / "bench-results" / f"build-later-{out.name}"  # the export and the databases: ignored by git
    work.mkdir(parents=True, exist_ok=True)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("NEMORI_") or k == "NEMORI_CACHE_DIR"}, "NEMORI_MODEL": args.model}
    export = work / "conversations.json"
    subprocess.run(
        [
            sys.executable,
            "scripts/make_chatgpt_export.py",
            str(export),
            "--conversations",
            str(args.conversations),
            "--seed",
            str(args.seed),
        ],
        check=True,
        cwd=REPO,
    )
    summary: dict = {"command": " ".join(sys.argv), "conversations": args.conversations, "seed": args.seed, "model": args.model}

    later, now = work / "later.db", work / "now.db"
    for path in work.glob("*.db*"):
        path.unlink() if path.is_file() else None
    fresh_dry = nemori("ingest", str(export), "--db", str(later), "--dry-run", env=env)[1]
    seconds, stored, _ = nemori("ingest", str(export), "--db", str(later), "--build", "later", env=env)
    save(out, "stored.json", {"wall_s": round(seconds, 1), **stored})
    summary.update(
        messages=stored["added"],
        searchable_wall_s=round(seconds, 1),
        searchable_estimated_s=fresh_dry["searchable_seconds"],
        build_estimated_fresh_s=fresh_dry["build_seconds"],
        estimate_rates_fresh=fresh_dry["rates"]["source"],
    )
    seconds, answer, _ = nemori("ask", QUESTION, "--db", str(later), env=env)
    save(out, "ask-before-build.json", {"wall_s": round(seconds, 1), **answer})
    summary.update(
        ask_before_build={
            "question": QUESTION,
            "answer": answer["answer"],
            "wall_s": round(seconds, 1),
            "unbuilt_memories": answer["unbuilt_memories"],
        }
    )
    save(out, "summary.json", summary)
    if args.skip_builds:
        print(json.dumps(summary, indent=1))
        return 0

    started = time.perf_counter()
    worker = nemori("build", "--background", "--db", str(later), env=env)[1]
    looks = []
    while worker["pid"] and alive(worker["pid"]):
        time.sleep(args.every)
        built = nemori("stats", "--db", str(later), env=env)[1]["built"]
        looks.append({"t_s": round(time.perf_counter() - started, 1), **built})
        save(out, "build-looks.json", looks)
    build_s = time.perf_counter() - started
    for look in looks:  # what each look promised, against what was left
        look["left_s"] = round(build_s - look["t_s"], 1)
    save(out, "build-looks.json", looks)
    counts_later = nemori("stats", "--db", str(later), env=env)[1]["counts"]
    seconds, one_pass, _ = nemori("ingest", str(export), "--db", str(now), "--build", "now", env=env)
    save(out, "one-pass.json", {"wall_s": round(seconds, 1), **one_pass})
    counts_now = nemori("stats", "--db", str(now), env=env)[1]["counts"]
    # The first look with this database's own rates (after the first episodes): its estimate of what was left.
    learned = next((look for look in looks if look["eta_source"] == "this database" and look["pending"]), None)
    summary.update(
        build_wall_s=round(build_s, 1), one_pass_wall_s=round(seconds, 1),
        counts_background=counts_later, counts_one_pass=counts_now,
        same_counts=all(counts_later[k] == counts_now[k] for k in ("messages", "pending", "episodes", "facts", "merged_episodes", "superseded_facts")),
        eta_fresh_error=round(fresh_dry["build_seconds"] / build_s - 1, 3),
        eta_learned={"at_s": learned["t_s"], "eta_s": learned["eta_seconds"], "left_s": learned["left_s"], "error": round(learned["eta_seconds"] / learned["left_s"] - 1, 3)} if learned else None,
    )  # fmt: skip
    save(out, "summary.json", summary)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
