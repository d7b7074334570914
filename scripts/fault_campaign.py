"""Crash and concurrency trials against the real stack, with figures for docs/RELIABILITY.md.

    python scripts/fault_campaign.py --kills 50 --seed 1 --out docs/bench/faults-kill.json
    python scripts/fault_campaign.py --quick          # what the test suite runs: a few trials of each

Every trial runs the `nemori` command in a subprocess on a real SQLite file
with a real model (`tiny` by default) and checks the file afterwards:

- **kill**: `ingest` killed at a seeded random moment (SIGKILL, and some
  SIGINT and SIGTERM), then the same ingest again resumes. Checked: every message stored
  once; each in exactly one live episode, or with exactly one note (amem);
  no episode without messages; no fact without a source episode; `PRAGMA
  integrity_check` ok; the message and pending counts equal an
  uninterrupted run's. Episode and fact counts are reported beside the
  uninterrupted run's: a resumed run partitions from where it stopped, so
  its windows, and the episodes cut from them, may differ.
- **build kills**: `ingest --build later`, then `nemori build --background`
  killed with SIGKILL at a seeded random moment, then `nemori build` again.
  Checked as above, and more: the episodes (which messages, cut where)
  equal those of one uninterrupted background build of the same input
  (pipeline/plan.py keeps a window's cut across the kill). Whether the
  model's words (titles, narratives, facts) are the same too is reported,
  not required: llama.cpp's arithmetic depends on which prompt prefix its KV
  cache holds, and a resumed process starts with none.
- **writers**: N `ingest` processes started together on one file, each with
  its own user (and, with --same-user, N copies of one user's chat).
  Checked: every exit 0, no traceback, nothing lost or doubled.
- **surfaces** (scripts/fault_surfaces.py says what each checks): PostgreSQL
  stopped mid-ingest and started again (--pg-stops), MCP over stdio with two
  clients at once and a client killed mid-call (--mcp-kills), special files as
  --db, and read-only files and folders for a user who is not root.

The checks read the file with apsw directly, not through nemori's code, so
a bug in nemori's own reading cannot hide a bug in its writing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fault_surfaces as surfaces  # noqa: E402 - beside this script

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "chat.jsonl"
INPUT = EXAMPLE  # what every trial ingests: the example, or its first --messages lines


# One `nemori` subprocess and its ending, shared with the surface trials.
nemori, finish, _lines = surfaces.nemori, surfaces.finish, surfaces.lines


def check(path: Path, messages_expected: int, mode: str) -> dict:
    """What the file holds, read with plain SQL, and the invariants that must hold."""
    conn = apsw.Connection(str(path))
    one = lambda sql: conn.execute(sql).fetchall()[0][0]  # noqa: E731
    result = {
        "integrity": one("PRAGMA integrity_check"),
        "messages": one("SELECT count(*) FROM messages"),
        "distinct_keys": one("SELECT count(DISTINCT user_id || msg_key) FROM messages"),
        "pending": one("SELECT count(*) FROM messages WHERE episode_id IS NULL")
        if mode != "amem"
        else one("SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM notes n WHERE n.message_id = m.id)"),
        "episodes": one("SELECT count(*) FROM episodes WHERE status = 'active'"),
        "facts": one("SELECT count(*) FROM facts WHERE status = 'active'"),
        "notes": one("SELECT count(*) FROM notes"),
        "orphan_messages": one(
            "SELECT count(*) FROM messages m WHERE m.episode_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM episodes e WHERE e.id = m.episode_id)"
        ),
        "empty_episodes": one(
            "SELECT count(*) FROM episodes e WHERE e.status = 'active' AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.episode_id = e.id)"
        ),
        "unsourced_facts": one("SELECT count(*) FROM facts f WHERE NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = f.id)"),
        "doubled_notes": one("SELECT count(*) - count(DISTINCT message_id) FROM notes WHERE message_id IS NOT NULL"),
    }
    conn.close()
    problems = []
    if result["integrity"] != "ok":
        problems.append(f"integrity_check: {result['integrity']}")
    if result["messages"] != messages_expected:
        problems.append(f"{result['messages']} messages stored, {messages_expected} expected")
    if result["distinct_keys"] != result["messages"]:
        problems.append("a message stored twice")
    for key in ("pending", "orphan_messages", "empty_episodes", "unsourced_facts", "doubled_notes"):
        if result[key]:
            problems.append(f"{key}: {result[key]}")
    result["problems"] = problems
    return result


def kill_trial(rng: random.Random, work: Path, env: dict, mode: str, reference_seconds: float, sig: int) -> dict:
    db = work / f"kill-{rng.randrange(10**9)}.db"
    delay = rng.uniform(0.3, max(0.5, reference_seconds * 0.9))
    proc = nemori(["ingest", str(INPUT), "--db", str(db), "--memory", mode, "--quiet"], env)
    time.sleep(delay)
    interrupted = proc.poll() is None
    if interrupted:
        proc.send_signal(sig)
    code, err = finish(proc)
    # The rerun is what a user would type: the same ingest again (it adds only what is missing, then resumes).
    resumed_code, resumed_err = finish(nemori(["ingest", str(INPUT), "--db", str(db), "--memory", mode, "--quiet"], env))
    state = check(db, _lines(INPUT), mode) if db.exists() else {"problems": ["no database file after the rerun"]}
    tracebacks = [e for e in (err, resumed_err) if "Traceback" in e]
    if resumed_code != 0:
        state["problems"].append(f"the rerun exited {resumed_code}: {resumed_err.strip()[-200:]}")
    if tracebacks:
        state["problems"].append("a traceback reached the user")
    db.unlink(missing_ok=True)
    for side in ("-wal", "-shm"):
        Path(str(db) + side).unlink(missing_ok=True)
    return {"mode": mode, "signal": signal.Signals(sig).name, "after_s": round(delay, 2), "interrupted": interrupted, "exit": code, **state}


def memory_of(path: Path) -> dict:
    """What a memory holds, by content (no ids or times of writing): what a resumed build must equal."""
    conn = apsw.Connection(str(path))
    episodes = conn.execute(
        "SELECT e.title, e.narrative, e.boundary, (SELECT group_concat(m.msg_key, ' ') FROM messages m WHERE m.episode_id = e.id) "
        "FROM episodes e WHERE e.status = 'active' ORDER BY e.start_ts, e.title"
    ).fetchall()
    facts = conn.execute("SELECT text, status FROM facts ORDER BY text, status").fetchall()
    conn.close()
    return {"episodes": [list(e) for e in episodes], "facts": [list(f) for f in facts]}


def _background(db: Path, env: dict) -> int | None:
    """`nemori build --background`: the worker's pid (None when nothing was pending)."""
    code, out, err = _run(["build", "--background", "--db", str(db), "--json"], env)
    if code != 0:
        raise SystemExit(f"build --background failed ({code}): {err.strip()[-300:]}")
    return json.loads(out)["pid"]


