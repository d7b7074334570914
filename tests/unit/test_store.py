import numpy as np
import pytest

from nemori_cli.errors import StoreError
from nemori_cli.store import messages as message_sql
from nemori_cli.store.episodes import EpisodeDraft, add, text_search, vector_search
from nemori_cli.store.index import search_words
from nemori_cli.store.migrations import MIGRATIONS
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import make_messages, sqlite_only


def test_migrations_are_recorded_once(tmp_path):
    path = tmp_path / "m.db"
    SqliteStore(path).close()
    again = SqliteStore(path)
    rows = again.query("SELECT id FROM schema_migrations")
    assert [r["id"] for r in rows] == [m[0] for m in MIGRATIONS]
    assert again.query("PRAGMA journal_mode")[0]["journal_mode"] == "wal"


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "m.db"
    db = SqliteStore(path)
    db.conn.execute("INSERT INTO schema_migrations VALUES (999, 'future', 'x')")
    db.close()
    with pytest.raises(StoreError, match="newer nemori"):
        SqliteStore(path)


def test_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a SQLite database"):
        SqliteStore(path)


def test_missing_database_is_refused_when_not_creating(tmp_path):
    with pytest.raises(StoreError, match="no database"):
        SqliteStore(tmp_path / "absent.db", create=False)
    assert not (tmp_path / "absent.db").exists()


def test_embedder_mismatch_is_refused(db):
    db.bind_embedder("model-a:4", 4)
    db.bind_embedder("model-a:4", 4)  # same one again: fine
    with pytest.raises(StoreError, match="built with embedder model-a:4"):
        db.bind_embedder("model-b:4", 4)


_made = iter(range(10**6))


def _episode(db, user, vec, title="t", narrative="n"):
    with db.transaction():
        message_sql.insert_messages(db, user, make_messages(1, topic=f"{title}{user}{next(_made)}"))
        m = message_sql.pending(db, user)[0]
        return add(db, user, EpisodeDraft(title, narrative, m.timestamp, m.timestamp, "model", (m.id,)), np.asarray(vec, np.float32))


def test_vector_search_reports_cosine_similarity_per_user(db):
    db.bind_embedder("x:3", 3)
    same = _episode(db, "a", [1, 0, 0])
    orth = _episode(db, "a", [0, 1, 0])
    _episode(db, "b", [1, 0, 0])
    hits = vector_search(db, "a", np.array([1, 0, 0], np.float32), 10)
    assert [h[0] for h in hits] == [same, orth]
    assert hits[0][1] == pytest.approx(1.0) and hits[1][1] == pytest.approx(0.0, abs=1e-6)


def test_text_search_quotes_user_text_and_filters_users(db):
    db.bind_embedder("x:3", 3)
    e = _episode(db, "a", [1, 0, 0], title="Climbing gym", narrative="Priya went bouldering")
    _episode(db, "b", [1, 0, 0], title="Climbing gym", narrative="Someone else")
    assert search_words('gym" OR (x') == ["gym", "x"]
    assert search_words("when did she go") == ["go"]  # stopwords dropped...
    assert search_words("when did she") == ["when", "did", "she"]  # ...unless nothing else is left
    assert [h[0] for h in text_search(db, "a", 'climbing AND "gym', 10)] == [e]
    assert text_search(db, "a", "?!", 10) == []


def test_words_in_most_episodes_are_left_out_of_the_text_query(db, monkeypatch):
    from nemori_cli.store import index
    from nemori_cli.store.index import informative_terms

    monkeypatch.setattr(index, "COMMON_TERM_MIN_EPISODES", 5)

    db.bind_embedder("x:3", 3)
    for i in range(10):
        _episode(db, "a", [1, 0, 0], title=f"common day {i}", narrative="common words everywhere")
    rare = _episode(db, "a", [1, 0, 0], title="common kayak", narrative="a kayak trip")
    assert informative_terms(db, "common kayak") == "kayak"
    assert informative_terms(db, "common") == "common"  # a lone word is kept whatever its frequency
    assert [h[0] for h in text_search(db, "a", "common kayak", 3)] == [rare]


def test_small_stores_search_every_word(db):
    from nemori_cli.store.index import informative_terms

    db.bind_embedder("x:3", 3)
    for i in range(4):
        _episode(db, "a", [1, 0, 0], title=f"gym {i}", narrative="gym")
    assert informative_terms(db, "gym kayak") == "gym kayak"


