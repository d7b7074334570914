"""Several processes opening the same new file at once: each gets a usable store.

Switching a new file to WAL needs the exclusive lock; when two connections
each hold a read lock and want it, SQLite answers BUSY without waiting. CI
once saw two writers on one new file end in apsw's BusyError traceback; with
four processes released together it happened in about a quarter of rounds.
"""

from __future__ import annotations

import multiprocessing as mp

from nemori_cli.store.sqlite import SqliteStore

PROCESSES = 4
ROUNDS = 15


def _open_and_write(path: str, results, barrier) -> None:
    barrier.wait()
    try:
        store = SqliteStore(path)
        with store.transaction():
            store.conn.execute("SELECT 1")
        store.conn.close()
        results.put("ok")
    except Exception as e:  # the test reports whatever came instead of a store
        results.put(repr(e))


def test_processes_making_the_same_new_file_all_open_it(tmp_path):
    ctx = mp.get_context("fork")
    failures = []
    for round_ in range(ROUNDS):
        path = str(tmp_path / f"m{round_}.db")
        results, barrier = ctx.Queue(), ctx.Barrier(PROCESSES)
        procs = [ctx.Process(target=_open_and_write, args=(path, results, barrier)) for _ in range(PROCESSES)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        outcomes = [results.get(timeout=5) for _ in procs]
        failures += [o for o in outcomes if o != "ok"]
        store = SqliteStore(path, create=False)
        assert next(iter(store.conn.execute("PRAGMA journal_mode").fetchone().values())) == "wal"
        store.conn.close()
    assert failures == []
