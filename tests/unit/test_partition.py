from datetime import datetime, timedelta

import numpy as np
import pytest

from nemori_cli.domain import Message
from nemori_cli.pipeline.partition import (
    PartitionSettings,
    partition,
    repair_boundaries,
    similarity_cuts,
    split_on_gaps,
)


def msgs(n, *, gaps=(), start=datetime(2023, 5, 8, 13, 0)):
    """n messages a minute apart; a 3-day silence before each index in ``gaps``."""
    out, t = [], start
    for i in range(n):
        if i in gaps:
            t += timedelta(days=3)
        out.append(Message(i + 1, "u", f"k{i}", "Ann" if i % 2 else "Bob", f"text {i}", t, None, None))
        t += timedelta(minutes=1)
    return out


@pytest.mark.parametrize(
    "raw, n, expected",
    [
        ([], 20, []),
        ([11], 20, [10]),
        ([14, 14, 14, 14, 14, 14], 20, [13]),  # 0.5B's answer in MODELS.md
        ([11, 12, 13, 14, 15, 16], 20, [10]),  # 1.5B's answer: a run collapses to its start
        ([16, 5, 5, 11], 20, [4, 10, 15]),  # unsorted, duplicated
        ([1, 21, 99, -3], 20, []),  # out of range
        ([2], 20, []),  # would leave a 1-message group
        ([19], 20, []),  # would leave a 2-message tail
        ([4, 6], 20, [3]),  # second group too short after the first cut
    ],
)
def test_repair_boundaries(raw, n, expected):
    assert repair_boundaries(raw, n, min_group=3) == expected


def test_split_on_gaps_cuts_only_at_long_silences():
    parts = split_on_gaps(msgs(10, gaps={4, 7}), gap_minutes=120)
    assert [len(p) for p in parts] == [4, 3, 3]


def test_similarity_cuts_bounds_group_size_and_picks_the_valley():
    v = np.zeros((16, 4), dtype=np.float32)
    v[:9, 0] = 1.0  # messages 0-8 on one subject
    v[9:, 1] = 1.0  # 9-15 on another
    cuts = similarity_cuts(v, max_group=12, min_group=3)
    assert cuts == [9]
    assert similarity_cuts(v[:12], max_group=12, min_group=3) == []


def test_model_boundaries_are_used_and_repairs_counted(llm, backend, embedder):
    backend.responses = [{"boundaries": [11, 12, 13, 14]}]
    groups = partition(msgs(20), llm, embedder)
    assert [len(g.messages) for g in groups] == [10, 10]
    assert [g.boundary for g in groups] == ["start", "model"]
    assert [e.kind for e in llm.log.events] == ["repaired"]


def test_time_gap_is_a_boundary_without_asking(llm, backend, embedder):
    backend.responses = [{"boundaries": []}, {"boundaries": []}]
    groups = partition(msgs(20, gaps={10}), llm, embedder)
    assert [g.boundary for g in groups] == ["start", "time-gap"]
    # the model saw each stretch separately, never the gap
    assert [len(s["properties"]["boundaries"]["items"]["enum"]) for _, s in backend.history] == [9, 9]


def test_short_stretches_need_no_call(llm, backend, embedder):
    groups = partition(msgs(4), llm, embedder)
    assert len(groups) == 1 and backend.history == []


def test_unusable_answers_fall_back_to_a_similarity_split(llm, backend, embedder):
    backend.responses = ["not json", '{"boundaries": "x"}']
    groups = partition(msgs(20), llm, embedder)
    assert sum(len(g.messages) for g in groups) == 20
    assert all(len(g.messages) <= PartitionSettings().max_group for g in groups)
    assert {g.boundary for g in groups[1:]} == {"fallback"}
    assert [e.kind for e in llm.log.events] == ["fallback"]
    assert llm.log.calls[-1].outcome == "failed" and llm.log.calls[-1].attempts == 2


def test_schema_bounds_positions_and_count(llm, backend, embedder):
    backend.responses = [{"boundaries": []}]
    partition(msgs(12), llm, embedder)
    schema = backend.history[0][1]["properties"]["boundaries"]
    assert schema["items"]["enum"] == list(range(2, 13))
    assert schema["maxItems"] == 4


def test_oversized_model_group_is_cut(llm, backend, embedder):
    backend.responses = [{"boundaries": []}]
    groups = partition(msgs(30), llm, embedder, PartitionSettings(max_group=12))
    assert all(len(g.messages) <= 12 for g in groups)
    assert [m.id for g in groups for m in g.messages] == list(range(1, 31))


# -- partition by similarity: no call ------------------------------------------------


def topics(*sizes: int, dims: int = 8) -> np.ndarray:
    """Unit vectors: a run of ``size`` messages per topic, each topic its own direction (with a little shared noise)."""
    rng = np.random.default_rng(7)
    rows = []
    for t, size in enumerate(sizes):
        for _ in range(size):
            v = np.zeros(dims, dtype=np.float32)
            v[t % dims] = 1.0
            v += rng.normal(0, 0.15, dims).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
    return np.stack(rows)


def test_topic_cuts_find_the_turns_between_topics():
    from nemori_cli.pipeline.partition import topic_cuts

    assert topic_cuts(topics(6, 7, 5), min_group=3, max_group=12, target=6) == [6, 13]


def test_topic_cuts_aim_at_the_target_size_and_respect_min_and_max():
    from nemori_cli.pipeline.partition import topic_cuts

    v = topics(30)  # one topic throughout: the cuts are about size alone
    for target, max_group in ((6, 12), (10, 12), (6, 8)):
        cuts = topic_cuts(v, min_group=3, max_group=max_group, target=target)
        sizes = np.diff([0, *cuts, 30])
        assert min(sizes) >= 3 and max(sizes) <= max_group, (target, cuts)
        assert len(cuts) == max(-(-30 // max_group) - 1, round(30 / target) - 1) or max(sizes) <= max_group
    assert topic_cuts(topics(5), min_group=3, max_group=12, target=6) == []  # too short to cut in two


def test_partition_by_similarity_makes_no_call(llm, backend, embedder):
    groups = partition(msgs(20, gaps={12}), llm, embedder, PartitionSettings(method="similarity"))
    assert backend.history == []  # no LLM call at all
    assert [m.id for g in groups for m in g.messages] == list(range(1, 21))
    assert groups[0].boundary == "start" and "time-gap" in [g.boundary for g in groups]
    assert all(g.boundary in ("start", "time-gap", "similarity") for g in groups)
    assert all(3 <= len(g.messages) <= 12 for g in groups)
