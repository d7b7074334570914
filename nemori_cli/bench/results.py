"""A benchmark run's output folder: its configuration, and every finished unit of work as one JSON line.

Resuming means reading results.jsonl back: a memory that was built, or a
question that was answered, is never redone. Each record is written and
flushed to disk before the next piece of work starts, so an interrupted run
loses at most the piece in progress (a half-written last line is dropped on
reading, and counted). A folder is tied to one configuration: resuming with
another model, judge, embedder or data file is refused rather than mixed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from nemori_cli.errors import ConfigError

CONFIG = "config.json"
RESULTS = "results.jsonl"
# What a config entry means when a folder written before it existed lacks it:
# memories were kept in SQLite files before `bench --db`.
ABSENT_MEANS = {"store_engine": "sqlite"}


class ResultLog:
    def __init__(self, out: Path, config: dict, *, identity_keys: tuple[str, ...]):
        """``identity_keys``: the config entries that must match to resume (others may change between runs)."""
        check_resumable(out, config, identity_keys)
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.config = config
        (out / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        self.records: list[dict] = []
        self.dropped_lines = 0
        self._read()

    def _read(self) -> None:
        path = self.out / RESULTS
        if not path.exists():
            return
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                self.records.append(json.loads(line))
            except ValueError:
                self.dropped_lines += 1  # cut short by an interruption; that piece of work is redone

    def find(self, **where) -> dict | None:
        for record in self.records:
            if all(record.get(k) == v for k, v in where.items()):
                return record
        return None

    def of_kind(self, kind: str) -> list[dict]:
        return [r for r in self.records if r.get("kind") == kind]

    def append(self, record: dict) -> None:
        with (self.out / RESULTS).open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records.append(record)


def check_resumable(out: Path, config: dict, keys: tuple[str, ...]) -> None:
    """Refuse a folder that holds a run made another way (or is not a folder); called before any model is loaded."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: is a file, not a folder")
    path = out / CONFIG
    if not path.exists():
        return
    try:
        before = json.loads(path.read_text())
    except ValueError:
        raise ConfigError(f"{path}: not JSON; remove the folder or choose another --out") from None
    for key in keys:
        earlier = before.get(key, ABSENT_MEANS.get(key))
        if earlier != config.get(key):
            raise ConfigError(
                f"{out} holds a run with another {key} ({_short(earlier)} vs {_short(config.get(key))}); choose another --out to compare"
            )


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."
