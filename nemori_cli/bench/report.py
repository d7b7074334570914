"""A run's records turned into the figures: scores per question group and overall, and costs, as JSON and Markdown.

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


# -- Markdown ----------------------------------------------------------------


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _num(value, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def markdown(report: dict, *, groups: tuple[str, ...], score_keys: tuple[str, ...], title: str) -> str:
    config, systems = report["config"], report["systems"]
    lines = [f"# {title}", ""]
    lines.append(
        f"Model `{config.get('model', {}).get('name')}`, embedder `{config.get('embedder', {}).get('name')}`, "
        f"judge `{report.get('judge') or 'none'}`; data `{config.get('data', {}).get('file')}` "
        f"(sha256 {str(config.get('data', {}).get('sha256', ''))[:12]}…); {config.get('scope', '')}. "
        "Scores are ×100; the judge column counts only questions the judge labelled."
    )
    lines.append("")
    split = config.get("split")
    lines.append(
        f"Split: **{split}** ({'choices are made on it' if split == 'tune' else 'run once to check choices made elsewhere'})."
        if split
        else "Split: not named (a run for neither tuning nor confirming)."
    )
    lines.append("")
    present = [g for g in groups if any(g in s["groups"] for s in systems.values())]
    main_key = score_keys[0]
    lines.append(f"## Scores ({main_key} by question group, then overall)")
    lines.append("")
    header = ["system", *present, "n", *score_keys, "judge (labelled)", "failed"]
    rows = []
    for name, s in systems.items():
        o = s["overall"]
        rows.append(
            [
                f"`{name}`",
                *[_pct(s["groups"].get(g, {}).get(main_key)) for g in present],
                str(o["questions"]),
                *[_pct(o.get(k)) for k in score_keys],
                f"{_pct(o['judge'])} ({o['judged']})",
                str(o["failed_answers"]),
            ]
        )
    lines += _table(header, rows)
    lines += _paired_markdown(report, main_key)
    if report["benchmark"] == "longmemeval":
        lines += ["", "Task-averaged and abstention accuracy:", ""]
        lines += _table(
            ["system", "judge task-avg", "judge abstention", "match task-avg", "match abstention", "abstention questions"],
            [
                [
                    f"`{n}`",
                    _pct(s["overall"].get("judge_task_averaged")),
                    _pct(s["overall"].get("judge_abstention")),
                    _pct(s["overall"].get("match_task_averaged")),
                    _pct(s["overall"].get("match_abstention")),
                    str(s["overall"].get("abstention_questions")),
                ]
                for n, s in systems.items()
            ],
        )
        if any(s["groups"].get(g, {}).get("judge") is not None for s in systems.values() for g in present):
            lines += ["", "Judge accuracy by question type:", ""]
            lines += _table(
                ["system", *present],
                [[f"`{n}`", *[_pct(s["groups"].get(g, {}).get("judge")) for g in present]] for n, s in systems.items()],
            )
    lines += ["", "## Costs", ""]
    rows = []
    for name, s in systems.items():
        c = s["costs"]
        rows.append(
            [
                f"`{name}`",
                _num(c["ingest_seconds"], 1),
                _num(c["llm_calls"]),
                _num(c["prompt_tokens"]),
                _num(c["completion_tokens"]),
                _num(c["fallbacks"]),
                _num(c["storage"].get("entries")),
                _num(c["storage"].get("tokens")),
                _num(c["db_bytes"] / 1024, 0),
                _num(c["context_tokens_mean"]),
                _num(c.get("read_tokens_mean")),
                _pct(c.get("copied_share")),
                _pct(c.get("chat_share")),
                f"{_num(c['search_ms_p50'], 1)} / {_num(c['search_ms_p95'], 1)}",
                f"{_num(c['answer_ms_p50'])} / {_num(c['answer_ms_p95'])}",
            ]
        )
    lines += _table(
        [
            "system",
            "ingest s",
            "LLM calls",
            "tokens in",
            "tokens out",
            "fallbacks",
            "entries",
            "stored tokens",
            "db KiB",
            "context tokens (mean)",
            "tokens read (mean)",
            "copied lines %",
            "not an answer %",
            "search ms p50 / p95",
            "answer ms p50 / p95",
        ],
        rows,
    )
    lines += _storage_table(systems)
    stage_names = [st for st in INGEST_STAGES if any(st in s["costs"]["stages"] for s in systems.values())]
    if stage_names:
        lines += ["", "Ingest LLM cost by stage (seconds; calls; tokens in + out):", ""]
        rows = []
        for name, s in systems.items():
            stages = s["costs"]["stages"]
            rows.append(
                [f"`{name}`"]
                + [
                    f"{stages[st]['seconds']:.1f}; {stages[st]['calls']}; {stages[st]['prompt_tokens']:,} + {stages[st]['completion_tokens']:,}"
                    if st in stages
                    else "–"
                    for st in stage_names
                ]
            )
        lines += _table(["system", *stage_names], rows)
    noted = [(n, s) for n, s in systems.items() if s["costs"]["notes"]]
    if noted:
        lines += ["", "Notes:", ""]
        for n, s in noted:
            lines.append(
                f"- `{n}`, {s['costs']['answers_with_notes']} of {s['overall']['questions']} answers: " + "; ".join(s["costs"]["notes"])
            )
    lines += _losses_markdown(report)
    lines += ["", "Systems:", ""] + [f"- `{n}`: {s['description']}" for n, s in systems.items()]
    return "\n".join(lines) + "\n"


def _signed(value: float) -> str:
    return f"{100 * value:+.1f}"


def _paired_markdown(report: dict, key: str) -> list[str]:
    comparisons = report.get("paired") or {}
    if not comparisons:
        return []
    lines = [
        "",
        f"## Against `{report['against']}` (paired over the same questions)",
        "",
        f"Mean difference in {key} ×100 with a paired bootstrap 95% interval ({paired.RESAMPLES:,} resamples of the questions, "
        f"seed {paired.SEED}); wins / ties / losses per question, and those by more than {paired.CLEAR} F1. "
        "A difference whose interval holds 0 is not shown to be one.",
        "",
    ]
    rows = [
        [
            f"`{name}`",
            str(c["questions"]),
            _signed(c["mean_difference"]),
            f"[{_signed(c['ci95'][0])}, {_signed(c['ci95'][1])}]",
            "yes" if c["excludes_zero"] else "no",
            f"{c['wins']} / {c['ties']} / {c['losses']}",
            f"{c['clear_wins']} / {c['clear_losses']}",
        ]
        for name, c in comparisons.items()
    ]
    return lines + _table(["system", "n", "difference", "95% interval", "excludes 0", "wins / ties / losses", "clear wins / losses"], rows)


def _cell(text) -> str:
    """A table cell: one line, pipes escaped, long text cut."""
    value = " ".join(str(text if text is not None else "–").split()).replace("|", "\\|")
    return value if len(value) <= 120 else value[:117] + "..."


def _losses_markdown(report: dict) -> list[str]:
    comparisons = {n: c for n, c in (report.get("paired") or {}).items() if c["largest_losses"]}
    if not comparisons:
        return []
    lines = ["", f"## Largest losses against `{report['against']}`", ""]
    for name, c in comparisons.items():
        lines += [f"`{name}`:", ""]
        rows = [
            [
                _cell(loss["question"]),
                _cell(loss["gold"]),
                _cell(loss["answer"]),
                _cell(loss["reference_answer"]),
                _signed(loss["difference"]),
                f"{_pct(loss['evidence_recall'])} / {_pct(loss['reference_evidence_recall'])}",
            ]
            for loss in c["largest_losses"]
        ]
        lines += _table(["question", "gold", "answer", f"`{report['against']}`'s answer", "difference", "evidence recall (both)"], rows)
        lines.append("")
    return lines


def _storage_table(systems: dict) -> list[str]:
    """What each memory keeps, counted as the Nemori paper's storage table does, and relative to the first system."""
    if not any(s["costs"]["storage"].get("entries") for s in systems.values()):
        return []
    first = next(iter(systems.values()))["costs"]["storage"]
    kinds = [k for k in ("episodes", "facts", "notes", "summary") if any(s["costs"]["storage"].get(k) for s in systems.values())]
    rows = []
    for name, s in systems.items():
        st = s["costs"]["storage"]
        share = f"{st['tokens'] / first['tokens'] * 100:.0f}%" if first.get("tokens") and st.get("tokens") is not None else "–"
        links = f"{_num(st.get('links'))} / {_num(st.get('evolved'))}" if "links" in st else "–"
        rows.append(
            [
                f"`{name}`",
                _num(st.get("entries")),
                _num(st.get("characters")),
                _num(st.get("tokens")),
                share,
                *[_num(st.get(k)) for k in kinds],
                links,
            ]
        )
    header = ["system", "entries", "characters", "tokens", "tokens vs first row", *kinds, "note links / evolved notes"]
    return [
        "",
        "Storage (entries, characters and tokens of what the memory keeps for answering, as the Nemori paper's Table 7 counts them):",
        "",
        *_table(header, rows),
    ]


def write(out: Path, report: dict, text: str) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    (out / "report.md").write_text(text)
