"""`nemori forget`: deletes are complete, keep what others still need, and leave no bytes behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nemori_cli.embed.base import identity
from nemori_cli.errors import StoreError
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import forget
from nemori_cli.store import messages as message_sql
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import REPO, sqlite_only
from tests.support.memory_rows import add_episode, add_fact, add_summary, fill_user, odd_vector, supersede

SECRET = "Zyxquorbian"  # alice's made-up word: must not survive in the file


def _user_tables(db) -> list[str]:
    return [n for n in db.table_names() if "user_id" in db.columns(n)]


def _rows_of(db, user) -> dict[str, int]:
    counts = {t: db.one(f"SELECT count(*) AS n FROM {t} WHERE user_id = ?", (user,))["n"] for t in _user_tables(db)}
    counts["fact_sources"] = db.one(
        "SELECT count(*) AS n FROM fact_sources WHERE fact_id IN (SELECT id FROM facts WHERE user_id = ?)", (user,)
    )["n"]
    return counts


def _pieces(vector: np.ndarray) -> list[bytes]:
    """A vector's bytes in 16-byte pieces: a whole vector may straddle two overflow pages."""
    raw = vector.tobytes()
    return [raw[i : i + 16] for i in range(0, len(raw), 16)]


def _file_bytes(path: Path) -> bytes:
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


# -- forget --user -------------------------------------------------------------


def test_forget_user_leaves_nothing_behind(db, embedder):
    db.bind_embedder(identity(embedder), embedder.dimensions)
    fill_user(db, embedder, "alice", SECRET, vector_seed=1000)
    fill_user(db, embedder, "bob", "Plimsoll")
    bob_before = _rows_of(db, "bob")
    alice_pieces = [p for k in range(4) for p in _pieces(odd_vector(1000 + k))]
    db.checkpoint()
    in_file = db.engine == "sqlite"  # on PostgreSQL the rows are checked; the server frees their space at VACUUM
    if in_file:
        assert sum(p in _file_bytes(db.path) for p in alice_pieces) > len(alice_pieces) // 2  # else the check below proves nothing

    with db.transaction():
        counts = forget.forget_user(db, "alice")
    forget.make_physical(db, vacuum=True)

    assert counts["messages"] == 5 and counts["episodes"] == 2 and counts["facts"] == 2
    assert counts["fact_sources"] == 3 and counts["episode_vec"] == 2 and counts["fact_vec"] == 2
    assert {t: n for t, n in _rows_of(db, "alice").items() if n} == {}
    for table in ("episode_vec", "fact_vec"):
        assert db.vector_search(table, "alice", odd_vector(1000), 10) == []
    for fts in ("episode_fts", "fact_fts"):
        assert db.text_search(fts, "alice", [SECRET.lower()], 10) == []
    assert _rows_of(db, "bob") == bob_before
    assert fact_sql.text_search(db, "bob", "Plimsoll coffee", 5)  # bob's indexes still answer

    for closed in (False, True) if in_file else ():  # make_physical alone must have done it; closing changes nothing
        if closed:
            db.close()
        data = _file_bytes(db.path)
        assert SECRET.lower().encode() not in data.lower()
        assert b"alice" not in data.lower()
        assert not [p for p in alice_pieces if p in data]


def test_forget_user_with_nothing_stored_is_an_error(db):
    with pytest.raises(StoreError, match="nothing stored for user nobody"), db.transaction():
        forget.forget_user(db, "nobody")


# -- forget episode ------------------------------------------------------------


