"""The schema on PostgreSQL: the same numbered migrations as store/migrations.py, in PostgreSQL's types.

The numbers mean the same schema on both engines (an export names its schema
by number). Never edit a migration that has shipped: add the next number to
both lists. Differences from SQLite, and why:

- ids are BIGSERIAL (SQLite's INTEGER PRIMARY KEY hands out rowids the same way);
- times as epochs are DOUBLE PRECISION (SQLite's REAL is a double);
- each FTS5 table is an ordinary table with the same columns (``rowid`` is
  the row it indexes) plus a generated ``tsv`` column under a GIN index:
  the store inserts and deletes index rows with the same statements on
  both engines. The fts5vocab term tables have no counterpart: a word's
  document count comes from the GIN index, or from ANALYZE's lexeme
  statistics on large tables (PgStore.doc_freq);
- foreign keys are DEFERRABLE (checked at once, as SQLite's are, unless a
  transaction defers them): import-memory restores a fact before the later
  fact that replaced it, and checks every reference at the end;
- the backfills of migration 7 are absent: a PostgreSQL store began at
  schema 7, so it never held rows of an older schema to backfill.

Vector tables are made when the store is bound to an embedder (their width
is the embedder's), as on SQLite: PgStore.create_vector_tables.
"""

from __future__ import annotations


def _text_index(table: str, columns: list[str]) -> str:
    cols = ", ".join(f"{c} TEXT" for c in columns)
    doc = " || ' ' || ".join(f"coalesce({c}, '')" for c in columns)
    return f"""
        CREATE TABLE {table} (
            rowid   BIGINT PRIMARY KEY,
            {cols},
            user_id TEXT NOT NULL,
            tsv     tsvector GENERATED ALWAYS AS (to_tsvector('english', {doc})) STORED
        );
        CREATE INDEX {table}_tsv ON {table} USING gin (tsv);
        CREATE INDEX {table}_user ON {table} (user_id);
    """


MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "messages, episodes, full-text index, llm call log",
        """
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE episodes (
            id          BIGSERIAL PRIMARY KEY,
            user_id     TEXT NOT NULL,
            title       TEXT NOT NULL,
            narrative   TEXT NOT NULL,
            start_ts    TEXT NOT NULL,
            end_ts      TEXT NOT NULL,
            start_epoch DOUBLE PRECISION NOT NULL,
            end_epoch   DOUBLE PRECISION NOT NULL,
            boundary    TEXT NOT NULL,
            status      TEXT NOT NULL DEFAULT 'active',
            created_at  TEXT NOT NULL
        );
        CREATE INDEX episodes_by_user_time ON episodes(user_id, start_epoch);
        CREATE TABLE messages (
            id          BIGSERIAL PRIMARY KEY,
            user_id     TEXT NOT NULL,
            msg_key     TEXT NOT NULL,
            source_id   TEXT,
            session     TEXT,
            speaker     TEXT NOT NULL,
            content     TEXT NOT NULL,
            ts          TEXT NOT NULL,
            ts_epoch    DOUBLE PRECISION NOT NULL,
            episode_id  BIGINT REFERENCES episodes(id) DEFERRABLE,
            ingested_at TEXT NOT NULL,
            UNIQUE (user_id, msg_key)
        );
        CREATE INDEX messages_by_episode ON messages(user_id, episode_id, ts_epoch, id);
        """
        + _text_index("episode_fts", ["title", "narrative"])
        + """
        CREATE TABLE llm_calls (
            id                BIGSERIAL PRIMARY KEY,
            user_id           TEXT NOT NULL,
            stage             TEXT NOT NULL,
            model             TEXT NOT NULL,
            prompt_tokens     BIGINT NOT NULL,
            completion_tokens BIGINT NOT NULL,
            ms                DOUBLE PRECISION NOT NULL,
            attempts          BIGINT NOT NULL,
            outcome           TEXT NOT NULL,
            created_at        TEXT NOT NULL
        );
        CREATE INDEX llm_calls_by_user ON llm_calls(user_id);
        CREATE TABLE stage_events (
            id         BIGSERIAL PRIMARY KEY,
            user_id    TEXT NOT NULL,
            stage      TEXT NOT NULL,
            kind       TEXT NOT NULL,
            detail     TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX stage_events_by_user ON stage_events(user_id);
        """,
    ),
    (2, "term statistics of the episode full-text index", "SELECT 1;"),  # the GIN index serves them on PostgreSQL
    (
        3,
        "semantic memory: facts, their source episodes, full-text index",
        """
        CREATE TABLE facts (
            id                BIGSERIAL PRIMARY KEY,
            user_id           TEXT NOT NULL,
            text              TEXT NOT NULL,
            created_at        TEXT NOT NULL,
            status            TEXT NOT NULL DEFAULT 'active',
            superseded_by     BIGINT REFERENCES facts(id) DEFERRABLE,
            superseded_reason TEXT,
            superseded_at     TEXT
        );
        CREATE INDEX facts_by_user ON facts(user_id, status);
        CREATE TABLE fact_sources (
            fact_id    BIGINT NOT NULL REFERENCES facts(id) DEFERRABLE,
            episode_id BIGINT NOT NULL REFERENCES episodes(id) DEFERRABLE,
            PRIMARY KEY (fact_id, episode_id)
        );
        CREATE INDEX fact_sources_by_episode ON fact_sources(episode_id);
        """
        + _text_index("fact_fts", ["text"]),
    ),
    (
        4,
        "episode integration, fact audit, running summaries",
        """
        ALTER TABLE episodes ADD COLUMN superseded_by BIGINT REFERENCES episodes(id) DEFERRABLE;
        ALTER TABLE episodes ADD COLUMN superseded_at TEXT;
        ALTER TABLE episodes ADD COLUMN superseded_reason TEXT;
        CREATE INDEX episodes_by_successor ON episodes(superseded_by);
        ALTER TABLE facts ADD COLUMN origin TEXT NOT NULL DEFAULT 'new';
        CREATE INDEX facts_by_successor ON facts(superseded_by);
        CREATE TABLE summaries (
            id          BIGSERIAL PRIMARY KEY,
            user_id     TEXT NOT NULL,
            text        TEXT NOT NULL,
            episode_id  BIGINT REFERENCES episodes(id) DEFERRABLE,
            created_at  TEXT NOT NULL
        );
        CREATE INDEX summaries_by_user ON summaries(user_id, id);
        """,
    ),
    (
        5,
        "A-MEM notes: attributes, links by note id, evolution history, full-text index",
        """
        CREATE TABLE notes (
            id          BIGSERIAL PRIMARY KEY,
            user_id     TEXT NOT NULL,
            content     TEXT NOT NULL,
            ts          TEXT NOT NULL,
            ts_epoch    DOUBLE PRECISION NOT NULL,
            keywords    TEXT NOT NULL,
            tags        TEXT NOT NULL,
            context     TEXT NOT NULL,
            origin      TEXT NOT NULL,
            message_id  BIGINT REFERENCES messages(id) DEFERRABLE,
            episode_id  BIGINT REFERENCES episodes(id) DEFERRABLE,
            created_at  TEXT NOT NULL,
            updated_at  TEXT
        );
        CREATE INDEX notes_by_user ON notes(user_id, ts_epoch);
        CREATE UNIQUE INDEX notes_by_message ON notes(message_id) WHERE message_id IS NOT NULL;
        CREATE INDEX notes_by_episode ON notes(episode_id) WHERE episode_id IS NOT NULL;
        CREATE TABLE note_links (
            note_id    BIGINT NOT NULL REFERENCES notes(id) DEFERRABLE,
            linked_id  BIGINT NOT NULL REFERENCES notes(id) DEFERRABLE,
            made_by    BIGINT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (note_id, linked_id)
        );
        CREATE INDEX note_links_back ON note_links(linked_id);
        CREATE TABLE note_evolutions (
            id         BIGSERIAL PRIMARY KEY,
            note_id    BIGINT NOT NULL REFERENCES notes(id) DEFERRABLE,
            made_by    BIGINT,
            field      TEXT NOT NULL,
            before     TEXT NOT NULL,
            after      TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX note_evolutions_by_note ON note_evolutions(note_id, id);
        CREATE INDEX note_evolutions_by_cause ON note_evolutions(made_by);
        """
        + _text_index("note_fts", ["content", "keywords", "tags", "context"]),
    ),
    (
        6,
        "raw messages indexed on their own: full text (the vectors are in message_vec)",
        _text_index("message_fts", ["speaker", "content"]),
    ),
    (
        7,
        "facts valid in conversation time, the episode each came from, what each episode's prediction missed",
        """
        ALTER TABLE facts ADD COLUMN episode_id BIGINT REFERENCES episodes(id) DEFERRABLE;
        ALTER TABLE facts ADD COLUMN valid_from TEXT;
        ALTER TABLE facts ADD COLUMN valid_from_epoch DOUBLE PRECISION;
        ALTER TABLE facts ADD COLUMN valid_until TEXT;
        ALTER TABLE facts ADD COLUMN valid_until_epoch DOUBLE PRECISION;
        CREATE INDEX facts_by_validity ON facts(user_id, valid_from_epoch);
        CREATE INDEX facts_by_episode ON facts(episode_id);
        CREATE TABLE episode_predictions (
            episode_id BIGINT PRIMARY KEY REFERENCES episodes(id) DEFERRABLE,
            user_id    TEXT NOT NULL,
            method     TEXT NOT NULL,
            predicted  TEXT,
            evoked     TEXT NOT NULL,
            missed     TEXT,
            dropped    TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX episode_predictions_by_user ON episode_predictions(user_id);
        """,
    ),
    (
        8,
        "messages by time, newest first: the core context's recent timeline",
        "CREATE INDEX messages_by_time ON messages(user_id, ts_epoch, id);",
    ),
]
