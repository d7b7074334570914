"""A run's records turned into the figures: scores per question group and overall, and costs, as JSON.

bench/report_markdown.py says the same figures as Markdown.

Everything is computed from results.jsonl, so a report can be rebuilt at any
time (`nemori bench report DIR`) and always matches the records beside it.
Scores are means over questions, shown ×100 as the papers do; a judge's
accuracy is over the questions it labelled, with the unlabelled counted.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from nemori_cli.bench import paired
from nemori_cli.bench.metrics import chat_line
from nemori_cli.stages import INGEST as INGEST_STAGES

LOSSES_SHOWN = 5  # per system: its largest per-question losses against the reference


def _mean(values) -> float | None:
    got = [float(v) for v in values if v is not None]
    return sum(got) / len(got) if got else None


def percentile(values, q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    got = sorted(float(v) for v in values if v is not None)
    if not got:
        return None
    rank = max(1, math.ceil(q / 100 * len(got)))
    return got[rank - 1]


def _score_block(answers: list[dict], score_keys: tuple[str, ...]) -> dict:
    block: dict = {"questions": len(answers), "failed_answers": sum(bool(a.get("failed")) for a in answers)}
    for key in score_keys:
        block[key] = _mean(a.get(key) for a in answers)
    judged = [a["judge"] for a in answers if a.get("judge") is not None]
    block["judge"] = sum(judged) / len(judged) if judged else None
    block["judged"] = len(judged)
    return block


def _costs(builds: list[dict], answers: list[dict], own_storage: list[dict] | None = None) -> dict:
    stages: dict[str, dict] = {}
    for build in builds:
        for row in build.get("stages", []):
            if row["stage"] == "answer":
                continue
            into = stages.setdefault(row["stage"], {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "fallbacks": 0})
            for key in into:
                into[key] += row.get(key) or 0
    storage: dict[str, float] = defaultdict(float)
    # The system's own count of what it keeps, where recorded; else the build's
    # (runs recorded before per-system storage existed).
    for record in own_storage or builds:
        for key, value in record.get("storage", {}).items():
            storage[key] += value
    return {
        "memories_built": len(builds),
        "ingest_seconds": round(sum(b["seconds"] for b in builds), 1),
        "resumed_builds": sum(bool(b.get("resumed")) for b in builds),
        "llm_calls": sum(s["calls"] for s in stages.values()),
        "prompt_tokens": sum(s["prompt_tokens"] for s in stages.values()),
        "completion_tokens": sum(s["completion_tokens"] for s in stages.values()),
        "fallbacks": sum(s["fallbacks"] for s in stages.values()),
        "stages": {k: stages[k] for k in sorted(stages, key=lambda s: (INGEST_STAGES.index(s) if s in INGEST_STAGES else 99, s))},
        "storage": dict(storage),
        "db_bytes": sum(b.get("db_bytes", 0) for b in builds),
        "context_tokens_mean": _mean(a.get("context_tokens") for a in answers),
        "context_tokens_p50": percentile((a.get("context_tokens") for a in answers), 50),
        # Evaluated per answer, the rest coming from a cached prefix (None for records from before it was counted).
        "read_tokens_mean": _mean(a["read_tokens"] for a in answers if a.get("read_tokens") is not None),
        "copied_share": _mean(float(a["copied"]) for a in answers if a.get("copied") is not None),
        # A copied line, a pleasantry, a first-person line or the question said back: not an answer.
        "chat_share": _mean(float(bool(a.get("copied")) or chat_line(a.get("answer", ""), a.get("question", ""))) for a in answers),
        "search_ms_p50": percentile((a.get("search_ms") for a in answers), 50),
        "search_ms_p95": percentile((a.get("search_ms") for a in answers), 95),
        "answer_ms_p50": percentile((a.get("answer_ms") for a in answers), 50),
        "answer_ms_p95": percentile((a.get("answer_ms") for a in answers), 95),
        "answers_with_notes": sum(bool(a.get("note")) for a in answers),
        "notes": sorted({a["note"] for a in answers if a.get("note")})[:5],
    }


def judge_of(records: list[dict], config: dict) -> str | None:
    """The judge whose labels are reported: the configured one, else the one that labelled most."""
    named = (config.get("judge") or {}).get("name")
    if named:
        return named
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        if r.get("kind") == "judgement":
            counts[r["judge"]] += 1
    return max(counts, key=lambda k: counts[k]) if counts else None


def build(
    records: list[dict],
    config: dict,
    *,
    benchmark: str,
    groups: tuple[str, ...],
    score_keys: tuple[str, ...],
    against: str | None = None,
    baselines: tuple[str, ...] = (),
) -> dict:
    """The report as a dict: per system, scores by group and overall, and costs; then each system paired with a reference.

    The reference is ``against``, else the first of ``baselines`` that was
    run, else the first system.
    """
    judge = judge_of(records, config)
    labels = {
        (r["unit"], r["system"], r["qid"]): r["label"]
        for r in records
        if r.get("kind") == "judgement" and r.get("benchmark") == benchmark and r.get("judge") == judge
    }
    answers = [
        {**r, "judge": labels.get((r["unit"], r["system"], r["qid"]))}
        for r in records
        if r.get("kind") == "answer" and r.get("benchmark") == benchmark
    ]
    builds = [r for r in records if r.get("kind") == "build" and r.get("benchmark") == benchmark]
    order = list(dict.fromkeys(config.get("systems", []) + [a["system"] for a in answers]))
    systems = {}
    for name in order:
        mine = [a for a in answers if a["system"] == name]
        if not mine:
            continue
        keys = {(a["unit"], a.get("build_key")) for a in mine}
        # The latest record of each memory (a memory whose file was deleted is rebuilt and recorded again).
        latest = {(b["unit"], b["build_key"]): b for b in builds}
        my_builds = [b for k, b in latest.items() if k in keys]
        by_group = {g: _score_block([a for a in mine if a.get("group") == g], score_keys) for g in groups}
        others = sorted({a.get("group") for a in mine} - set(groups), key=str)
        by_group.update({str(g): _score_block([a for a in mine if a.get("group") == g], score_keys) for g in others})
        systems[name] = {
            "description": config.get("system_descriptions", {}).get(name, ""),
            "groups": {g: b for g, b in by_group.items() if b["questions"]},
            "overall": _score_block(mine, score_keys),
            "costs": _costs(my_builds, mine, _own_storage(records, benchmark, name, keys)),
        }
        if benchmark == "longmemeval":
            systems[name]["overall"].update(_longmemeval_extra(mine, groups))
    reference = _reference(list(systems), against, baselines)
    return {
        "benchmark": benchmark,
        "config": config,
        "judge": judge,
        "systems": systems,
        "against": reference,
        "paired": _paired(answers, list(systems), reference, score_keys[0]),
    }


def _reference(names: list[str], against: str | None, baselines: tuple[str, ...]) -> str | None:
    if against is not None:
        if against not in names:
            from nemori_cli.errors import ConfigError

            raise ConfigError(f"--against {against!r}: not a system of this run; systems: {', '.join(names)}")
        return against
    for name in names:
        if name.split("@")[0] in baselines:
            return name
    return names[0] if names else None


def _paired(answers: list[dict], names: list[str], reference: str | None, key: str) -> dict:
    """Each system against the reference over the questions both answered, and its largest losses."""
    if reference is None:
        return {}
    by_system: dict[str, dict] = defaultdict(dict)
    for a in answers:
        if a.get(key) is not None:
            by_system[a["system"]][(a["unit"], a["qid"])] = a
    theirs = by_system.get(reference, {})
    out = {}
    for name in names:
        if name == reference:
            continue
        mine = by_system.get(name, {})
        got = paired.compare(name, reference, {k: a[key] for k, a in mine.items()}, {k: a[key] for k, a in theirs.items()})
        if got is None:
            continue
        both = sorted(set(mine) & set(theirs), key=lambda k: (mine[k][key] - theirs[k][key], str(k)))
        losses = [
            {
                "unit": k[0],
                "qid": k[1],
                "question": mine[k].get("question"),
                "gold": mine[k].get("gold"),
                "answer": mine[k].get("answer"),
                "reference_answer": theirs[k].get("answer"),
                "difference": mine[k][key] - theirs[k][key],
                "evidence_recall": mine[k].get("evidence_recall"),
                "reference_evidence_recall": theirs[k].get("evidence_recall"),
            }
            for k in both[:LOSSES_SHOWN]
            if mine[k][key] - theirs[k][key] < -paired.TIE
        ]
        out[name] = {**got.as_dict(), "score": key, "largest_losses": losses}
    return out


def _own_storage(records: list[dict], benchmark: str, system: str, keys: set) -> list[dict] | None:
    """The latest per-system storage record of each memory this system answered from, if all are recorded."""
    latest = {
        (r["unit"], r.get("build_key")): r
        for r in records
        if r.get("kind") == "storage" and r.get("benchmark") == benchmark and r.get("system") == system
    }
    mine = [latest[k] for k in keys if k in latest]
    return mine if len(mine) == len(keys) else None


def _longmemeval_extra(answers: list[dict], types: tuple[str, ...]) -> dict:
    """Task-averaged accuracy (each type weighs the same) and abstention, by the judge and by the lexical match."""
    out = {}
    for key in ("judge", "match"):
        per_type = [_mean(a.get(key) for a in answers if a.get("question_type") == t) for t in types]
        got = [v for v in per_type if v is not None]
        out[f"{key}_task_averaged"] = sum(got) / len(got) if got else None
        out[f"{key}_abstention"] = _mean(a.get(key) for a in answers if a.get("abstention"))
    out["abstention_questions"] = sum(bool(a.get("abstention")) for a in answers)
    return out


def write(out: Path, report: dict, text: str) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    (out / "report.md").write_text(text)
