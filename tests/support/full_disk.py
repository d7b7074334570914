"""What a full disk does to nemori: run in a child process under a file-size limit (tests/unit/test_full_disk.py).

The test sets RLIMIT_FSIZE in the child before it starts (preexec_fn); this
script ignores SIGXFSZ, so a write past the limit fails with EFBIG instead of
killing the process, and SQLite meets a disk that takes no more. Usage:

    python -m tests.support.full_disk raw PATH     # apsw alone: what SQLite raises; JSON on stdout
    python -m tests.support.full_disk store PATH   # Pipeline.add_messages, batch after batch, until it fails
    python -m tests.support.full_disk cli ARGS...  # `nemori ARGS` (cli.app.main) with the fake model and embedder

`store` prints a JSON line for every batch committed, then one for the
error: the test knows exactly what must be in the file. `cli` exits as the
command does, with its stderr.
"""

from __future__ import annotations

import json
import signal
import sys
from datetime import datetime, timedelta

BATCH = 20  # messages per unit of work
WORDS = 100  # words per message: a batch is some 150 KB of pages (its text and its full-text index)
DIMENSIONS = 8  # a small embedder: small vector chunks, so the limit is met by the log's growth


def batch(number: int):
    from nemori_cli.domain import IncomingMessage

    start = datetime(2023, 5, 1, 9) + timedelta(days=number)
    return [
        IncomingMessage(
            "Ann",
            f"batch{number} " + " ".join(f"w{number}x{i}x{j}" for j in range(WORDS)),
            start + timedelta(minutes=i),
            source_id=f"b{number}-{i}",
        )
        for i in range(BATCH)
    ]


def say(**what) -> None:
    print(json.dumps(what), flush=True)


def raw(path: str) -> None:
    """Inserts straight through apsw until SQLite refuses: its exception, code and the system's errno."""
    import apsw

    conn = apsw.Connection(path)
    list(conn.execute("PRAGMA journal_mode = WAL"))
    list(conn.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, x TEXT)"))
    committed = 0
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO t(x) VALUES (?)", [("x" * 2000,)] * 50)
            conn.execute("COMMIT")
            committed += 1
        except apsw.Error as e:
            say(
                type=type(e).__name__,
                code=apsw.mapping_extended_result_codes.get(e.extendedresult, str(e.extendedresult)),
                errno=conn.system_errno,
                rolled_back=not conn.in_transaction,
                committed=committed,
            )
            return


def store(path: str) -> None:
    """Batches of messages through the store's own unit of work (what `nemori ingest` stores first)."""
    from nemori_cli.embed.fake import FakeEmbedder
    from nemori_cli.errors import StoreError
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.llm.fake import FakeBackend
    from nemori_cli.pipeline.runner import Pipeline
    from nemori_cli.store.sqlite import SqliteStore

    db = SqliteStore(path)
    pipe = Pipeline(db, "alice", StructuredLLM(FakeBackend()), FakeEmbedder(DIMENSIONS))
    number = 0
    while True:
        try:
            pipe.add_messages(batch(number))
        except StoreError as e:
            say(error=e.message)
            return
        say(committed=number)
        number += 1


def cli(args: list[str]) -> None:
    """The real entry point, its error handling included; only the model and the embedder are fakes."""
    from nemori_cli import deps
    from nemori_cli.cli.app import main
    from nemori_cli.embed.fake import FakeEmbedder
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.llm.fake import FakeBackend
    from tests.unit.isolation_world import echo

    deps.build_llm = lambda settings: StructuredLLM(FakeBackend(default=echo, model_id="fake"))
    deps.build_embedder = lambda settings, db=None: FakeEmbedder(DIMENSIONS)
    deps.check_embedder_files = lambda settings: None
    sys.argv = ["nemori", *args]
    main()


if __name__ == "__main__":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing us
    what, rest = sys.argv[1], sys.argv[2:]
    {"raw": lambda: raw(rest[0]), "store": lambda: store(rest[0]), "cli": lambda: cli(rest)}[what]()
