"""`ingest --workers N` against an endpoint of fixed latency: messages per second, and the same memory, at 1, 2, 4 and 8 workers.

    nice -n 19 .venv/bin/python scripts/bench_workers.py --out docs/bench/workers-fixed-latency.json

A local OpenAI-compatible endpoint (tests/support/slow_server.py) answers
every request after ``--delay`` seconds (200 ms by default), several at once,
with answers read from the prompt alone, so the same prompt always gets the
same answer whatever the order. Two inputs, each ingested into a new database
at every worker count, in this one run:

- ``users``: ``--users`` users of ``--messages`` messages each, ingested
  together by `api.ingest_users` (each user on a thread of its own, at most N
  requests in flight between them all);
- ``chat``: one user's long chat (``--users`` x ``--messages`` messages), by
  `nemori ingest FILE --workers N`, the real command, in this process.

Each row: seconds, messages per second, the ratio to 1 worker, the most
requests in flight, requests served, and whether the memory is the same as
with 1 worker: every message's episode, every episode's title and narrative,
every fact, decision and LLM call (row ids aside, which interleave between
users). The embedder is the tests' bag-of-words fake, so the figures are the
orchestration's against the endpoint's latency; no model runs here.

``--llama-server PATH`` (a binary from `make llama-server`) replaces that
endpoint with llama.cpp's real server on 127.0.0.1, ``--parallel`` slots,
serving ``--model``'s GGUF: then the model runs, on this machine's cores, and
"requests" / "most in flight" are not counted (``llm_calls`` is, from the
database).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import apsw  # noqa: E402

from nemori_cli import deps  # noqa: E402
from nemori_cli.api import ingest_users  # noqa: E402
from nemori_cli.cli import app as cli_app  # noqa: E402
from nemori_cli.embed.fake import FakeEmbedder  # noqa: E402
from tests.support.slow_server import TOPICS, SlowServer  # noqa: E402


def chat(user: int, messages: int, per_topic: int = 8) -> list[dict]:
    """One user's messages: ``per_topic`` on a topic, two topics a day, four topics of the user's own that come back."""
    start = datetime(2023, 5, 8, 10, 0)
    rows = []
    for n in range(messages):
        k, i = divmod(n, per_topic)
        topic = TOPICS[(user * 3 + k % 4) % len(TOPICS)]
        at = start + timedelta(days=k // 2, minutes=k * 10 + i)
        rows.append(
            {
                "id": f"u{user}-{n}",
                "speaker": "Ann" if i % 2 == 0 else "Bob",
                "content": f"Let us talk about the {topic}, point {i}.",
                "timestamp": at.isoformat(),
            }
        )
    return rows


def memory_of(path: Path) -> dict:
    """Everything a run wrote, per user, row ids replaced by their rank among the user's rows (they interleave between users)."""
    conn = apsw.Connection(str(path))
    out = {}
    for (user,) in conn.execute("SELECT DISTINCT user_id FROM messages ORDER BY user_id").fetchall():
        rank = {f"E{r[0]}": f"E#{i}" for i, r in enumerate(conn.execute("SELECT id FROM episodes WHERE user_id = ? ORDER BY id", (user,)))}
        rank |= {f"F{r[0]}": f"F#{i}" for i, r in enumerate(conn.execute("SELECT id FROM facts WHERE user_id = ? ORDER BY id", (user,)))}

        def plain(text: str, rank: dict[str, str] = rank) -> str:
            return re.sub(r"\b[EF]\d+\b", lambda m: rank.get(m.group(0), m.group(0)), text or "")

        out[user] = {
            "grouping": [
                (k, rank.get(f"E{e}"))
                for k, e in conn.execute("SELECT msg_key, episode_id FROM messages WHERE user_id = ? ORDER BY ts_epoch, id", (user,))
            ],
            "episodes": [
                list(r)
                for r in conn.execute("SELECT title, narrative, status, boundary FROM episodes WHERE user_id = ? ORDER BY id", (user,))
            ],
            "facts": [list(r) for r in conn.execute("SELECT text, status FROM facts WHERE user_id = ? ORDER BY id", (user,))],
            "events": [
                [s, k, plain(d)]
                for s, k, d in conn.execute("SELECT stage, kind, detail FROM stage_events WHERE user_id = ? ORDER BY id", (user,))
            ],
            "calls": [
                list(r) for r in conn.execute("SELECT stage, attempts, outcome FROM llm_calls WHERE user_id = ? ORDER BY id", (user,))
            ],
        }
    conn.close()
    return out


def run_users(db: Path, inputs: dict[str, list[dict]], workers: int) -> None:
    ingest_users(db, inputs, workers=workers)


def run_chat(db: Path, source: Path, workers: int) -> None:
    import contextlib
    import io

    sys.argv = ["nemori", "ingest", str(source), "--db", str(db), "--workers", str(workers), "--quiet", "--json"]
    deps._backends.clear()  # as a new process would
    with contextlib.redirect_stdout(io.StringIO()) as report:
        try:
            cli_app.main()
        except SystemExit as done:
            if done.code:
                raise RuntimeError(f"nemori ingest exited {done.code}") from None
    json.loads(report.getvalue())  # the report, whole


