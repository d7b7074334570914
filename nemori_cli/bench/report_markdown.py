"""A run's report (bench/report.py's dict) as Markdown: the scores, the paired comparisons, the costs, storage and losses."""

from __future__ import annotations

from nemori_cli.bench import paired
from nemori_cli.stages import INGEST as INGEST_STAGES


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
