"""Fault trials on the surfaces beyond the CLI's own files (issue 35), run by scripts/fault_campaign.py.

- **PostgreSQL stopped mid-ingest**: a real server (pgserver's wheel) is
  stopped at a seeded random moment of `nemori ingest --db postgresql://…`
  (fast shutdown, or immediate: a crash the server recovers from), then
  started again, and the same ingest rerun. Checked: the interrupted run
  exits 4 with one line and no traceback; the rerun exits 0; every message
  stored once, none pending, no episode without messages, no fact without a
  source, all read with plain SQL through psycopg. A run that had written
  everything before the stop (its last seconds are in the model) may exit 0:
  then its memory must be whole before the rerun.
- **MCP over stdio**: the SDK's client starting `nemori mcp` as a
  subprocess. The generated bad calls of tests/support/mcp_bad_calls.py (wrong
  types, missing fields, 1 MB strings, bad ids, another user) on a memory
  with episodes: each an MCP error or a result, the counts unchanged after
  every one, and the server still answering at the end. Two clients on one database at once, each remembering its half
  of a chat and recalling; then a client killed (SIGKILL) in the middle of a
  `remember` that builds memory, and a new client sending the same call.
  Checked: every call a result or an MCP error, no server left running
  after its client died, nothing lost or doubled.
- **Special files as --db**: /dev/null, a FIFO, a socket, a directory, a loop
  of symbolic links, each given to `search`, `stats` and `ingest`: exit 4,
  one line, in seconds, nothing new beside it.
- **Permissions for a user who is not root** (setpriv to nobody): a read-only
  file and a read-only folder, each given to `ingest` (refused: exit 4, the
  file unchanged), to `search` and to `ask` (both answer from the file, and
  leave it and its folder as they were).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/support/mcp_bad_calls.py: the same generated calls as the unit test


def nemori(args: list[str], env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nemori_cli", *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    )


def finish(proc: subprocess.Popen, timeout: float = 1800) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err.decode(errors="replace")


def lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def _said(err: str) -> list[str]:
    """What a command said on stderr, less blank lines."""
    return [line for line in err.splitlines() if line.strip()]


def _verdict(code: int, err: str, expected: int) -> list[str]:
    problems = []
    if code != expected:
        problems.append(f"exit {code}, not {expected}: {err.strip()[-200:]}")
    if "Traceback" in err:
        problems.append("a traceback reached the user")
    elif code != 0 and len(_said(err)) != 1:
        problems.append(f"{len(_said(err))} lines on stderr, not one: {err.strip()[-300:]}")
    return problems


# -- PostgreSQL stopped mid-ingest ------------------------------------------------


class _Server:
    """A PostgreSQL server of pgserver's wheel in a folder of its own, which a trial stops and starts again."""

    def __init__(self, folder: Path):
        import pgserver

        self.server = pgserver.get_server(folder, cleanup_mode="delete")
        self.uri = self.server.get_uri()

    def database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        head, _, tail = self.uri.partition("@/")
        _, _, query = tail.partition("?")
        uri = f"{head}@/{name}?{query}"
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        return uri

    def stop(self, how: signal.Signals) -> None:
        """SIGINT: a fast shutdown (sessions ended, a checkpoint); SIGQUIT: an immediate one (recovery at the next start)."""
        pid = self.server.get_pid()
        if pid is None:
            raise SystemExit("the PostgreSQL server of the campaign is not running")
        os.kill(pid, how)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        raise SystemExit(f"PostgreSQL (pid {pid}) did not stop in 60 s")

    def start(self) -> None:
        self.server.ensure_postgres_running()  # pg_ctl start with the same socket folder: the URIs hold

    def close(self) -> None:
        self.server.cleanup()