class LlamaServer:
    """llama.cpp's own server (`make llama-server`) on 127.0.0.1 with ``parallel`` slots, serving ``preset``'s GGUF.

    Counts nothing itself: ``most`` and ``served`` stay None (the fixed-latency
    endpoint counts them). Every slot gets the context one request needs.
    """

    def __init__(self, binary: Path, preset: str, parallel: int, log: Path, threads: int = 2, ctx_per_slot: int = 4096):
        from nemori_cli.config import Settings
        from nemori_cli.modelfiles import gguf_path

        settings = Settings.from_env(db=":memory:", user="bench", model=preset)
        self.model = gguf_path(deps.llm_preset(settings), settings.cache_dir)
        self.args = [str(binary), "-m", str(self.model), "--parallel", str(parallel), "--ctx-size", str(ctx_per_slot * parallel),
                     "--threads", str(threads), "--host", "127.0.0.1", "--port", "0"]  # fmt: skip
        self.parallel, self.most, self.served, self.log = parallel, None, None, log

    def __enter__(self):
        import socket
        import urllib.request

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.args[-1] = str(port)
        # Its log goes to a file: the server writes a few lines per request, and a pipe
        # nobody reads fills up and stops the server mid-run.
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=log)
        self.url = f"http://127.0.0.1:{port}/v1"
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(1)
        raise RuntimeError("llama-server did not become healthy in 300 s")

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)

    def reset(self) -> None:
        """Nothing kept between runs but the server's prompt cache, which each run's first request refills."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the endpoint takes per answer")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--messages", type=int, default=40, help="messages per user")
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--inputs", default="users,chat", help="users, chat or both")
    parser.add_argument(
        "--llama-server", type=Path, help="a llama-server binary: serve --model with --parallel slots instead of the fixed-latency endpoint"
    )
    parser.add_argument("--model", default="small", help="with --llama-server: the preset whose GGUF it serves")
    parser.add_argument("--parallel", type=int, default=4, help="with --llama-server: its slots")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    widths = [int(w) for w in args.workers.split(",")]
    if widths[0] != 1:
        parser.error("--workers must start with 1: every ratio is against it")
    if args.llama_server and not os.access(args.llama_server, os.X_OK):
        parser.error(f"--llama-server {args.llama_server}: no executable there (make llama-server builds .venv/bin/llama-server)")

    deps.build_embedder = lambda settings, db=None: FakeEmbedder()  # type: ignore[assignment]
    deps.check_embedder_files = lambda settings: None  # type: ignore[assignment]
    work = Path(tempfile.mkdtemp(prefix="nemori-bench-workers-"))
    record: dict = {
        "command": "nice -n 19 .venv/bin/python " + " ".join([Path(sys.argv[0]).as_posix().split(str(ROOT) + "/")[-1], *sys.argv[1:]]),
        "when": datetime.now().isoformat(timespec="seconds"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "endpoint": f"llama-server --parallel {args.parallel} --threads 2, preset {args.model}"
        if args.llama_server
        else f"tests/support/slow_server.py, {args.delay * 1000:g} ms per answer",
        "embedder": "FakeEmbedder (bag of words), no model",
        "inputs": {},
    }
    with (
        LlamaServer(args.llama_server, args.model, args.parallel, work / "llama-server.log")
        if args.llama_server
        else SlowServer(args.delay) as server
    ):
        presets = work / "models.toml"
        presets.write_text(
            f'[llm.slow]\nkind = "openai"\nbase_url = "{server.url}"\nmodel = "{args.model if args.llama_server else "slow-model"}"\ntimeout = 900\n'
        )
        os.environ.update(NEMORI_MODELS_FILE=str(presets), NEMORI_MODEL="slow", NEMORI_CACHE_DIR=str(work / "cache"))
        os.environ.pop("NEMORI_WORKERS", None)
        users = {f"u{u}": chat(u, args.messages) for u in range(args.users)}
        long_chat = [
            dict(
                row, id=f"c-{n}", timestamp=(datetime(2023, 5, 8, 10) + timedelta(days=n // 16, minutes=n % 16 + (n // 8) * 10)).isoformat()
            )
            for n, row in enumerate(r for u in users.values() for r in u)
        ]
        source = work / "chat.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in long_chat))
        runs = {"users": (lambda db, w: run_users(db, users, w), args.users * args.messages, f"{args.users} users x {args.messages} messages, api.ingest_users"),
                "chat": (lambda db, w: run_chat(db, source, w), len(long_chat), f"one chat of {len(long_chat)} messages, nemori ingest --workers N")}  # fmt: skip
        for name in args.inputs.split(","):
            run, messages, what = runs[name]
            rows, baseline, reference = [], None, None
            for w in widths:
                db = work / f"{name}-{w}.db"
                server.reset()
                started = time.perf_counter()
                run(db, w)
                seconds = time.perf_counter() - started
                memory = memory_of(db)
                reference = reference or memory
                rate = messages / seconds
                baseline = baseline or rate
                row = {
                    "workers": w, "seconds": round(seconds, 2), "messages_per_s": round(rate, 2), "vs_1": round(rate / baseline, 2),
                    "most_in_flight": server.most, "requests": server.served, "same_memory_as_1": memory == reference,
                    "episodes": sum(len([e for e in m["episodes"] if e[2] == "active"]) for m in memory.values()),
                    "facts": sum(len(m["facts"]) for m in memory.values()),
                    "llm_calls": sum(len(m["calls"]) for m in memory.values()),
                }  # fmt: skip
                rows.append(row)
                print(f"{name:5} workers {w}: {seconds:6.2f} s  {rate:6.2f} msg/s  x{row['vs_1']:.2f}  in flight {server.most}  "
                      f"requests {server.served}  episodes {row['episodes']}  same memory {row['same_memory_as_1']}", flush=True)  # fmt: skip
            record["inputs"][name] = {"what": what, "messages": messages, "rows": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
