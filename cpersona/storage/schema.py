"""The stored format: schema v13 of the original CPersona plus our additive columns and
`cpersona_meta` table (docs/storage.md describes every table), as tables of DDL.

How a file is brought to this format is `storage/migration.py`: its steps read these tables,
so a new table, column, index, FTS table or trigger is one entry here.
"""

from __future__ import annotations

SCHEMA_VERSION = 13
#: PRAGMA user_version bit 0: the FTS index must be rebuilt before it is used again (set while
#: its triggers are off; the original CPersona reads the same bit).
FTS_REBUILD_PENDING = 1


TABLES = {
    "schema_version": """CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY,
        applied_at TEXT NOT NULL DEFAULT (datetime('now')))""",
    "memories": """CREATE TABLE IF NOT EXISTS memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        msg_id TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT '{}',
        timestamp TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        embedding BLOB,
        channel TEXT NOT NULL DEFAULT '',
        recall_count INTEGER NOT NULL DEFAULT 0,
        last_recalled_at TEXT,
        locked INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL DEFAULT (datetime('now')))""",
    "episodes": """CREATE TABLE IF NOT EXISTS episodes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        summary TEXT NOT NULL,
        keywords TEXT NOT NULL DEFAULT '',
        embedding BLOB,
        start_time TEXT,
        end_time TEXT,
        resolved INTEGER NOT NULL DEFAULT 0,
        channel TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL DEFAULT (datetime('now')))""",
    "profiles": """CREATE TABLE IF NOT EXISTS profiles (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        user_id TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        updated_at TEXT NOT NULL DEFAULT (datetime('now')),
        UNIQUE(agent_id, user_id))""",
    "pending_memory_tasks": """CREATE TABLE IF NOT EXISTS pending_memory_tasks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_type TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        payload TEXT NOT NULL,
        retries INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL DEFAULT (datetime('now')))""",
    # Ours, beyond v13: which embedding model produced the stored vectors, calibration record.
    "cpersona_meta": """CREATE TABLE IF NOT EXISTS cpersona_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL)""",
}

#: Columns added over the original's versions v3, v6–v10, for files older than v13: (table, column, DDL).
LADDER_COLUMNS = (
    ("episodes", "resolved", "INTEGER NOT NULL DEFAULT 0"),
    ("memories", "channel", "TEXT NOT NULL DEFAULT ''"),
    ("memories", "recall_count", "INTEGER NOT NULL DEFAULT 0"),
    ("memories", "last_recalled_at", "TEXT"),
    ("memories", "locked", "INTEGER NOT NULL DEFAULT 0"),
    ("memories", "project_id", "TEXT NOT NULL DEFAULT ''"),
    ("episodes", "project_id", "TEXT NOT NULL DEFAULT ''"),
    ("profiles", "project_id", "TEXT NOT NULL DEFAULT ''"),
    ("pending_memory_tasks", "project_id", "TEXT NOT NULL DEFAULT ''"),
    ("episodes", "channel", "TEXT NOT NULL DEFAULT ''"),
    # Ours, beyond v13: failure state of queued tasks, so a task that cannot run is kept and
    # reported instead of silently dropped (see cpersona/jobs/task_queue.py).
    ("pending_memory_tasks", "status", "TEXT NOT NULL DEFAULT 'pending'"),
    ("pending_memory_tasks", "last_error", "TEXT"),
    ("pending_memory_tasks", "updated_at", "TEXT"),
    ("pending_memory_tasks", "not_before", "REAL NOT NULL DEFAULT 0"),
)

