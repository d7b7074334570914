"""Numbered, append-only schema migrations.

Never edit a migration that has shipped: add the next number. Each one is
applied together with its record in a single transaction, so a crash leaves
the schema either before or after it, never between.

Vector tables are not here: their width depends on the embedder, so they are
created when a database is first bound to one (see db.bind_embedder).
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
            id          INTEGER PRIMARY KEY,
            user_id     TEXT NOT NULL,
            title       TEXT NOT NULL,
            narrative   TEXT NOT NULL,
            start_ts    TEXT NOT NULL,
            end_ts      TEXT NOT NULL,
            start_epoch REAL NOT NULL,
            end_epoch   REAL NOT NULL,
            boundary    TEXT NOT NULL,          -- how the group was cut: model, time-gap, fallback, flush
            status      TEXT NOT NULL DEFAULT 'active',
            created_at  TEXT NOT NULL
        );
        CREATE INDEX episodes_by_user_time ON episodes(user_id, start_epoch);
        CREATE TABLE messages (
            id          INTEGER PRIMARY KEY,
            user_id     TEXT NOT NULL,
            msg_key     TEXT NOT NULL,          -- stable identity: re-ingesting adds nothing
            source_id   TEXT,                   -- the id it was ingested with
            session     TEXT,
            speaker     TEXT NOT NULL,
            content     TEXT NOT NULL,
            ts          TEXT NOT NULL,          -- ISO 8601 as given (naive stays naive)
            ts_epoch    REAL NOT NULL,          -- for ordering; naive read as UTC
            episode_id  INTEGER REFERENCES episodes(id),   -- NULL while pending
            ingested_at TEXT NOT NULL,
            UNIQUE (user_id, msg_key)
        );
        CREATE INDEX messages_by_episode ON messages(user_id, episode_id, ts_epoch, id);
        CREATE VIRTUAL TABLE episode_fts USING fts5(
            title, narrative, user_id UNINDEXED, tokenize = 'porter unicode61'
        );
        CREATE TABLE llm_calls (
            id                INTEGER PRIMARY KEY,
            user_id           TEXT NOT NULL,
            stage             TEXT NOT NULL,
            model             TEXT NOT NULL,
            prompt_tokens     INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            ms                REAL NOT NULL,
            attempts          INTEGER NOT NULL,
            outcome           TEXT NOT NULL,    -- ok | failed
            created_at        TEXT NOT NULL
        );
        CREATE TABLE stage_events (
            id         INTEGER PRIMARY KEY,
            user_id    TEXT NOT NULL,
            stage      TEXT NOT NULL,
            kind       TEXT NOT NULL,           -- repaired | fallback
            detail     TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        """,
    ),
    (
        2,
        "term statistics of the episode full-text index",
        # Document frequency per term, so searches can skip words that match
        # most episodes: they carry no signal and make BM25 rank everything.
        "CREATE VIRTUAL TABLE episode_fts_terms USING fts5vocab(episode_fts, 'row');",
    ),
    (
        3,
        "semantic memory: facts, their source episodes, full-text index",
        """
        CREATE TABLE facts (
            id                INTEGER PRIMARY KEY,
            user_id           TEXT NOT NULL,
            text              TEXT NOT NULL,
            created_at        TEXT NOT NULL,
            status            TEXT NOT NULL DEFAULT 'active',   -- active | superseded
            superseded_by     INTEGER REFERENCES facts(id),
            superseded_reason TEXT,
            superseded_at     TEXT
        );
        CREATE INDEX facts_by_user ON facts(user_id, status);
        CREATE TABLE fact_sources (
            fact_id    INTEGER NOT NULL REFERENCES facts(id),
            episode_id INTEGER NOT NULL REFERENCES episodes(id),
            PRIMARY KEY (fact_id, episode_id)
        );
        CREATE INDEX fact_sources_by_episode ON fact_sources(episode_id);
        CREATE VIRTUAL TABLE fact_fts USING fts5(text, user_id UNINDEXED, tokenize = 'porter unicode61');
        CREATE VIRTUAL TABLE fact_fts_terms USING fts5vocab(fact_fts, 'row');
        """,
    ),
    (
        4,
        "episode integration, fact audit, running summaries",
        # A merged episode is a new row; the episodes it replaced keep their
        # text and point at it (superseded_by), so nothing is destroyed and
        # provenance can be walked both ways. Facts already had their
        # superseded_* columns; `origin` says how a fact came to be.
        """
        ALTER TABLE episodes ADD COLUMN superseded_by INTEGER REFERENCES episodes(id);
        ALTER TABLE episodes ADD COLUMN superseded_at TEXT;
        ALTER TABLE episodes ADD COLUMN superseded_reason TEXT;
        CREATE INDEX episodes_by_successor ON episodes(superseded_by);
        ALTER TABLE facts ADD COLUMN origin TEXT NOT NULL DEFAULT 'new';   -- new | merge | conflict | duplicate
        CREATE INDEX facts_by_successor ON facts(superseded_by);
        CREATE TABLE summaries (
            id          INTEGER PRIMARY KEY,
            user_id     TEXT NOT NULL,
            text        TEXT NOT NULL,
            episode_id  INTEGER REFERENCES episodes(id),  -- the episode folded in last
            created_at  TEXT NOT NULL
        );
        CREATE INDEX summaries_by_user ON summaries(user_id, id);
        """,
    ),
    (
        5,
        "A-MEM notes: attributes, links by note id, evolution history, full-text index",
        # A note's links are rows of note ids (one per direction), never list
        # positions: a position means another note once anything is deleted.
        # Every change evolution makes to a note is a row of its own (field,
        # before, after, which new note caused it), so `inspect note` can
        # show the history and a forgotten note can undo what it changed.
        """
        CREATE TABLE notes (
            id          INTEGER PRIMARY KEY,
            user_id     TEXT NOT NULL,
            content     TEXT NOT NULL,
            ts          TEXT NOT NULL,          -- when what it says happened (message time, or its episode's start)
            ts_epoch    REAL NOT NULL,
            keywords    TEXT NOT NULL,          -- JSON list of strings
            tags        TEXT NOT NULL,          -- JSON list of strings
            context     TEXT NOT NULL,
            origin      TEXT NOT NULL,          -- model | fallback: where the attributes came from
            message_id  INTEGER REFERENCES messages(id),   -- the message it was made from (--memory amem)
            episode_id  INTEGER REFERENCES episodes(id),   -- the episode its fact was distilled from (nemori+amem)
            created_at  TEXT NOT NULL,
            updated_at  TEXT
        );
        CREATE INDEX notes_by_user ON notes(user_id, ts_epoch);
        CREATE UNIQUE INDEX notes_by_message ON notes(message_id) WHERE message_id IS NOT NULL;
        CREATE INDEX notes_by_episode ON notes(episode_id) WHERE episode_id IS NOT NULL;
        CREATE TABLE note_links (
            note_id    INTEGER NOT NULL REFERENCES notes(id),
            linked_id  INTEGER NOT NULL REFERENCES notes(id),
            made_by    INTEGER NOT NULL,        -- the note whose insertion created the link
            created_at TEXT NOT NULL,
            PRIMARY KEY (note_id, linked_id)
        ) WITHOUT ROWID;
        CREATE INDEX note_links_back ON note_links(linked_id);
        CREATE TABLE note_evolutions (
            id         INTEGER PRIMARY KEY,
            note_id    INTEGER NOT NULL REFERENCES notes(id),   -- the note that changed
            made_by    INTEGER,                                 -- the new note that caused it (NULL once forgotten)
            field      TEXT NOT NULL,                           -- context | tags
            before     TEXT NOT NULL,
            after      TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX note_evolutions_by_note ON note_evolutions(note_id, id);
        CREATE INDEX note_evolutions_by_cause ON note_evolutions(made_by);
        CREATE VIRTUAL TABLE note_fts USING fts5(content, keywords, tags, context, user_id UNINDEXED, tokenize = 'porter unicode61');
        CREATE VIRTUAL TABLE note_fts_terms USING fts5vocab(note_fts, 'row');
        """,
    ),
    (
        6,
        "raw messages indexed on their own: full text (the vectors are in message_vec)",
        """
        CREATE VIRTUAL TABLE message_fts USING fts5(speaker, content, user_id UNINDEXED, tokenize = 'porter unicode61');
        CREATE VIRTUAL TABLE message_fts_terms USING fts5vocab(message_fts, 'row');
        """,
    ),
    (
        7,
        "facts valid in conversation time, the episode each came from, what each episode's prediction missed",
        # Point-in-time answers need a fact's validity in the conversation's
        # time, not the ingest's clock (superseded_at): valid_from is the end
        # of the episode the fact was distilled from (episode_id), valid_until
        # its successor's valid_from. NULL valid_from: no source episode to
        # date it by (it counts in no as-of view); NULL valid_until: still
        # valid if active, end unknown if superseded (it counts in no as-of
        # view). episode_predictions keeps, per episode, what the prediction
        # step predicted and what the distillation found it missed.
        #
        # The backfill dates a fact by the earliest-ending of its source
        # episodes that it did not inherit from the facts it replaced (a merge
        # carries its predecessors' sources; a later duplicate or an episode
        # merge only adds later ones).
        """
        ALTER TABLE facts ADD COLUMN episode_id INTEGER REFERENCES episodes(id);   -- the episode it was distilled from
        ALTER TABLE facts ADD COLUMN valid_from TEXT;          -- that episode's end_ts
        ALTER TABLE facts ADD COLUMN valid_from_epoch REAL;
        ALTER TABLE facts ADD COLUMN valid_until TEXT;         -- its successor's valid_from
        ALTER TABLE facts ADD COLUMN valid_until_epoch REAL;
        CREATE INDEX facts_by_validity ON facts(user_id, valid_from_epoch);
        CREATE INDEX facts_by_episode ON facts(episode_id);
        CREATE TABLE episode_predictions (
            episode_id INTEGER PRIMARY KEY REFERENCES episodes(id),
            user_id    TEXT NOT NULL,
            method     TEXT NOT NULL,   -- predicted | nothing-evoked | prediction-failed | direct
            predicted  TEXT,            -- the prediction (NULL when none was made)
            evoked     TEXT NOT NULL,   -- JSON list: the known facts it was predicted from
            missed     TEXT,            -- JSON list: what the distillation found the prediction missed (NULL: no usable answer)
            dropped    TEXT NOT NULL,   -- JSON list: of those, dropped for naming what the messages never say
            created_at TEXT NOT NULL
        );
        CREATE INDEX episode_predictions_by_user ON episode_predictions(user_id);
        UPDATE facts SET episode_id = (
            SELECT s.episode_id FROM fact_sources s JOIN episodes e ON e.id = s.episode_id
            WHERE s.fact_id = facts.id
            ORDER BY EXISTS (
                SELECT 1 FROM fact_sources i JOIN facts old ON old.id = i.fact_id
                WHERE old.superseded_by = facts.id AND i.episode_id = s.episode_id
            ), e.end_epoch, e.id
            LIMIT 1
        );
        UPDATE facts SET
            valid_from = (SELECT e.end_ts FROM episodes e WHERE e.id = facts.episode_id),
            valid_from_epoch = (SELECT e.end_epoch FROM episodes e WHERE e.id = facts.episode_id)
        WHERE episode_id IS NOT NULL;
        UPDATE facts SET
            valid_until = (SELECT n.valid_from FROM facts n WHERE n.id = facts.superseded_by),
            valid_until_epoch = (SELECT n.valid_from_epoch FROM facts n WHERE n.id = facts.superseded_by)
        WHERE superseded_by IS NOT NULL;
        """,
    ),
    (
        8,
        "messages by time, newest first: the core context's recent timeline",
        "CREATE INDEX messages_by_time ON messages(user_id, ts_epoch, id);",
    ),
]