def _pg_state(uri: str, expected: int) -> dict:
    import psycopg

    with psycopg.connect(uri) as conn:

        def one(sql: str) -> int:
            row = conn.execute(sql).fetchone()
            return int(row[0]) if row else 0

        state = {
            "messages": one("SELECT count(*) FROM messages"),
            "distinct_keys": one("SELECT count(DISTINCT (user_id, msg_key)) FROM messages"),
            "pending": one("SELECT count(*) FROM messages WHERE episode_id IS NULL"),
            "episodes": one("SELECT count(*) FROM episodes WHERE status = 'active'"),
            "facts": one("SELECT count(*) FROM facts WHERE status = 'active'"),
            "empty_episodes": one(
                "SELECT count(*) FROM episodes e WHERE e.status = 'active' AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.episode_id = e.id)"
            ),
            "unsourced_facts": one("SELECT count(*) FROM facts f WHERE NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = f.id)"),
        }
    problems = []
    if state["messages"] != expected:
        problems.append(f"{state['messages']} messages stored, {expected} expected")
    if state["distinct_keys"] != state["messages"]:
        problems.append("a message stored twice")
    problems += [f"{key}: {state[key]}" for key in ("pending", "empty_episodes", "unsourced_facts") if state[key]]
    state["problems"] = problems
    return state


def pg_stop_trials(count: int, rng: random.Random, work: Path, env: dict, chat: Path) -> dict:
    """``count`` ingests whose server is stopped mid-way, each rerun after the server is back."""
    server = _Server(work / "pg")
    trials = []
    try:
        reference_uri = server.database("reference")
        started = time.perf_counter()
        code, err = finish(nemori(["ingest", str(chat), "--db", reference_uri, "--quiet"], env))
        if code != 0:
            raise SystemExit(f"the uninterrupted ingest on PostgreSQL failed ({code}): {err.strip()[-300:]}")
        reference_s = time.perf_counter() - started
        reference = _pg_state(reference_uri, lines(chat))
        for i in range(count):
            uri = server.database(f"trial{i}")
            how = (signal.SIGINT, signal.SIGQUIT)[i % 2]
            delay = rng.uniform(0.5, max(1.0, reference_s * 0.9))
            proc = nemori(["ingest", str(chat), "--db", uri, "--quiet"], env)
            time.sleep(delay)
            interrupted = proc.poll() is None
            server.stop(how)
            down_s = rng.uniform(0.5, 3.0)  # the server stays down a while, as a restarted service does
            try:
                code, err = finish(proc, timeout=600)
            finally:
                time.sleep(down_s)
                server.start()
            # Exit 4 with one line when the run touched the server after the stop; exit 0 when it had written
            # everything by then (its last seconds are the core's preparation, in the model): then the memory
            # must be whole before any rerun.
            problems = _verdict(code, err, 4 if code != 0 else 0)
            complete_before_rerun = None
            if code == 0:
                complete_before_rerun = _pg_state(uri, lines(chat))
                problems += [f"exit 0 but {p}" for p in complete_before_rerun["problems"]]
            rerun_code, rerun_err = finish(nemori(["ingest", str(chat), "--db", uri, "--quiet"], env))
            state = _pg_state(uri, lines(chat))
            state["problems"] = problems + state["problems"] + _verdict(rerun_code, rerun_err, 0)
            trial = {
                "stop": "fast" if how == signal.SIGINT else "immediate",
                "after_s": round(delay, 2),
                "interrupted": interrupted,
                "exit": code,
                "said": _said(err)[-1] if _said(err) else "",
                **state,
            }
            trials.append(trial)
            print(
                f"pg stop {i + 1}/{count}: {trial['stop']} after {trial['after_s']} s, exit {code}: {trial['problems'] or 'ok'}",
                file=sys.stderr,
            )
    finally:
        server.close()
    return {"reference": {"seconds": round(reference_s, 1), **reference}, "trials": trials}


# -- MCP over stdio -----------------------------------------------------------------


def _server_params(db: Path, env: dict, user: str):
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable, args=["-m", "nemori_cli", "mcp", "--db", str(db), "--user", user], env=env, cwd=str(REPO)
    )


def _chat_messages(chat: Path) -> list[dict]:
    rows = [json.loads(line) for line in chat.read_text().splitlines() if line.strip()]
    return [
        {"speaker": r["speaker"], "content": r["content"], "timestamp": r["timestamp"], **({"id": str(r["id"])} if "id" in r else {})}
        for r in rows
    ]