def _run(args: list[str], env: dict) -> tuple[int, str, str]:
    proc = nemori(args, env)
    out, err = proc.communicate(timeout=1800)
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def _wait_gone(pid: int, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise SystemExit(f"the background build {pid} did not end in {timeout:.0f} s")


def build_reference(work: Path, env: dict) -> dict:
    """`ingest --build later`, then one uninterrupted background build: the memory every killed build must end with."""
    db = work / "reference-build.db"
    code, _, err = _run(["ingest", str(INPUT), "--db", str(db), "--build", "later", "--quiet"], env)
    if code != 0:
        raise SystemExit(f"ingest --build later failed ({code}): {err.strip()[-300:]}")
    started = time.perf_counter()
    pid = _background(db, env)
    if pid:
        _wait_gone(pid)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 1), **check(db, _lines(INPUT), "native"), "memory": memory_of(db)}


def build_kill_trial(rng: random.Random, work: Path, env: dict, reference_run: dict) -> dict:
    """The background build killed (SIGKILL) at a random moment, then `nemori build` again: nothing lost or doubled, the same memory."""
    db = work / f"build-kill-{rng.randrange(10**9)}.db"
    delay = rng.uniform(0.5, max(1.0, reference_run["seconds"] * 0.9))
    _run(["ingest", str(INPUT), "--db", str(db), "--build", "later", "--quiet"], env)
    pid = _background(db, env)
    time.sleep(delay)
    interrupted = False
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
            interrupted = True
        except ProcessLookupError:
            pass  # it had finished
        _wait_gone(pid)
    pending_after_kill = apsw.Connection(str(db)).execute("SELECT count(*) FROM messages WHERE episode_id IS NULL").fetchall()[0][0]
    code, _, err = _run(["build", "--db", str(db), "--quiet"], env)  # what a user types to resume
    state = check(db, _lines(INPUT), "native")
    if code != 0:
        state["problems"].append(f"the resumed build exited {code}: {err.strip()[-200:]}")
    if "Traceback" in err:
        state["problems"].append("a traceback reached the user")
    resumed, reference_memory = memory_of(db), reference_run["memory"]
    differs = [
        name
        for name, pick in (
            ("message groups", lambda e: e[3]),
            ("boundaries", lambda e: e[2]),
            ("titles", lambda e: e[0]),
            ("narratives", lambda e: e[1]),
        )
        if [pick(e) for e in resumed["episodes"]] != [pick(e) for e in reference_memory["episodes"]]
    ] + (["facts"] if resumed["facts"] != reference_memory["facts"] else [])
    # The episodes (which messages, cut where) must be the uninterrupted run's. The model's words may not be:
    # llama.cpp's arithmetic depends on which prompt prefix its KV cache holds, and a fresh process holds none.
    same_episodes = not {"message groups", "boundaries"} & set(differs)
    if not same_episodes:
        state["problems"].append(f"the resumed build cut other episodes than the uninterrupted one ({', '.join(differs)} differ)")
    for path in (db, Path(str(db) + "-wal"), Path(str(db) + "-shm")):
        path.unlink(missing_ok=True)
    return {
        "after_s": round(delay, 2), "interrupted": interrupted, "pending_after_kill": pending_after_kill, "same_episodes": same_episodes,
        "same_text": not differs, "differs": differs, "facts_uninterrupted": len([f for f in reference_memory["facts"] if f[1] == "active"]), **state,
    }  # fmt: skip