def test_large_tables_search_only_words_in_few_rows_and_rank_a_bounded_number(db, monkeypatch):
    from nemori_cli.store import index

    monkeypatch.setattr(index, "TEXT_MATCH_BUDGET", 6)
    db.bind_embedder("x:3", 3)
    for i in range(10):
        _episode(db, "a", [1, 0, 0], title=f"common day {i}", narrative="common words everywhere")
    kayaks = [_episode(db, "a", [1, 0, 0], title="common kayak", narrative=f"kayak trip {i}") for i in range(2)]
    assert index.text_query(db, "common kayak") == index.TextQuery(["kayak"], 6)
    # Every word too common: no text list at all (the vectors answer alone), not a ranking of most of the store.
    assert index.text_query(db, "common") == index.TextQuery([], 6)
    assert text_search(db, "a", "common", 10) == []
    assert sorted(h[0] for h in text_search(db, "a", "common kayak", 5)) == sorted(kayaks)


def test_stopwords_take_no_place_among_the_words_searched(db, monkeypatch):
    # PostgreSQL's 'english' configuration drops stopwords, so they count 0 there: ranked
    # as the rarest words, they once filled MAX_QUERY_TERMS's places before any real word.
    from nemori_cli.store import index

    monkeypatch.setattr(index, "TEXT_MATCH_BUDGET", 6)
    monkeypatch.setattr(index, "MAX_QUERY_TERMS", 1)
    db.bind_embedder("x:3", 3)
    for i in range(10):
        _episode(db, "a", [1, 0, 0], title=f"common day {i}", narrative="common words everywhere")
    _episode(db, "a", [1, 0, 0], title="common kayak", narrative="a kayak trip")
    assert index.text_query(db, "what did the kayak do") == index.TextQuery(["kayak"], 6)


def test_postgresql_plans_every_query_for_its_own_values(db):
    # A prepared statement turns to a generic plan after a few runs, blind to the
    # values: at 1.1M rows a rare word's full-text search became a scan of every
    # row (docs/SEARCH_LATENCY.md, large stores, has the figures). The store sends every query unprepared.
    if db.engine != "postgresql":
        pytest.skip("server-side prepared statements are PostgreSQL's")
    db.bind_embedder("x:3", 3)
    _episode(db, "a", [1, 0, 0], title="kayak", narrative="a kayak trip")
    for _ in range(8):
        assert text_search(db, "a", "kayak", 5)
        db.vector_search("episode_vec", "a", np.array([1, 0, 0], dtype=np.float32), 5)
    assert db.one("SELECT count(*) AS n FROM pg_prepared_statements")["n"] == 0


def test_postgresql_asks_hnsw_for_more_candidates_on_a_large_table(db, monkeypatch):
    if db.engine != "postgresql":
        pytest.skip("HNSW is PostgreSQL's")
    from nemori_cli.store import pg

    db.bind_embedder("x:3", 3)
    e = _episode(db, "a", [1, 0, 0])
    db.conn.execute("ANALYZE episode_vec")
    monkeypatch.setattr(pg, "HNSW_MIN_ROWS", 1)
    assert [r for r, _ in db.vector_search("episode_vec", "a", np.array([1, 0, 0], dtype=np.float32), 1)] == [e]
    assert db.one("SHOW hnsw.ef_search")["hnsw.ef_search"] == str(pg.HNSW_EF_SEARCH)
    monkeypatch.setattr(pg, "HNSW_LARGE_ROWS", 1)
    monkeypatch.setattr(pg, "HNSW_LARGE_CANDIDATES", 321)
    assert [r for r, _ in db.vector_search("episode_vec", "a", np.array([1, 0, 0], dtype=np.float32), 1)] == [e]
    assert db.one("SHOW hnsw.ef_search")["hnsw.ef_search"] == "321"


def test_a_table_within_the_budget_keeps_the_share_rule(db, monkeypatch):
    from nemori_cli.store import index

    monkeypatch.setattr(index, "COMMON_TERM_MIN_EPISODES", 5)
    db.bind_embedder("x:3", 3)
    for i in range(10):
        _episode(db, "a", [1, 0, 0], title=f"common day {i}", narrative="common gym" if i < 8 else "common")
    assert index.text_query(db, "common") == index.TextQuery(["common"], None)  # a lone word is kept whatever its frequency
    assert index.text_query(db, "common gym") == index.TextQuery(["gym"], None)  # both in most rows: the rarer one is kept