INDEXES = {
    "idx_memories_agent": "CREATE INDEX IF NOT EXISTS idx_memories_agent ON memories(agent_id, created_at DESC)",
    "idx_memories_msg_id": "CREATE INDEX IF NOT EXISTS idx_memories_msg_id ON memories(agent_id, msg_id)",
    "idx_episodes_agent": "CREATE INDEX IF NOT EXISTS idx_episodes_agent ON episodes(agent_id, created_at DESC)",
    "idx_memories_agent_channel": "CREATE INDEX IF NOT EXISTS idx_memories_agent_channel "
    "ON memories(agent_id, channel, created_at DESC)",
    "idx_episodes_agent_channel": "CREATE INDEX IF NOT EXISTS idx_episodes_agent_channel "
    "ON episodes(agent_id, channel, created_at DESC)",
    "idx_memories_isolation": "CREATE INDEX IF NOT EXISTS idx_memories_isolation "
    "ON memories(agent_id, project_id, created_at DESC)",
    "idx_episodes_isolation": "CREATE INDEX IF NOT EXISTS idx_episodes_isolation "
    "ON episodes(agent_id, project_id, created_at DESC)",
    # Ours: at most one embedding task per row; legacy task types are not affected.
    "idx_pending_tasks_embed": "CREATE UNIQUE INDEX IF NOT EXISTS idx_pending_tasks_embed "
    "ON pending_memory_tasks(payload) WHERE task_type = 'embed'",
}

UNIQUE_INDEXES = {
    "idx_memories_dedup_content": "CREATE UNIQUE INDEX IF NOT EXISTS idx_memories_dedup_content "
    "ON memories(agent_id, project_id, channel, content)",
    "idx_memories_dedup_msg_id": "CREATE UNIQUE INDEX IF NOT EXISTS idx_memories_dedup_msg_id "
    "ON memories(agent_id, project_id, msg_id) WHERE msg_id != ''",
}

FTS_TABLES = {
    "memories_fts": "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5("
    "content, content=memories, content_rowid=id, tokenize='trigram')",
    "episodes_fts": "CREATE VIRTUAL TABLE IF NOT EXISTS episodes_fts USING fts5("
    "summary, keywords, content=episodes, content_rowid=id, tokenize='trigram')",
}

FTS_TRIGGERS = {
    "memories_fts_ai": """CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END""",
    "memories_fts_ad": """CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content); END""",
    "memories_fts_au": """CREATE TRIGGER memories_fts_au AFTER UPDATE OF content ON memories
        WHEN old.content <> new.content BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END""",
    "episodes_ai": """CREATE TRIGGER episodes_ai AFTER INSERT ON episodes BEGIN
        INSERT INTO episodes_fts(rowid, summary, keywords) VALUES (new.id, new.summary, new.keywords); END""",
    "episodes_ad": """CREATE TRIGGER episodes_ad AFTER DELETE ON episodes BEGIN
        INSERT INTO episodes_fts(episodes_fts, rowid, summary, keywords)
        VALUES ('delete', old.id, old.summary, old.keywords); END""",
    "episodes_au": """CREATE TRIGGER episodes_au AFTER UPDATE OF summary, keywords ON episodes
        WHEN old.summary <> new.summary OR old.keywords <> new.keywords BEGIN
        INSERT INTO episodes_fts(episodes_fts, rowid, summary, keywords)
        VALUES ('delete', old.id, old.summary, old.keywords);
        INSERT INTO episodes_fts(rowid, summary, keywords) VALUES (new.id, new.summary, new.keywords); END""",
}

#: Ours, beyond v13: the word index beside the trigram index — stemmed words and CJK/Hangul
#: bigrams of the NFKC text (cpersona/util/words.py). `MemoryRepo.insert` / `update_content`
#: write its rows because the form is computed in Python; the triggers only remove rows, so a
#: write by the original CPersona (which knows neither table nor function) cannot fail on
#: them. Rows it added or changed are indexed at our next open (migration step "word index").
WORD_TABLES = {
    "memories_words": "CREATE VIRTUAL TABLE IF NOT EXISTS memories_words USING fts5("
    "body, tokenize='unicode61 remove_diacritics 0')",
}

WORD_TRIGGERS = {
    "memories_words_ad": """CREATE TRIGGER IF NOT EXISTS memories_words_ad AFTER DELETE ON memories BEGIN
        DELETE FROM memories_words WHERE rowid = old.id; END""",
    "memories_words_au": """CREATE TRIGGER IF NOT EXISTS memories_words_au AFTER UPDATE OF content ON memories
        WHEN old.content <> new.content BEGIN
        DELETE FROM memories_words WHERE rowid = old.id; END""",
}

