"""`nemori bench` draws its two charts beside report.md on every report, and report.md links them."""

from __future__ import annotations

import shutil

from tests.conftest import REPO
from tests.unit.fake_ingest import nemori

PNG = b"\x89PNG\r\n\x1a\n"
RECORDED = REPO / "docs" / "bench" / "never-worse-conv26-1-5-run1"  # a real run's records (no model needed to report them)


def _folder(tmp_path, records: str | None = None):
    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(RECORDED / "config.json", out / "config.json")
    if records is None:
        shutil.copy(RECORDED / "results.jsonl", out / "results.jsonl")
    else:
        (out / "results.jsonl").write_text(records)
    return out


def test_a_report_writes_both_charts_and_links_them(tmp_path):
    out = _folder(tmp_path)
    result = nemori("bench", "report", out)
    assert result.exit_code == 0, result.output
    for name in ("scores.png", "groups.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5_000, f"{name} is not a drawn PNG"
    text = (out / "report.md").read_text()
    assert "## Charts" in text and "](scores.png)" in text and "](groups.png)" in text


def test_a_report_with_no_answers_draws_nothing_and_links_nothing(tmp_path):
    out = _folder(tmp_path, records="")
    result = nemori("bench", "report", out)
    assert result.exit_code == 0, result.output
    assert not (out / "scores.png").exists() and not (out / "groups.png").exists()
    assert "## Charts" not in (out / "report.md").read_text()


def test_charts_are_drawn_again_from_the_records(tmp_path):
    """A rebuilt report redraws the charts: a stale picture never sits beside a new table."""
    out = _folder(tmp_path)
    (out / "scores.png").write_bytes(b"stale")
    assert nemori("bench", "report", out).exit_code == 0
    assert (out / "scores.png").read_bytes().startswith(PNG)