@pytest.fixture
def story(db, embedder):
    """E1 (merged from part P), E2 beside it, bob's E3; facts and summaries across them."""
    db.bind_embedder(identity(embedder), embedder.dimensions)
    s = {}
    with db.transaction():
        s["P"] = add_episode(db, embedder, "alice", "early part", "alice first mentioned the kayak", "part", n=1)
        s["E1"] = add_episode(db, embedder, "alice", "kayak trip", "alice kayaked the fjord", "kayak", n=2)
        supersede(db, "episodes", s["P"], s["E1"])
        s["E2"] = add_episode(db, embedder, "alice", "gym", "alice went bouldering", "gym", n=2)
        s["E3"] = add_episode(db, embedder, "bob", "kayak", "bob kayaked too", "bobkayak", n=2)
        s["only_e1"] = add_fact(db, embedder, "alice", "alice owns a red kayak", [s["E1"]])
        s["shared"] = add_fact(db, embedder, "alice", "alice likes water sports", [s["E1"], s["E2"]])
        s["older"] = add_fact(db, embedder, "alice", "alice climbs twice a week", [s["E2"]])
        supersede(db, "facts", s["older"], s["only_e1"])  # made-up, but the chain is what counts
        s["only_part"] = add_fact(db, embedder, "alice", "alice wants a kayak", [s["P"]])
        s["bob_fact"] = add_fact(db, embedder, "bob", "bob kayaks", [s["E3"]])
        s["S1"] = add_summary(db, "alice", "alice climbs", s["E2"])
        s["S2"] = add_summary(db, "alice", "alice climbs and kayaks", s["E1"])
        s["S3"] = add_summary(db, "alice", "alice climbs, kayaks, climbs again", s["E2"])
        s["bob_summary"] = add_summary(db, "bob", "bob kayaks", s["E3"])
    return s


def test_forget_episode_removes_what_only_it_gave(db, embedder, story):
    s = story
    with db.transaction():
        counts = forget.forget_episode(db, "alice", s["E1"])
    forget.make_physical(db)

    assert counts == {"episodes": 2, "messages": 3, "facts": 2, "facts_restored": 1, "fact_links": 3, "summaries": 2}
    assert {r["id"] for r in db.query("SELECT id FROM episodes")} == {s["E2"], s["E3"]}
    assert db.query("SELECT id FROM messages WHERE episode_id IN (?, ?)", (s["P"], s["E1"])) == []
    assert len(message_sql.all_messages(db, "alice")) == 2  # E2's
    assert db.query("SELECT rowid FROM episode_fts WHERE rowid IN (?, ?)", (s["P"], s["E1"])) == []
    assert db.query("SELECT rowid FROM episode_vec WHERE rowid IN (?, ?)", (s["P"], s["E1"])) == []

    left = fact_sql.by_ids(db, "alice", [s["only_e1"], s["shared"], s["older"], s["only_part"]])
    assert set(left) == {s["shared"], s["older"]}
    assert left[s["shared"]].source_episode_ids == (s["E2"],)  # just the link went
    restored = left[s["older"]]
    assert (restored.status, restored.superseded_by, restored.superseded_reason) == ("active", None, None)
    assert db.one("SELECT superseded_at FROM facts WHERE id = ?", (s["older"],))["superseded_at"] is None
    # It never left the indexes, so search finds it again.
    assert s["older"] in [i for i, _ in fact_sql.text_search(db, "alice", "climbs twice", 5)]
    assert s["older"] in [i for i, _ in fact_sql.vector_search(db, "alice", embedder.embed_query("alice climbs twice a week"), 5)]
    assert db.query("SELECT rowid FROM fact_fts WHERE rowid IN (?, ?)", (s["only_e1"], s["only_part"])) == []
    assert db.query("SELECT rowid FROM fact_vec WHERE rowid IN (?, ?)", (s["only_e1"], s["only_part"])) == []

    assert [r["id"] for r in db.query("SELECT id FROM summaries WHERE user_id = 'alice'")] == [s["S1"]]
    assert db.one("SELECT id FROM summaries WHERE user_id = 'bob'")["id"] == s["bob_summary"]
    assert fact_sql.get(db, "bob", s["bob_fact"]) is not None and episode_sql.count(db, "bob") == 1


def test_forget_episode_refuses_unknown_and_merged_ids(db, story):
    s = story
    with pytest.raises(StoreError, match="no episode 999 for user alice"), db.transaction():
        forget.forget_episode(db, "alice", 999)
    with pytest.raises(StoreError, match=f"no episode {s['E3']} for user alice"), db.transaction():  # bob's
        forget.forget_episode(db, "alice", s["E3"])
    with pytest.raises(StoreError, match=f"merged into E{s['E1']}; forget E{s['E1']}"), db.transaction():
        forget.forget_episode(db, "alice", s["P"])
    assert db.one("SELECT count(*) AS n FROM episodes")["n"] == 4


def test_superseded_fact_without_index_rows_stays_superseded(db, story):
    s = story
    with db.transaction():
        db.conn.execute("DELETE FROM fact_vec WHERE rowid = ?", (s["older"],))
        forget.forget_episode(db, "alice", s["E1"])
    f = fact_sql.get(db, "alice", s["older"])
    assert f.status == "superseded" and f.superseded_by is None
    assert f"F{s['only_e1']} was forgotten" in f.superseded_reason


