"""What this machine's SQLite can do, tried on a throwaway in-memory connection (for `nemori doctor`).

The same way in as the store (apsw, then the sqlite-vec extension); each
function raises whatever the library raises, and the doctor says which.
"""

from __future__ import annotations


def sqlite_vec_versions() -> tuple[str, str, str]:
    """(apsw, SQLite, sqlite-vec) versions, once the extension has loaded."""
    import apsw
    import sqlite_vec as vec

    conn = apsw.Connection(":memory:")
    try:
        conn.enable_load_extension(True)
        conn.load_extension(vec.loadable_path())
        version = conn.execute("SELECT vec_version()").fetchall()[0][0]
    finally:
        conn.close()
    return apsw.apswversion(), apsw.sqlite_lib_version(), str(version)


def fts5_finds() -> int:
    """How many rows a full-text query finds in a one-row FTS5 table (1 when FTS5 works)."""
    import apsw

    conn = apsw.Connection(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
        conn.execute("INSERT INTO t(body) VALUES ('doctor probe text')")
        found = conn.execute("SELECT count(*) FROM t WHERE t MATCH 'probe'").fetchall()[0][0]
        return found if isinstance(found, int) else 0
    finally:
        conn.close()
