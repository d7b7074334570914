"""The SQLite-to-PostgreSQL rewrites of store/pg_dialect.py, one rule each, and the two schemas kept in step."""

from __future__ import annotations

import pytest

from nemori_cli.store import migrations, pg_migrations
from nemori_cli.store.pg_dialect import translate


def sql(text: str) -> str:
    return " ".join(translate(text)[0].split())


def test_placeholders_become_psycopg_ones_and_percent_signs_are_doubled():
    assert sql("SELECT * FROM t WHERE a = ? AND b LIKE '50%'") == "SELECT * FROM t WHERE a = %s AND b LIKE '50%%'"
    assert translate("SELECT 1")[1] is False  # no parameters: run as a script, % left alone
    assert sql("SELECT '100%'") == "SELECT '100%'"


def test_a_question_mark_inside_a_string_is_text_not_a_placeholder():
    assert sql("SELECT 'why?' AS q WHERE x = ?") == "SELECT 'why?' AS q WHERE x = %s"
    assert sql("SELECT 'it''s ?' WHERE x = ?") == "SELECT 'it''s ?' WHERE x = %s"


def test_insert_or_ignore_and_or_replace():
    assert sql("INSERT OR IGNORE INTO fact_sources(fact_id, episode_id) VALUES (?, ?)") == (
        "INSERT INTO fact_sources(fact_id, episode_id) VALUES (%s, %s) ON CONFLICT DO NOTHING"
    )
    assert sql("INSERT OR REPLACE INTO episode_predictions(episode_id, user_id, method) VALUES (?, ?, ?)") == (
        "INSERT INTO episode_predictions(episode_id, user_id, method) VALUES (%s, %s, %s)"
        " ON CONFLICT (episode_id) DO UPDATE SET user_id = EXCLUDED.user_id, method = EXCLUDED.method"
    )
    with pytest.raises(ValueError, match="REPLACE_KEYS"):
        translate("INSERT OR REPLACE INTO unknown_table(a) VALUES (?)")


def test_null_safe_equality():
    assert sql("SELECT 1 WHERE session IS ?") == "SELECT 1 WHERE session IS NOT DISTINCT FROM %s"
    assert sql("SELECT 1 WHERE session IS NOT ?") == "SELECT 1 WHERE session IS DISTINCT FROM %s"
    assert sql("SELECT 1 WHERE session IS NULL AND x = ?") == "SELECT 1 WHERE session IS NULL AND x = %s"


def test_scalar_min_max_sum_of_comparisons_round_and_json_each():
    assert sql("SELECT sum(min(length(content), ?)) AS n FROM m") == "SELECT sum(least(length(content), %s)) AS n FROM m"
    assert sql("SELECT max(id) AS v FROM t WHERE a = ?") == "SELECT max(id) AS v FROM t WHERE a = %s"  # the aggregate stays
    assert sql("SELECT max(a, b) FROM t WHERE c = ?") == "SELECT greatest(a, b) FROM t WHERE c = %s"
    assert sql("SELECT sum(outcome = 'failed') AS f FROM c WHERE u = ?") == "SELECT sum((outcome = 'failed')::int) AS f FROM c WHERE u = %s"
    assert sql("SELECT sum(attempts) FROM c WHERE u = ?") == "SELECT sum(attempts) FROM c WHERE u = %s"
    assert sql("SELECT round(sum(ms) / 1000.0, 2) FROM c WHERE u = ?") == "SELECT round((sum(ms) / 1000.0)::numeric, 2) FROM c WHERE u = %s"
    assert sql("SELECT 1 FROM json_each(p.evoked) WHERE value = ?") == (
        "SELECT 1 FROM json_array_elements_text((p.evoked)::json) AS json_each(value) WHERE value = %s"
    )


def test_a_call_written_inside_a_string_literal_is_text_not_a_call():
    assert sql("SELECT 'max(a,b)' AS t WHERE x = ?") == "SELECT 'max(a,b)' AS t WHERE x = %s"
    assert sql("SELECT 'sum(a = b)', max(a, b) FROM t") == "SELECT 'sum(a = b)', greatest(a, b) FROM t"
    assert sql("SELECT min(a, 'round(x, 2)') FROM t WHERE c = ?") == "SELECT least(a, 'round(x, 2)') FROM t WHERE c = %s"
    assert sql("SELECT 'it''s max(a,b)' WHERE x = ?") == "SELECT 'it''s max(a,b)' WHERE x = %s"


def test_both_engines_number_the_same_migrations():
    """An export names its schema by number: a number must mean the same tables on either engine."""
    assert [(n, name) for n, name, _ in pg_migrations.MIGRATIONS] == [(n, name) for n, name, _ in migrations.MIGRATIONS]