def _sqlite_state(db: Path, user: str | None = None) -> dict:
    import apsw

    conn = apsw.Connection(str(db))
    where = "WHERE user_id = ?" if user else ""
    bound = (user,) if user else ()
    messages = conn.execute(f"SELECT count(*) FROM messages {where}", bound).fetchall()[0][0]
    distinct = conn.execute(f"SELECT count(DISTINCT user_id || '/' || msg_key) FROM messages {where}", bound).fetchall()[0][0]
    pending = conn.execute(
        f"SELECT count(*) FROM messages {where} {'AND' if where else 'WHERE'} episode_id IS NULL",
        bound,
    ).fetchall()[0][0]
    integrity = conn.execute("PRAGMA integrity_check").fetchall()[0][0]
    conn.close()
    return {"messages": messages, "distinct_keys": distinct, "pending": pending, "integrity": integrity}


def mcp_two_clients(work: Path, env: dict, chat: Path) -> dict:
    """Two agents on one file at once, one user each, remembering and recalling together."""
    from mcp import Client

    db = work / "mcp-two.db"
    messages = _chat_messages(chat)
    halves = {"ann": messages[: len(messages) // 2], "bob": messages[len(messages) // 2 :]}
    outcomes: dict[str, list] = {}

    async def agent(user: str) -> None:
        said = outcomes.setdefault(user, [])
        async with Client(_server_params(db, env, user)) as client:
            for chunk in (halves[user][:4], halves[user][4:]):
                result = await client.call_tool("remember", {"messages": chunk})
                said.append(("remember", result.is_error, None if result.is_error else result.structured_content.get("added")))
                found = await client.call_tool("recall", {"query": chunk[0]["content"][:40], "limit": 3})
                said.append(("recall", found.is_error, None))

    async def both() -> None:
        await asyncio.gather(agent("ann"), agent("bob"))

    problems = []
    started = time.perf_counter()
    try:
        asyncio.run(both())
    except Exception as e:  # the trial reports what went wrong instead of a result
        problems.append(f"{type(e).__name__}: {e}")
    seconds = time.perf_counter() - started
    errors = [(user, call) for user, calls in outcomes.items() for call in calls if call[1]]
    if errors:
        problems.append(f"calls that failed: {errors}")
    states = {user: _sqlite_state(db, user) for user in halves} if db.exists() else {}
    for user, state in states.items():
        if state["messages"] != len(halves[user]) or state["distinct_keys"] != state["messages"]:
            problems.append(f"{user}: {state['messages']} messages stored, {len(halves[user])} expected")
        if state["integrity"] != "ok":
            problems.append(f"integrity: {state['integrity']}")
    return {"seconds": round(seconds, 1), "calls": sum(len(c) for c in outcomes.values()), "users": states, "problems": problems}


def mcp_bad_calls(work: Path, env: dict, chat: Path) -> dict:
    """Every generated bad call over stdio, one session, on a memory that holds episodes."""
    from mcp import Client

    from tests.support.mcp_bad_calls import bad_calls

    db = work / "mcp-bad.db"
    calls = bad_calls()
    outcomes: list[tuple[str, str]] = []
    problems: list[str] = []

    def counts() -> tuple:
        import apsw

        conn = apsw.Connection(str(db))
        row = tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("messages", "episodes", "facts", "notes"))
        conn.close()
        return row

    async def session() -> bool:
        async with Client(_server_params(db, env, "ann")) as client:
            first = await client.call_tool("remember", {"messages": _chat_messages(chat)[:6]})
            if first.is_error:
                problems.append(f"the good remember failed: {first.content[0].text[:200]}")
            before = counts()
            for tool, arguments in calls:
                try:
                    result = await client.call_tool(tool, arguments)
                    outcomes.append(("error" if result.is_error else "ok", tool))
                except Exception as e:  # the SDK raises for a call it refuses itself (an unknown tool): still an answer
                    outcomes.append((f"raised {type(e).__name__}", tool))
                if counts() != before:
                    problems.append(f"{tool} {str(arguments)[:120]} changed the counts: {before} -> {counts()}")
                    before = counts()
            alive = await client.call_tool("recall", {"query": "climbing", "limit": 2})
            return not alive.is_error

    started = time.perf_counter()
    try:
        alive = asyncio.run(session())
    except Exception as e:  # the session itself broke: the server died
        problems.append(f"the session broke: {type(e).__name__}: {e}")
        alive = False
    if not alive:
        problems.append("the server did not answer a good call at the end")
    writes_passed = [o for o in outcomes if o[0] == "ok" and o[1] in ("remember", "forget")]
    if writes_passed:
        problems.append(f"{len(writes_passed)} bad writes were accepted")
    return {
        "calls": len(calls),
        "errors": sum(o[0] == "error" for o in outcomes),
        "raised_by_the_client": sum(o[0].startswith("raised") for o in outcomes),
        "answered": sum(o[0] == "ok" for o in outcomes),
        "seconds": round(time.perf_counter() - started, 1),
        "problems": problems,
    }


_KILLED_CLIENT = """
import asyncio, json, sys
from mcp import Client, StdioServerParameters
params = StdioServerParameters(**json.loads(sys.argv[1]))
messages = json.loads(sys.argv[2])
async def go():
    async with Client(params) as client:
        print("calling", flush=True)
        await client.call_tool("remember", {"messages": messages})
        print("answered", flush=True)
asyncio.run(go())
"""


def _servers_of(db: Path) -> list[int]:
    """Pids of `nemori mcp` processes serving this file (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mcp" in args and str(db).encode() in args:
            found.append(int(entry.name))
    return found


def mcp_killed_client(rng: random.Random, work: Path, env: dict, chat: Path, trials: int) -> list[dict]:
    """A client killed with SIGKILL while its `remember` builds memory; then a new client sends the same call."""
    from mcp import Client

    messages = _chat_messages(chat)
    results = []
    for i in range(trials):
        db = work / f"mcp-killed-{i}.db"
        params = _server_params(db, env, "ann")
        spec = json.dumps({"command": params.command, "args": params.args, "env": params.env, "cwd": params.cwd})
        client = subprocess.Popen(
            [sys.executable, "-c", _KILLED_CLIENT, spec, json.dumps(messages)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert client.stdout is not None
        client.stdout.readline()  # "calling": the server is up and the call is on its way
        delay = rng.uniform(0.5, 8.0)
        time.sleep(delay)
        interrupted = client.poll() is None
        client.kill()
        client.wait()
        problems = []
        deadline = time.monotonic() + 120  # the server reads EOF on its stdin and ends; a call in flight ends first
        while _servers_of(db) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _servers_of(db)
        if left:
            problems.append(f"a server outlived its client by 120 s: {left}")
            for pid in left:
                os.kill(pid, signal.SIGKILL)
        after_kill = _sqlite_state(db, "ann") if db.exists() else {"messages": 0}

        async def again(params=params):
            async with Client(params) as fresh:
                return await fresh.call_tool("remember", {"messages": messages})

        result = asyncio.run(again())
        if result.is_error:
            problems.append(f"the repeated call failed: {result.content[0].text[:200]}")
        state = _sqlite_state(db, "ann")
        if state["messages"] != len(messages) or state["distinct_keys"] != state["messages"]:
            problems.append(f"{state['messages']} messages stored, {len(messages)} expected")
        if state["pending"]:
            problems.append(f"{state['pending']} messages left pending after the repeated call")
        if state["integrity"] != "ok":
            problems.append(f"integrity: {state['integrity']}")
        results.append(
            {
                "after_s": round(delay, 2),
                "interrupted": interrupted,
                "stored_at_kill": after_kill["messages"],
                **state,
                "problems": problems,
            }
        )
        print(f"mcp killed client {i + 1}/{trials}: after {delay:.1f} s: {problems or 'ok'}", file=sys.stderr)
    return results


# -- special files and permissions --------------------------------------------------


def _special(kind: str, folder: Path) -> tuple[Path, object]:
    if kind == "devnull":
        return Path("/dev/null"), None
    path = folder / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        held.bind(str(path))
        return path, held
    elif kind == "directory":
        path.mkdir()
    elif kind == "loop":
        os.symlink(folder / "loop-b", path)
        os.symlink(path, folder / "loop-b")
    return path, None


def special_files(work: Path, env: dict, chat: Path) -> list[dict]:
    results = []
    for kind in ("devnull", "fifo", "socket", "directory", "loop"):
        for command in (["search", "anything"], ["stats"], ["ingest", str(chat)]):
            folder = work / f"special-{kind}-{command[0]}"
            folder.mkdir()
            path, held = _special(kind, folder)
            before = sorted(p.name for p in folder.iterdir())
            dev_before = sorted(os.listdir("/dev")) if kind == "devnull" else []
            started = time.perf_counter()
            code, err = finish(nemori([*command, "--db", str(path)], env), timeout=120)
            seconds = time.perf_counter() - started
            problems = _verdict(code, err, 4)
            if sorted(p.name for p in folder.iterdir()) != before or (kind == "devnull" and sorted(os.listdir("/dev")) != dev_before):
                problems.append("a file appeared beside it")
            if held is not None:
                held.close()  # type: ignore[attr-defined]
            results.append(
                {
                    "kind": kind,
                    "command": command[0],
                    "exit": code,
                    "seconds": round(seconds, 2),
                    "said": _said(err)[-1:],
                    "problems": problems,
                }
            )
    return results


def _as_nobody(args: list[str], env: dict) -> tuple[int, str]:
    done = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-m", "nemori_cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stderr


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def permissions(work: Path, env: dict, chat: Path, built: Path) -> list[dict] | str:
    """A read-only file and a read-only folder, for nobody: ingest refuses (exit 4, nothing changed), search answers."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return "skipped: needs root and setpriv to become nobody"
    top = Path(tempfile.mkdtemp(prefix="nemori-perm-", dir="/tmp"))
    top.chmod(0o755)
    cache = top / "cache"
    cache.mkdir()
    shutil.chown(cache, "nobody", "nogroup")
    # nobody's own settings folders: those of the caller (pytest's, under root's 0700 temp folder) are not theirs to read.
    nobody_env = {**env, "NEMORI_CACHE_DIR": str(cache), "HOME": str(cache), "XDG_CONFIG_HOME": str(cache), "XDG_DATA_HOME": str(cache)}
    results = []
    try:
        for case in ("read-only file", "read-only folder"):
            folder = top / case.replace(" ", "-")
            folder.mkdir()
            db = folder / "memory.db"
            shutil.copy(built, db)
            if case == "read-only file":
                shutil.chown(folder, "nobody", "nogroup")  # the folder is theirs; the file is root's, mode 644
                db.chmod(0o644)
            else:
                shutil.chown(db, "nobody", "nogroup")  # the file is theirs; the folder is root's, mode 755
                folder.chmod(0o755)
            before = _digest(db)
            listing = sorted(p.name for p in folder.iterdir())
            code, err = _as_nobody(["ingest", str(chat), "--db", str(db), "--user", "someone-new"], nobody_env)
            problems = _verdict(code, err, 4)
            if _digest(db) != before or sorted(p.name for p in folder.iterdir()) != listing:
                problems.append("ingest changed the file or its folder")
            search_code, search_err = _as_nobody(["search", "climbing", "--db", str(db), "--json"], nobody_env)
            ask_code, ask_err = _as_nobody(["ask", "What did they talk about?", "--db", str(db), "--json"], nobody_env)
            # The core's saved state (memory.db.kv, a cache `ask` reads next time) may appear where the folder is writable.
            appeared = sorted(set(p.name for p in folder.iterdir()) - set(listing) - {db.name + ".kv"})
            if _digest(db) != before or appeared:
                problems.append(f"a read changed the file or left {appeared} beside it")
            results.append(
                {
                    "case": case,
                    "ingest_exit": code,
                    "ingest_said": _said(err)[-1:],
                    "search_exit": search_code,
                    "search_said": _said(search_err)[-1:],
                    "ask_exit": ask_code,
                    "problems": problems
                    + ([f"search exited {search_code}: {search_err.strip()[-200:]}"] if search_code != 0 else [])
                    + ([f"ask exited {ask_code}: {ask_err.strip()[-200:]}"] if ask_code != 0 else []),
                }
            )
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return results