def test_max_rows_ranks_only_that_many_matches(db):
    db.bind_embedder("x:3", 3)
    for i in range(10):
        _episode(db, "a", [1, 0, 0], title=f"gym {i}", narrative="gym again")
    assert len(db.text_search("episode_fts", "a", ["gym"], 10)) == 10
    bounded = db.text_search("episode_fts", "a", ["gym"], 10, max_rows=4)
    assert len(bounded) == 4 and len({i for i, _ in bounded}) == 4
    assert [s for _, s in bounded] == sorted((s for _, s in bounded), reverse=True)  # still best first


def test_doc_freq_counts_a_word_the_vocabulary_holds_under_its_stem(db):
    sqlite_only(db, "the fts5vocab table holds porter stems; PostgreSQL stems the query word itself")
    db.bind_embedder("x:3", 3)
    for i in range(5):
        _episode(db, "a", [1, 0, 0], title=f"kayak {i}", narrative="kayak")
    assert db.doc_freq("episode_fts", ["kayaking"]) == {}  # unknown: the caller treats it as rare
    assert db.doc_freq("episode_fts", ["kayaking"], at_most=2) == {"kayaking": 3}  # counted, stopping past the bound
    assert db.doc_freq("episode_fts", ["kayaking"], at_most=10) == {"kayaking": 5}


def test_postgresql_estimates_word_counts_from_analyze_statistics(db):
    if db.engine != "postgresql":
        pytest.skip("PostgreSQL only: the planner's lexeme statistics")
    db.bind_embedder("x:3", 3)
    for i in range(30):
        _episode(db, "a", [1, 0, 0], title=f"common {i}", narrative="common")
    _episode(db, "a", [1, 0, 0], title="kayak", narrative="kayak")
    assert db.doc_freq("episode_fts", ["common", "kayak"], at_most=5) == {"common": 30, "kayak": 1}  # counted: no statistics yet
    db.conn.execute("ANALYZE episode_fts")
    assert db._has_lexeme_stats("episode_fts")
    estimated = db.doc_freq("episode_fts", ["common", "kayak"], at_most=5)
    assert estimated["common"] > 5 >= estimated["kayak"]  # the common word is still known as common, without a count
    assert db.doc_freq("episode_fts", ["common"]) == {"common": 30}  # without at_most: counted


def test_ingest_usage_sums_one_model_or_all_in_the_given_stages(db):
    from nemori_cli.domain import CallRecord
    from nemori_cli.store import telemetry

    calls = [
        CallRecord("partition", "m1", 100, 10, 500.0, 1, "ok"),
        CallRecord("narration", "m1", 200, 20, 250.0, 1, "ok"),
        CallRecord("partition", "m2", 50, 5, 100.0, 1, "ok"),
        CallRecord("answer", "m1", 999, 99, 9999.0, 1, "ok"),  # not an ingest stage
    ]
    with db.transaction():
        telemetry.write(db, "a", calls, [])
        telemetry.write(db, "b", calls[:1], [])
    stage_names = ("partition", "narration")
    assert telemetry.ingest_usage(db, "a", stage_names, "m1") == {"calls": 2, "prompt_tokens": 300, "completion_tokens": 30, "ms": 750.0}
    assert telemetry.ingest_usage(db, "a", stage_names)["calls"] == 3
    assert telemetry.ingest_usage(db, "a", stage_names, "nobody") == {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "ms": 0}
    assert telemetry.ingest_usage(db, "c", stage_names)["calls"] == 0


def test_characters_in_episodes_counts_only_messages_an_episode_owns(db):
    db.bind_embedder("x:3", 3)
    assert message_sql.characters_in_episodes(db, "a") == 0
    _episode(db, "a", [1, 0, 0], title="kayak")
    owned = sum(len(m.content) for m in message_sql.all_messages(db, "a"))
    with db.transaction():
        message_sql.insert_messages(db, "a", make_messages(2, topic="pending"))
    _episode(db, "b", [1, 0, 0])
    assert message_sql.characters_in_episodes(db, "a") == owned > 0