def test_forgotten_episode_is_gone_from_the_file_without_vacuum(db, embedder):
    """Secure delete + FTS optimize + checkpoint; vec0 zeroes the vector's slot in a chunk still in use."""
    sqlite_only(db, "PostgreSQL frees a deleted row's bytes at VACUUM, which docs/RELIABILITY.md tells users to run")
    db.bind_embedder(identity(embedder), embedder.dimensions)
    odd = odd_vector(7)
    with db.transaction():
        keep = add_episode(db, embedder, "alice", "gym", "alice went bouldering", "gym")
        gone = add_episode(db, embedder, "alice", "secret", f"alice visited {SECRET} island", "island", vector=odd)
        add_fact(db, embedder, "alice", f"alice knows {SECRET} island", [gone])
    db.checkpoint()
    before = _file_bytes(db.path)
    assert any(p in before for p in _pieces(odd)) and SECRET.lower().encode() in before.lower()

    with db.transaction():
        forget.forget_episode(db, "alice", gone)
    forget.make_physical(db)
    assert episode_sql.get(db, "alice", keep) is not None
    data = _file_bytes(db.path)  # connection still open: the checkpoint, not close(), folded the WAL in
    assert not [p for p in _pieces(odd) if p in data]
    assert SECRET.lower().encode() not in data.lower()


# -- forget fact ---------------------------------------------------------------


def test_forget_fact_removes_it_and_the_chain_it_superseded(db, embedder):
    db.bind_embedder(identity(embedder), embedder.dimensions)
    with db.transaction():
        e = add_episode(db, embedder, "alice", "moves", "alice moved twice", "moves")
        a = add_fact(db, embedder, "alice", "alice lives in Oslo", [e])
        b = add_fact(db, embedder, "alice", "alice lives in Bergen", [e])
        c = add_fact(db, embedder, "alice", "alice lives in Tromso", [e])
        other = add_fact(db, embedder, "alice", "alice has a cat", [e])
        supersede(db, "facts", a, b)
        supersede(db, "facts", b, c)

    with db.transaction():
        assert forget.forget_fact(db, "alice", b) == {"facts": 2, "fact_links": 2}
    assert set(fact_sql.by_ids(db, "alice", [a, b, c, other])) == {c, other}
    with db.transaction():
        assert forget.forget_fact(db, "alice", c) == {"facts": 1, "fact_links": 1}
    forget.make_physical(db)

    assert [f.id for f in fact_sql.list_all(db, "alice", include_superseded=True)] == [other]
    gone = (a, b, c)
    for table, column in (("fact_sources", "fact_id"), ("fact_fts", "rowid"), ("fact_vec", "rowid")):
        assert db.query(f"SELECT {column} FROM {table} WHERE {column} IN (?, ?, ?)", gone) == []
    assert fact_sql.text_search(db, "alice", "lives", 5) == []
    assert episode_sql.get(db, "alice", e) is not None  # the episode stays
    with pytest.raises(StoreError, match=f"no fact {a} for user alice"), db.transaction():
        forget.forget_fact(db, "alice", a)


# -- the command ---------------------------------------------------------------


