"""The bench report's two pictures: score against answer time, and the score of each question group.

Systems are compared by where they sit on score against cost, which a table
makes hard to see: `scores.png` puts each system at (answer p50, overall
score), higher and further left being better; `groups.png` has a bar per
system in each question group. Both are drawn with matplotlib's Agg backend
(no display, no GUI toolkit) and written beside report.md, which links them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SCORES_PNG = "scores.png"
GROUPS_PNG = "groups.png"


def write(out: Path, report: dict[str, Any], *, groups: tuple[str, ...], score_key: str) -> list[str]:
    """Draw both charts into ``out``; the file names written (none when no system has a score)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never a window, whatever the environment says
    import matplotlib.pyplot as plt

    for name in (SCORES_PNG, GROUPS_PNG):  # a chart of an earlier report never outlives it
        (out / name).unlink(missing_ok=True)
    systems = {name: s for name, s in report["systems"].items() if s["overall"].get(score_key) is not None}
    if not systems:
        return []
    label = score_key.replace("_", " ")
    written = []

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for name, s in systems.items():
        p50 = s["costs"].get("answer_ms_p50")
        x = (p50 or 0.0) / 1000
        y = 100 * s["overall"][score_key]
        ax.scatter([x], [y], s=40)
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xlabel("answer time, p50 (s)")
    ax.set_ylabel(f"{label} (x100)")
    ax.set_title(f"{report['benchmark']}: {label} against answer time")
    ax.grid(alpha=0.3)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(out / SCORES_PNG)
    plt.close(fig)
    written.append(SCORES_PNG)

    present = [g for g in groups if any(g in s["groups"] for s in systems.values())]
    if present:
        bars = len(present) * len(systems)
        fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.3 * bars + 2)), 4.5), dpi=110)
        width = 0.8 / len(systems)
        for i, (name, s) in enumerate(systems.items()):
            xs = [j + i * width for j in range(len(present))]
            ys = [100 * (s["groups"].get(g, {}).get(score_key) or 0.0) for g in present]
            ax.bar(xs, ys, width=width, label=name)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(present))], present, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(f"{label} (x100)")
        ax.set_title(f"{report['benchmark']}: {label} by question group")
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / GROUPS_PNG)
        plt.close(fig)
        written.append(GROUPS_PNG)
    return written


def markdown(written: list[str]) -> str:
    """The report's section that links the charts."""
    if not written:
        return ""
    lines = ["", "## Charts", ""]
    captions = {SCORES_PNG: "score against answer time (p50), one point per system", GROUPS_PNG: "score by question group"}
    lines += [f"![{captions[name]}]({name})" for name in written]
    return "\n".join(lines) + "\n"
