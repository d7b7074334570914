"""What a fallback between two recorded systems would have scored, from a bench folder's answers (no model runs).

    .venv/bin/python scripts/fallback_sim.py FOLDER PRIMARY FALLBACK REFERENCE

For each question answered by all three, PRIMARY's answer is kept unless it
is not an answer (a copied chat line, a pleasantry, a first-person line or
the question said back: bench/metrics.chat_line); then FALLBACK's answer is
taken, as if the answer road had asked again by FALLBACK's road. Greedy
decoding makes FALLBACK's recorded answer the one it would give. Prints the
means and paired intervals against REFERENCE and against PRIMARY.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nemori_cli.bench import locomo, paired
from nemori_cli.bench.metrics import chat_line


def main(folder: str, primary: str, fallback: str, reference: str) -> None:
    records = [json.loads(line) for line in (Path(folder) / "results.jsonl").read_text().splitlines() if line.strip()]
    answers = {(r["system"], r["unit"], r["qid"]): locomo.rescore(r) for r in records if r.get("kind") == "answer"}
    keys = [(u, q) for (s, u, q) in answers if s == primary and (fallback, u, q) in answers and (reference, u, q) in answers]
    simulated, used = {}, 0
    for key in keys:
        first = answers[(primary, *key)]
        if first.get("copied") or chat_line(first["answer"], first["question"]):
            simulated[key], used = answers[(fallback, *key)]["set_f1"], used + 1
        else:
            simulated[key] = first["set_f1"]
    kept = {k: answers[(primary, *k)]["set_f1"] for k in keys}
    ref = {k: answers[(reference, *k)]["set_f1"] for k in keys}
    n = len(keys)
    print(
        f"{n} questions, fallback taken {used} times: {primary} {100 * sum(kept.values()) / n:.1f}, "
        f"with fallback {100 * sum(simulated.values()) / n:.1f}, {reference} {100 * sum(ref.values()) / n:.1f}"
    )
    for name, other in ((reference, ref), (primary, kept)):
        d = paired.compare("fallback", name, simulated, other)
        if d is not None:
            print(
                f"against {name}: {100 * d.mean_difference:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}], "
                f"wins/ties/losses {d.wins}/{d.ties}/{d.losses}"
            )


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
