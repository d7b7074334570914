"""The reference ingest that built-in cost estimates are scaled from.

One measured run, recorded here once so that the rates (rates.py) and the call
counts (estimate.py) agree with each other: LoCoMo `conv-26`, sessions 1-5,
ingested with the `small` preset (Qwen2.5-Coder-0.5B, Q4_K_M) on a 2-core
machine, default method (native memory, prediction, integration), with the
KV snapshots of llm/prefix_states.py. Source:
docs/bench/perf-after-small/report.json (the `nemori` system's costs; the run
before the snapshots took 380.8 s, docs/PERFORMANCE.md).

The characters are those of the messages' content as
`importers.locomo.read_locomo` reads them (speaker names and timestamps not
counted), the same measure the dry run and `rates.from_database` use.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StageCost:
    calls: int
    prompt_tokens: int
    output_tokens: int
    seconds: float


MESSAGES = 92
CHARACTERS = 14_379
EPISODES = 15
FACTS = 17
WINDOW = 20
INGEST_SECONDS = 316.75  # wall time of the whole ingest, embedding included

# Prompt tokens are those given to llama.cpp, including the ones it took from
# a KV snapshot rather than read again; the seconds are what they cost.
STAGES: dict[str, StageCost] = {
    "partition": StageCost(7, 5_862, 126, 77.79),
    "narration": StageCost(15, 6_227, 1_574, 133.78),
    "integration": StageCost(1, 178, 6, 2.15),
    "prediction": StageCost(4, 403, 182, 11.39),
    "distillation": StageCost(15, 8_640, 554, 86.91),
    "consolidation": StageCost(2, 243, 12, 2.28),
}

PROMPT_TOKENS = sum(s.prompt_tokens for s in STAGES.values())  # 21,553
OUTPUT_TOKENS = sum(s.output_tokens for s in STAGES.values())  # 2,454
LLM_SECONDS = sum(s.seconds for s in STAGES.values())  # 314.3 of the 316.75 s

# A-MEM's two stages, from `--memory amem` on the same slice (one `note` call
# per message, one `linking` call per message after the first):
# docs/bench/amem-conv26-1-5-small (docs/AMEM.md). That run was on another
# machine (an Intel VM with AVX-512), where nemori's own stages took 223.8 s
# of LLM time against the 314.3 s above; its seconds are scaled by that
# ratio so that every stage here is in the reference machine's time.
_AMEM_MACHINE = 314.3 / 223.8
AMEM_STAGES: dict[str, StageCost] = {
    "note": StageCost(92, 18_878, 4_383, round(215.1 * _AMEM_MACHINE, 1)),
    "linking": StageCost(91, 51_396, 1_756, round(386.4 * _AMEM_MACHINE, 1)),
}


# Storing and indexing an export with `ingest --build later` (no model loaded): a fixed start (imports, the
# embedder loaded, the input read) and a rate per new message, embedding included. Fitted to two runs on the
# generated ChatGPT export (20 and 200 conversations) with the default embedder: docs/PERFORMANCE.md, section 11.
STORE_START_SECONDS = 5.0
STORE_MESSAGES_PER_SECOND = 42.0