def writers_trial(work: Path, env: dict, count: int, same_user: bool) -> dict:
    db = work / f"writers-{count}-{'same' if same_user else 'users'}.db"
    started = time.perf_counter()
    procs = [nemori(["ingest", str(INPUT), "--db", str(db), "--user", "u" if same_user else f"u{i}", "--quiet"], env) for i in range(count)]
    outcomes = [finish(p) for p in procs]
    seconds = time.perf_counter() - started
    expected = _lines(INPUT) * (1 if same_user else count)
    state = check(db, expected, "native")
    for code, err in outcomes:
        if code != 0:
            state["problems"].append(f"exit {code}: {err.strip()[-200:]}")
        if "Traceback" in err:
            state["problems"].append("a traceback reached the user")
    return {"writers": count, "same_user": same_user, "seconds": round(seconds, 1), **state}


def reference(work: Path, env: dict, mode: str) -> dict:
    db = work / f"reference-{mode}.db"
    started = time.perf_counter()
    code, err = finish(nemori(["ingest", str(INPUT), "--db", str(db), "--memory", mode, "--quiet"], env))
    if code != 0:
        raise SystemExit(f"the uninterrupted {mode} run failed ({code}): {err.strip()[-300:]}")
    return {"mode": mode, "seconds": round(time.perf_counter() - started, 1), **check(db, _lines(INPUT), mode)}


