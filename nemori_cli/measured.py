"""The reference ingest that built-in cost estimates are scaled from.

One measured run, recorded here once so that the rates (rates.py) and the call
counts (estimate.py) agree with each other: LoCoMo `conv-26`, sessions 1-5,
ingested with the `small` preset (Qwen2.5-Coder-0.5B, Q4_K_M) on a 2-core
machine, default method (native memory, prediction, integration). Source:
docs/bench/locomo-conv26-1-5-small/report.json (the `nemori` system's costs).

The characters are those of the messages' content as
`pipeline.readers.read_locomo` reads them (speaker names and timestamps not
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
WINDOW = 20
INGEST_SECONDS = 405.3  # wall time of the whole ingest, embedding included

STAGES: dict[str, StageCost] = {
    "partition": StageCost(7, 5_862, 126, 82.31),
    "narration": StageCost(15, 6_227, 1_638, 159.91),
    "integration": StageCost(1, 178, 6, 2.28),
    "prediction": StageCost(8, 800, 298, 23.32),
    "distillation": StageCost(15, 8_696, 483, 129.25),
    "consolidation": StageCost(2, 243, 12, 5.53),
}

PROMPT_TOKENS = sum(s.prompt_tokens for s in STAGES.values())  # 22,006
OUTPUT_TOKENS = sum(s.output_tokens for s in STAGES.values())  # 2,563
LLM_SECONDS = sum(s.seconds for s in STAGES.values())  # 402.6 of the 405.3 s
