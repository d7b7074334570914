"""The store's SQL, written for SQLite, said in PostgreSQL's words.

Every module of the store writes one SQL text for both engines: SQLite's
dialect, which is the default engine's and the one the tests grew up with.
The PostgreSQL engine (store/pg.py) passes each statement through
``translate`` once (cached) before psycopg sees it. What differs, and is
rewritten here:

- placeholders: ``?`` becomes ``%s`` (and a literal ``%`` becomes ``%%``,
  which psycopg asks for whenever parameters are given);
- ``INSERT OR IGNORE`` becomes ``INSERT ... ON CONFLICT DO NOTHING``, and
  ``INSERT OR REPLACE`` an upsert on the table's key (REPLACE_KEYS);
- ``x IS ?`` (SQLite's null-safe equality) becomes ``IS NOT DISTINCT FROM``;
- SQLite's two-argument ``min``/``max`` become ``least``/``greatest``;
- ``sum(a = b)`` (a count of true comparisons: SQLite's booleans are 0 and 1)
  becomes ``sum((a = b)::int)``;
- ``round(x, n)`` rounds a numeric, as PostgreSQL has no round for doubles;
- ``json_each(x)`` becomes ``json_array_elements_text(x::json)``, whose
  column is named ``value`` as SQLite's is.

What cannot be rewritten this way (vector and full-text search, the schema,
what forget does to reclaim space) is a method of each engine instead.
No SQL parser is used: the store's statements are few and ours, so a small
scanner that respects string literals is enough, and tests/unit/test_pg_dialect.py
pins each rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

# INSERT OR REPLACE needs the key the row replaces on; only these tables use it.
REPLACE_KEYS = {"episode_predictions": ("episode_id",)}

_COMPARISON = re.compile(r"(?<![<>!=])(=|<>|!=|<=|>=|<|>)(?![=<>])")


def _outside_quotes(sql: str) -> list[tuple[bool, str]]:
    """The text cut into (is a string literal, piece), so rewrites never touch a quoted value."""
    pieces: list[tuple[bool, str]] = []
    i, start, n = 0, 0, len(sql)
    while i < n:
        if sql[i] == "'":
            if start < i:
                pieces.append((False, sql[start:i]))
            j = i + 1
            while j < n:
                if sql[j] == "'" and j + 1 < n and sql[j + 1] == "'":
                    j += 2
                    continue
                if sql[j] == "'":
                    break
                j += 1
            pieces.append((True, sql[i : j + 1]))
            i = start = j + 1
            continue
        i += 1
    if start < n:
        pieces.append((False, sql[start:]))
    return pieces


def _literal_spans(sql: str) -> list[tuple[int, int]]:
    """(start, end) of each string literal in ``sql``."""
    spans, at = [], 0
    for quoted, piece in _outside_quotes(sql):
        if quoted:
            spans.append((at, at + len(piece)))
        at += len(piece)
    return spans


def _call_args(sql: str, open_at: int) -> tuple[list[str], int]:
    """The top-level arguments of the call whose '(' is at ``open_at``, and the index of its ')'."""
    depth, args, begin = 0, [], open_at + 1
    quoted = False
    for i in range(open_at, len(sql)):
        c = sql[i]
        if c == "'":
            quoted = not quoted
        if quoted:
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append(sql[begin:i])
                return args, i
        elif c == "," and depth == 1:
            args.append(sql[begin:i])
            begin = i + 1
    raise ValueError(f"unbalanced parentheses in SQL: {sql[:120]}")


def _rewrite_calls(sql: str, name: str, rewrite: Callable[[list[str]], str | None]) -> str:
    """Each call ``name(...)`` replaced by ``rewrite(args)`` (or left when it returns None), innermost last."""
    pattern = re.compile(rf"\b{name}\s*\(", re.IGNORECASE)
    quoted = _literal_spans(sql)
    out, pos = [], 0
    for m in pattern.finditer(sql):
        if m.start() < pos or any(a <= m.start() < b for a, b in quoted):
            continue  # already rewritten as part of an outer call, or text inside a string literal
        args, close = _call_args(sql, m.end() - 1)
        args = [_rewrite_calls(a, name, rewrite) for a in args]
        new = rewrite(args)
        out.append(sql[pos : m.start()])
        out.append(new if new is not None else f"{sql[m.start() : m.end() - 1]}({','.join(args)})")
        pos = close + 1
    out.append(sql[pos:])
    return "".join(out)


def _has_comparison(expr: str) -> bool:
    return any(not quoted and _COMPARISON.search(piece) for quoted, piece in _outside_quotes(expr))


def _functions(sql: str) -> str:
    sql = _rewrite_calls(sql, "min", lambda a: f"least({','.join(a)})" if len(a) == 2 else None)
    sql = _rewrite_calls(sql, "max", lambda a: f"greatest({','.join(a)})" if len(a) == 2 else None)
    sql = _rewrite_calls(sql, "sum", lambda a: f"sum(({a[0]})::int)" if len(a) == 1 and _has_comparison(a[0]) else None)
    sql = _rewrite_calls(sql, "round", lambda a: f"round(({a[0]})::numeric,{a[1]})" if len(a) == 2 else None)
    sql = _rewrite_calls(
        sql, "json_each", lambda a: f"json_array_elements_text(({a[0]})::json) AS json_each(value)" if len(a) == 1 else None
    )
    return sql


_INSERT_OR = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)\s*\(([^)]*)\)", re.IGNORECASE | re.DOTALL)


def _insert_or(sql: str) -> str:
    m = _INSERT_OR.match(sql)
    if not m:
        return sql
    verb, table, columns = m.group(1).upper(), m.group(2), [c.strip() for c in m.group(3).split(",")]
    body = f"INSERT INTO {table}({m.group(3)})" + sql[m.end() :]
    if verb == "IGNORE":
        return body.rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    key = REPLACE_KEYS.get(table.lower())
    if key is None:
        raise ValueError(f"INSERT OR REPLACE INTO {table}: its key is not known to the PostgreSQL engine (pg_dialect.REPLACE_KEYS)")
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in key)
    return body.rstrip().rstrip(";") + f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@lru_cache(maxsize=256)
def named(sql: str) -> str:
    """A statement with apsw's ``:name`` parameters, with psycopg's ``%(name)s`` instead (``::type`` casts untouched)."""
    out = []
    for quoted, piece in _outside_quotes(sql):
        if quoted:
            out.append(piece.replace("%", "%%"))
            continue
        out.append(_NAMED.sub(lambda m: f"%({m.group(1)})s", piece.replace("%", "%%")))
    return _functions("".join(out))


_NULL_SAFE = re.compile(r"\bIS\s+(NOT\s+)?\?", re.IGNORECASE)


@lru_cache(maxsize=2048)
def translate(sql: str) -> tuple[str, bool]:
    """(PostgreSQL text, whether it takes parameters): statements without ``?`` run as plain scripts (several statements allowed)."""
    sql = _insert_or(sql)
    parameterised = any(not quoted and "?" in piece for quoted, piece in _outside_quotes(sql))
    out = []
    for quoted, piece in _outside_quotes(sql):
        if quoted:
            out.append(piece.replace("%", "%%") if parameterised else piece)
            continue
        piece = _NULL_SAFE.sub(lambda m: "IS DISTINCT FROM ?" if m.group(1) else "IS NOT DISTINCT FROM ?", piece)
        if parameterised:
            piece = piece.replace("%", "%%").replace("?", "%s")
        out.append(piece)
    return _functions("".join(out)), parameterised