def run_surfaces(args, rng: random.Random, work: Path, env: dict, record: dict) -> list[dict]:
    """The trials of scripts/fault_surfaces.py, into record["surfaces"]; returns them all."""
    found: dict[str, list[dict] | str] = {}
    try:
        import pgserver  # noqa: F401 - the dev extra's PostgreSQL in a wheel
    except ImportError:
        found["pg_stops"] = "skipped: pgserver is not installed (pip install -e '.[dev]')"
    else:
        if args.pg_stops:
            found["pg_stops"] = surfaces.pg_stop_trials(args.pg_stops, rng, work, env, INPUT)["trials"]
    found["mcp_bad_calls"] = [surfaces.mcp_bad_calls(work, env, INPUT)]
    print(f"mcp bad calls over stdio: {found['mcp_bad_calls'][0]}", file=sys.stderr)
    found["mcp_two_clients"] = [surfaces.mcp_two_clients(work, env, INPUT)]
    print(f"mcp two clients: {found['mcp_two_clients'][0]['problems'] or 'ok'}", file=sys.stderr)
    found["mcp_killed_client"] = surfaces.mcp_killed_client(rng, work, env, INPUT, args.mcp_kills)
    found["special_files"] = surfaces.special_files(work, env, INPUT)
    print(f"special files: {sum(not t['problems'] for t in found['special_files'])}/{len(found['special_files'])} clean", file=sys.stderr)
    found["permissions"] = surfaces.permissions(work, env, INPUT, work / f"reference-{args.modes.split(',')[0]}.db")
    print(f"permissions: {found['permissions']}", file=sys.stderr)
    record["surfaces"] = found
    return [t for trials in found.values() if isinstance(trials, list) for t in trials]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=50, help="kill trials in all (split between the modes)")
    parser.add_argument("--build-kills", type=int, default=10, help="trials of `build --background` killed with SIGKILL, then resumed")
    parser.add_argument("--modes", default="native,amem")
    parser.add_argument("--writers", default="2,4", help="concurrent ingest processes per writers trial (empty: none)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--messages", type=int, default=0, help="ingest only the example's first N messages (shorter trials)")
    parser.add_argument("--only-kill9", action="store_true", help="every trial SIGKILL (default: 8 in 10, the rest SIGINT and SIGTERM)")
    parser.add_argument("--pg-stops", type=int, default=10, help="ingests whose PostgreSQL server is stopped mid-way, then resumed")
    parser.add_argument("--mcp-kills", type=int, default=5, help="MCP clients killed mid-call (after the two-clients trial)")
    parser.add_argument("--no-surfaces", action="store_true", help="skip PostgreSQL, MCP, special files and permissions")
    parser.add_argument("--quick", action="store_true", help="4 kill trials, 2 writers, 1 of each surface: what the test suite runs")
    parser.add_argument("--out", type=Path, help="JSON record of every trial")
    args = parser.parse_args()
    if args.quick:
        args.kills, args.writers, args.messages, args.build_kills = (
            4,
            "2",
            args.messages or 12,
            0,
        )  # build kills: tests/integration/test_build_later.py
        args.pg_stops, args.mcp_kills = 1, 1
    rng = random.Random(args.seed)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("NEMORI_") or k == "NEMORI_CACHE_DIR"}, "NEMORI_MODEL": args.model}
    modes = args.modes.split(",")
    record: dict = {"command": " ".join(sys.argv), "model": args.model, "seed": args.seed, "input": str(EXAMPLE.relative_to(REPO))}
    global INPUT
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.messages:
            INPUT = work / "chat.jsonl"
            INPUT.write_text("\n".join(EXAMPLE.read_text().splitlines()[: args.messages]) + "\n")
            record["input"] += f" (first {args.messages} messages)"
        env["NEMORI_CACHE_DIR"] = env.get("NEMORI_CACHE_DIR") or str(work / "cache")
        record["reference"] = [reference(work, env, m) for m in modes]
        seconds = {r["mode"]: r["seconds"] for r in record["reference"]}
        signals = [signal.SIGKILL] * 8 + [signal.SIGINT, signal.SIGTERM]  # mostly kill -9
        if args.only_kill9:
            signals = [signal.SIGKILL]
        kills = []
        for i in range(args.kills):
            mode = modes[i % len(modes)]
            kills.append(kill_trial(rng, work, env, mode, seconds[mode], signals[i % len(signals)]))
            print(
                f"kill {i + 1}/{args.kills}: {kills[-1]['mode']} {kills[-1]['signal']} after {kills[-1]['after_s']} s: "
                f"{'ok' if not kills[-1]['problems'] else kills[-1]['problems']}",
                file=sys.stderr,
            )
        record["kills"] = kills
        builds: list[dict] = []
        if args.build_kills:
            record["build_reference"] = build_reference(work, env)
            for i in range(args.build_kills):
                builds.append(build_kill_trial(rng, work, env, record["build_reference"]))
                print(
                    f"build kill {i + 1}/{args.build_kills}: after {builds[-1]['after_s']} s, {builds[-1]['pending_after_kill']} pending: "
                    f"{'ok' if not builds[-1]['problems'] else builds[-1]['problems']}",
                    file=sys.stderr,
                )
            record["build_reference"].pop("memory")
        record["build_kills"] = builds
        record["writers"] = [writers_trial(work, env, int(n), same) for n in args.writers.split(",") if n for same in (False, True)]
        surface_trials = [] if args.no_surfaces else run_surfaces(args, rng, work, env, record)
    failed = [t for t in record["kills"] + record["build_kills"] + record["writers"] + surface_trials if t["problems"]]
    record["summary"] = {
        "kill_trials": len(record["kills"]),
        "interrupted": sum(t["interrupted"] for t in record["kills"]),
        "kill_trials_with_problems": sum(bool(t["problems"]) for t in record["kills"]),
        "build_kill_trials": len(record["build_kills"]),
        "build_kills_interrupted": sum(t["interrupted"] for t in record["build_kills"]),
        "build_kills_with_problems": sum(bool(t["problems"]) for t in record["build_kills"]),
        "build_kills_same_episodes": sum(t["same_episodes"] for t in record["build_kills"]),
        "build_kills_same_text": sum(t["same_text"] for t in record["build_kills"]),
        "writer_trials": len(record["writers"]),
        "writer_trials_with_problems": sum(bool(t["problems"]) for t in record["writers"]),
        **{f"{name}_trials": len(trials) for name, trials in record.get("surfaces", {}).items() if isinstance(trials, list)},
        **{
            f"{name}_with_problems": sum(bool(t["problems"]) for t in trials)
            for name, trials in record.get("surfaces", {}).items()
            if isinstance(trials, list)
        },
    }
    text = json.dumps(record, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(json.dumps(record["summary"]))
    for t in failed:
        print(f"PROBLEM: {t}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