#: The declared graph — the original CPersona 2.6's tables (its schema v15): entities with
#: their aliases, the records that mention them, subject–predicate–object relations. Same
#: columns and keys as the original's, so each release reads what the other wrote; created in
#: every file by the migration step "declared associations" (a 2.6 file has them already). A
#: lookup compares `normalized` (policy/associations.py), the name and alias are kept as written.
ASSOCIATION_TABLES = {
    "entities": """CREATE TABLE IF NOT EXISTS entities (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        channel TEXT NOT NULL DEFAULT '',
        name TEXT NOT NULL,
        normalized TEXT NOT NULL,
        declared_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (agent_id, project_id, channel, normalized))""",
    "entity_aliases": """CREATE TABLE IF NOT EXISTS entity_aliases (
        entity_id INTEGER NOT NULL,
        alias TEXT NOT NULL,
        normalized TEXT NOT NULL,
        PRIMARY KEY (entity_id, normalized))""",
    "entity_mentions": """CREATE TABLE IF NOT EXISTS entity_mentions (
        entity_id INTEGER NOT NULL,
        ref TEXT NOT NULL,
        declared_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (entity_id, ref))""",
    "relations": """CREATE TABLE IF NOT EXISTS relations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        channel TEXT NOT NULL DEFAULT '',
        subject_kind TEXT NOT NULL,
        subject_id INTEGER NOT NULL,
        predicate TEXT NOT NULL,
        object_kind TEXT NOT NULL,
        object_id INTEGER NOT NULL,
        anchor_ref TEXT NOT NULL DEFAULT '',
        declared_by TEXT NOT NULL,
        declared_at TEXT NOT NULL,
        UNIQUE (agent_id, project_id, channel, subject_kind, subject_id, predicate, object_kind, object_id,
                anchor_ref))""",
}

#: The original's lookup indexes of the graph (its check_health compares their DDL with these,
#: ignoring whitespace), and ours: relations by predicate and object record — "which rows does
#: a `supersedes` name as its object" is one index range.
ASSOCIATION_INDEXES = {
    "idx_entity_aliases_normalized": "CREATE INDEX IF NOT EXISTS idx_entity_aliases_normalized "
    "ON entity_aliases(normalized)",
    "idx_entity_mentions_ref": "CREATE INDEX IF NOT EXISTS idx_entity_mentions_ref ON entity_mentions(ref)",
    "idx_relations_subject": "CREATE INDEX IF NOT EXISTS idx_relations_subject ON relations(subject_kind, subject_id)",
    "idx_relations_object": "CREATE INDEX IF NOT EXISTS idx_relations_object ON relations(object_kind, object_id)",
    "idx_relations_anchor": "CREATE INDEX IF NOT EXISTS idx_relations_anchor ON relations(anchor_ref)",
    "idx_relations_predicate_object": "CREATE INDEX IF NOT EXISTS idx_relations_predicate_object "
    "ON relations(predicate, object_kind, object_id)",
}

#: No declaration outlives what it names: deleting an entity takes its aliases, mentions and
#: relations; deleting a memory or an episode takes its mentions and every relation naming it
#: as an endpoint or as its anchor. The original 2.6 creates the same triggers under the same
#: names and its check_health compares their text with its own (whitespace and case aside), so
#: these are its statements word for word.
ASSOCIATION_TRIGGERS = {
    "associations_entities_ad": """CREATE TRIGGER IF NOT EXISTS associations_entities_ad AFTER DELETE ON entities BEGIN
        DELETE FROM entity_aliases WHERE entity_id = old.id;
        DELETE FROM entity_mentions WHERE entity_id = old.id;
        DELETE FROM relations WHERE (subject_kind = 'entity' AND subject_id = old.id)
                                OR (object_kind = 'entity' AND object_id = old.id); END""",
    **{f"associations_{table}_ad": f"""CREATE TRIGGER IF NOT EXISTS associations_{table}_ad AFTER DELETE ON {table}
        BEGIN
        DELETE FROM entity_mentions WHERE ref = '{kind}:' || old.id;
        DELETE FROM relations WHERE (subject_kind = '{kind}' AND subject_id = old.id)
                                OR (object_kind = '{kind}' AND object_id = old.id)
                                OR anchor_ref = '{kind}:' || old.id; END""" for kind, table in (("mem", "memories"),
                                                                                              ("ep", "episodes"))},
}
