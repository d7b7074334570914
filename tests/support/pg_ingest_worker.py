"""One `nemori ingest` process of the concurrent-writers test: the real CLI and store, the fake LLM and embedder.

    python -m tests.support.pg_ingest_worker URL USER FILE

The fake model waits a little on every call (FAKE_CALL_S), so that four such
processes really do overlap; everything else is what `nemori ingest` runs.
"""

from __future__ import annotations

import sys
import time

from nemori_cli import deps
from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from tests.unit.fake_ingest import answer, nemori

FAKE_CALL_S = 0.02


def slow_answer(messages, schema):
    time.sleep(FAKE_CALL_S)
    return answer(messages, schema)


def main(url: str, user: str, source: str) -> int:
    deps.build_llm = lambda settings: StructuredLLM(FakeBackend(default=slow_answer, model_id="fake"))
    deps.build_embedder = lambda settings, db=None: FakeEmbedder()
    deps.check_embedder_files = lambda settings: None
    result = nemori("ingest", source, "--db", url, "--user", user, "--json")
    sys.stdout.write(result.output)
    if result.exception and not isinstance(result.exception, SystemExit):
        sys.stderr.write(f"{type(result.exception).__name__}: {result.exception}\n")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
