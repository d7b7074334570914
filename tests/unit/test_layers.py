"""The boundaries docs/ARCHITECTURE.md promises, checked on the source so that they stay true.

- the import layers (pyproject.toml's [tool.importlinter] contract, run by import-linter);
- SQL only in store/;
- a memory mode's name compared nowhere but memory/ (everything else asks the mode object);
- the environment read only by config.py.
"""

from __future__ import annotations

import ast
import os
import re

from tests.conftest import REPO

PACKAGE = REPO / "nemori_cli"
SQL = re.compile(
    r"^\s*(SELECT \S|INSERT (OR \w+ )?INTO|UPDATE \w+ SET|DELETE FROM|CREATE (TABLE|VIRTUAL|INDEX|TRIGGER)|DROP (TABLE|INDEX)|ALTER TABLE|PRAGMA \w)"
)


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _strings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node
        elif isinstance(node, ast.JoinedStr):
            # An f-string's text: its constant parts joined (the SQL keyword opens the first one).
            yield ast.Constant(
                "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)), lineno=node.lineno
            )


def test_imports_follow_the_layers():
    from importlinter.cli import lint_imports

    cwd = os.getcwd()
    os.chdir(REPO)  # import-linter reads pyproject.toml from the working directory
    try:
        assert lint_imports(no_cache=True, no_logo=True) == 0, "an import crosses the layers: run `lint-imports` for the details"
    finally:
        os.chdir(cwd)


def test_sql_lives_only_in_the_store():
    found = [
        f"{name}:{s.lineno}: {s.value.strip()[:50]!r}"
        for name, tree in _modules()
        if not name.startswith("store/")
        for s in _strings(tree)
        if SQL.match(s.value)
    ]
    assert found == []


def test_no_module_outside_memory_compares_a_memory_mode_name():
    from nemori_cli.memory.modes import NAMES

    found = []
    for name, tree in _modules():
        if name.startswith("memory/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(isinstance(o, ast.Attribute) and o.attr == "kind" for o in operands):
                    continue  # a hit's kind ("summary") is not a mode
                for operand in operands:
                    values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                    hits = [v.value for v in values if isinstance(v, ast.Constant) and v.value in NAMES]
                    found += [f"{name}:{node.lineno}: {h!r}" for h in hits]
    assert found == []


def test_only_config_reads_the_environment():
    reads, writes = set(), set()
    for name, tree in _modules():
        if name == "config.py":
            continue
        for node in ast.walk(tree):
            if _is_os(node, "environ") or _is_os(node, "getenv"):
                reads.add(f"{name}:{node.lineno}")
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and _is_os(t.value, "environ") for t in node.targets):
                writes.add(f"{name}:{node.lineno}")  # configuring a library for this process: allowed where it says why
    assert sorted(reads - writes) == []


def _is_os(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) and node.value.id == "os"