def _cli(*args: str, check_modules: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    code = "import sys; from nemori_cli.cli.app import main; sys.argv = ['nemori', *sys.argv[1:]]\n"
    if check_modules:  # forget must never load a model library
        code += (
            "try:\n    main()\nfinally:\n"
            "    heavy = [m for m in ('torch', 'sentence_transformers', 'llama_cpp', 'nemori_cli.embed.sentence',"
            " 'nemori_cli.llm.llamacpp') if m in sys.modules]\n"
            "    sys.stderr.write(f'HEAVY={heavy}\\n')\n"
        )
    else:
        code += "main()\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


@pytest.fixture
def db_file(tmp_path, embedder) -> tuple[Path, dict]:
    path = tmp_path / "cli.db"
    db = SqliteStore(path)
    db.bind_embedder(identity(embedder), embedder.dimensions)
    ids = {}
    with db.transaction():
        ids["bob_e"] = add_episode(db, embedder, "bob", "bob kayak", "bob kayaked", "bobtopic")
        add_fact(db, embedder, "bob", "bob kayaks", [ids["bob_e"]])
    fill_user(db, embedder, "alice", SECRET)
    db.close()
    return path, ids


def test_cli_refuses_a_whole_user_without_yes_off_a_terminal(db_file):
    path, _ = db_file
    run = _cli("forget", "user", "alice", "--db", str(path))
    assert run.returncode == 2
    assert run.stderr.splitlines() == ["nemori: error: refusing to forget user alice without --yes"]
    db = SqliteStore(path, create=False)
    assert db.one("SELECT count(*) AS n FROM messages WHERE user_id = 'alice'")["n"] == 5
    db.close()


def test_cli_forgets_a_user_with_yes_and_prints_counts(db_file):
    path, _ = db_file
    run = _cli("forget", "--db", str(path), "user", "alice", "--yes", "--json", check_modules=True)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["user"] == "alice"
    assert out["counts"]["messages"] == 5 and out["counts"]["episodes"] == 2 and out["counts"]["facts"] == 2
    assert "HEAVY=[]" in run.stderr
    db = SqliteStore(path, create=False)
    assert db.one("SELECT count(*) AS n FROM messages WHERE user_id = 'alice'")["n"] == 0
    assert db.one("SELECT count(*) AS n FROM messages WHERE user_id = 'bob'")["n"] == 2
    db.close()


def test_cli_forgets_an_episode_and_a_fact(db_file):
    path, ids = db_file
    missing = _cli("forget", "--db", str(path), "--user", "bob", "episode", "999")
    assert missing.returncode == 2  # bad input: an id this user's memory does not hold
    assert missing.stderr.strip() == "nemori: error: no episode 999 for user bob"

    # --user before the subcommand names whose episode it is.
    run = _cli("forget", "--db", str(path), "--user", "bob", "episode", str(ids["bob_e"]), "--json", check_modules=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["counts"]["episodes"] == 1 and "HEAVY=[]" in run.stderr

    fact = _cli("forget", "fact", "2", "--db", str(path), "--user", "alice")  # alice's first fact
    assert fact.returncode == 0, fact.stderr
    assert fact.stdout == "forgot F2 of user alice: facts: 1, fact links: 1\n"


def test_cli_never_creates_a_database(tmp_path):
    path = tmp_path / "absent.db"
    run = _cli("forget", "--db", str(path), "episode", "1")
    assert run.returncode == 4 and "no database" in run.stderr
    assert not path.exists()


def test_cli_asks_on_a_terminal(db_file, monkeypatch):
    from typer.testing import CliRunner

    from nemori_cli.cli import forget_cmd
    from nemori_cli.cli.app import app
    from nemori_cli.errors import NemoriError

    path, _ = db_file
    monkeypatch.setattr(forget_cmd, "_interactive", lambda: True)
    declined = CliRunner().invoke(app, ["forget", "user", "alice", "--db", str(path)], input="n\n")
    assert "Forget everything of user alice (messages: 5, episodes: 2, facts: 2, summaries: 2)" in declined.output
    assert isinstance(declined.exception, NemoriError) and "nothing was forgotten" in declined.exception.message
    accepted = CliRunner().invoke(app, ["forget", "user", "alice", "--db", str(path)], input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert "forgot user alice: " in accepted.output
    db = SqliteStore(path, create=False)
    assert db.one("SELECT count(*) AS n FROM messages WHERE user_id = 'alice'")["n"] == 0
    db.close()


def test_the_old_spelling_of_forgetting_a_user_is_refused_naming_the_new_one(db_file):
    """`--user` says whose memory everywhere else; forgetting a whole user has its own spelling (issue 44)."""
    path, _ = db_file
    for args in (["--user", "alice", "--yes"], ["-u", "alice", "-y"], ["--user", "alice"]):
        run = _cli("forget", "--db", str(path), *args)
        assert run.returncode == 2, run.stderr
        assert run.stderr.splitlines() == [
            "nemori: error: forgetting a whole user is spelled `nemori forget user alice --yes`; "
            "--user only says whose episode, fact or note"
        ]
    twice = _cli("forget", "--user", "bob", "user", "alice", "--yes", "--db", str(path))
    assert twice.returncode == 2 and "name two users" in twice.stderr
    db = SqliteStore(path, create=False)
    assert db.one("SELECT count(*) AS n FROM messages WHERE user_id = 'alice'")["n"] == 5  # nothing was forgotten
    db.close()
