"""`nemori inspect fact ID`: a fact, when it was true, and why it exists.

Why: the episode it was distilled from, what the store predicted for that
episode from what it already knew, and what the distillation found in the
messages that the prediction missed (the prediction error the fact is made
of). Loaded in one snapshot, so a concurrent ingest or forget is seen whole
or not at all.
"""

from __future__ import annotations

from nemori_cli.cli.render import episode_json, esc, fact_json, stamp, validity
from nemori_cli.services.read import FactView

# What each way of distilling means for the record, in words (memory/semantic.py's methods).
_NO_PREDICTION = {
    "nothing-evoked": "no prediction: memory knew nothing related yet, so everything new in the messages was kept",
    "prediction-failed": "no prediction: the model's prediction was unusable, so the messages were distilled as if nothing were known",
    "direct": "no prediction: built with --distill direct, which extracts facts from the raw episode without predicting it",
    "forgotten": "the record was blanked when a fact or note it named was forgotten",
}


def load(store, user: str, fact_id: int) -> tuple[FactView, None] | None:
    """The fact and why it exists (services/read.fact), as inspect_cmd._show loads an item; None when the user has no such fact."""
    from nemori_cli.services import read

    view = read.fact(store, user, fact_id)
    return None if view is None else (view, None)


def _prediction_json(v: FactView) -> dict:
    p = v.prediction
    if p is None:
        return {"recorded": False, "note": _not_recorded(v)}
    return {
        "recorded": True,
        "method": p.method,
        "note": _NO_PREDICTION.get(p.method),
        "predicted": p.predicted,
        "evoked": list(p.evoked),
        "missed": None if p.missed is None else list(p.missed),
        "dropped": list(p.dropped),
        "created_at": p.created_at,
    }


def _not_recorded(v: FactView) -> str:
    return f"not recorded (made before schema {v.recorded_since})"


def as_json(v: FactView, _=None) -> dict:
    return {
        **fact_json(v.fact),
        "episode": episode_json(v.episode, with_messages=False) if v.episode else None,  # the one it was distilled from
        "prediction": _prediction_json(v),
        "sources": [episode_json(e, with_messages=False) for e in v.sources.values()],
        "replaced": [fact_json(r) for r in v.replaced],
    }


def as_text(out, v: FactView, _=None) -> None:
    f = v.fact
    out.print(f"[bold]F{f.id}[/bold] ({f.status}, {f.origin}, created {f.created_at}): {esc(f.text)}", soft_wrap=True)
    out.print(f"  {validity(f)} (conversation time)")
    if f.superseded_by:
        out.print(f"[yellow]superseded (ingested {f.superseded_at}): {esc(f.superseded_reason)}[/yellow]", soft_wrap=True)
    for r in v.replaced:
        out.print(f"  replaced F{r.id}: {esc(r.text)}", soft_wrap=True)
    for src in v.sources.values():
        out.print(f"  from E{src.id} {stamp(src.start)}: {esc(src.title)}", soft_wrap=True)
    out.print()
    e = v.episode
    if e is None:
        out.print(f"Distilled from: not recorded (made before schema {v.recorded_since}, or its episode was forgotten)", soft_wrap=True)
    else:
        out.print(f"[bold]Distilled from E{e.id}[/bold] ({stamp(e.start)} – {stamp(e.end)}): [bold]{esc(e.title)}[/bold]", soft_wrap=True)
        out.print(f"  {esc(e.narrative)}", soft_wrap=True)
    _prediction_text(out, v)


def _prediction_text(out, v: FactView) -> None:
    p = v.prediction
    if p is None:
        out.print(f"Prediction: {_not_recorded(v)}")
        return
    if p.method in _NO_PREDICTION:
        out.print(f"Prediction: {_NO_PREDICTION[p.method]}", soft_wrap=True)
    else:
        out.print(f"[bold]Predicted[/bold] from {len(p.evoked)} known fact{'s' if len(p.evoked) != 1 else ''}:")
        for known in p.evoked:
            out.print(f"  [dim]known:[/dim] {esc(known)}", soft_wrap=True)
        out.print(f"  {esc(p.predicted or '')}", soft_wrap=True)
    if p.missed is None:
        if p.method != "forgotten":
            out.print("Missed: the distillation gave no usable answer")
        return
    if p.method == "predicted":
        out.print(
            "[bold]Missed by the prediction[/bold] (what the distillation found in the messages that the prediction did not say):",
            soft_wrap=True,
        )
    else:
        out.print("[bold]Found in the messages[/bold] (nothing was predicted, so all of it counted as new):", soft_wrap=True)
    dropped = set(p.dropped)
    for said in p.missed:
        note = " [dim](dropped: names what the messages never say)[/dim]" if said in dropped else ""
        out.print(f"  - {esc(said)}{note}", soft_wrap=True)
