"""A KV-state snapshot on disk, with the identity of everything that produced it.

A saved state is only valid for the same model file, the same context and
batch settings, the same llama.cpp build and the same prompt prefix. Any
difference, or a file cut short, and ``load`` answers None: the caller builds
the state again. A state is never used on a guess.

Layout: a magic line, one line of JSON (the identity, the prefix digest and
the sizes), the token ids (int32), then llama.cpp's sequence state bytes.
Written to a temporary name and renamed, so a crash leaves the old file or
the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from nemori_cli.llm.prefix_states import Snapshot

MAGIC = b"nemori-kv-state 1\n"


def save(path: Path, snapshot: Snapshot, identity: dict, digest: str) -> int:
    """Write the snapshot; returns the bytes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tokens = np.asarray(snapshot.tokens, dtype=np.int32)
    header = {"identity": identity, "digest": digest, "tokens": int(tokens.size), "state_bytes": len(snapshot.state)}
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            f.write(json.dumps(header, sort_keys=True).encode() + b"\n")
            f.write(tokens.tobytes())
            f.write(snapshot.state)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path.stat().st_size


def load(path: Path, key: str, identity: dict, digest: str | None) -> Snapshot | None:
    """The snapshot saved for exactly this identity and digest (given ``key``, the prompt text it stands for), else None.

    ``digest=None`` takes the state of whatever prefix was saved under this
    identity: only for a caller that keeps no more of it than the tokens it
    shares with its own prompt (an older core that a grown one extends).
    """
    try:
        with open(path, "rb") as f:
            if f.readline() != MAGIC:
                return None
            header = json.loads(f.readline())
            if header.get("identity") != identity or (digest is not None and header.get("digest") != digest):
                return None
            n, size = int(header["tokens"]), int(header["state_bytes"])
            raw = f.read(4 * n)
            state = f.read(size + 1)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if len(raw) != 4 * n or len(state) != size:  # cut short, or longer than it says
        return None
    return Snapshot(key, np.frombuffer(raw, dtype=np.int32).astype(np.intc), state)


def saved_tokens(path: Path, identity: dict) -> tuple[str, np.ndarray] | None:
    """(digest, token ids) of the state saved at ``path`` under this identity, without reading the state itself; else None.

    What an `ask` checks before deciding whether the core is worth reading now: the ids are 4 bytes a token, the
    state about 12 KB a token (``small``), so this reads a few kilobytes of a file of tens of megabytes.
    """
    try:
        with open(path, "rb") as f:
            if f.readline() != MAGIC:
                return None
            header = json.loads(f.readline())
            if header.get("identity") != identity:
                return None
            n = int(header["tokens"])
            raw = f.read(4 * n)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if len(raw) != 4 * n:
        return None
    return str(header.get("digest")), np.frombuffer(raw, dtype=np.int32)


def remove(directory: Path, stem: str) -> int:
    """Remove every state saved under names starting with ``stem``; returns how many went.

    A save killed between its write and its rename leaves ``NAME.kv.tmpPID``:
    it holds the same token ids as a finished one, so it goes too. Whatever
    stands at such a name goes, a folder included (nemori makes none there,
    and whatever it holds was put under this user's name). A path that cannot
    be removed is one StoreError naming it, after the others went.
    """
    from nemori_cli.errors import StoreError

    if not directory.is_dir():
        return 0
    gone, kept = 0, []
    for path in sorted({*directory.glob(f"{stem}*.kv"), *directory.glob(f"{stem}*.kv.tmp*")}):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
            gone += 1
        except OSError as e:
            kept.append(f"{path} ({e.strerror or e})")
    if kept:
        raise StoreError(
            f"could not remove the saved model state {kept[0]}"
            + (f" and {len(kept) - 1} more" if len(kept) > 1 else "")
            + ": remove it by hand"
        )
    return gone
