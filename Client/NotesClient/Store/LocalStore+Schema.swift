import GRDB

extension LocalStore {
    /// The schema. Migrations are never edited once shipped: add new ones.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE settings (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        origin INTEGER NOT NULL CHECK (origin > 0),
                        flake_instance INTEGER NOT NULL CHECK (flake_instance BETWEEN 0 AND 1023),
                        flake_high_water INTEGER,
                        server_url TEXT,
                        account_id INTEGER,
                        username TEXT,
                        token TEXT,
                        cursor TEXT,
                        last_sync_at INTEGER,
                        base_account_id INTEGER
                    );
                    CREATE TABLE notes (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        client_id INTEGER NOT NULL CHECK (client_id > 0),
                        origin INTEGER NOT NULL CHECK (origin > 0),
                        server_id INTEGER,
                        server_version INTEGER,
                        text TEXT NOT NULL,
                        deleted INTEGER NOT NULL DEFAULT 0,
                        base_text TEXT,
                        revision INTEGER NOT NULL DEFAULT 1,
                        dirty INTEGER NOT NULL DEFAULT 1,
                        is_conflict INTEGER NOT NULL DEFAULT 0,
                        conflict_of_server_id INTEGER,
                        push_error TEXT,
                        push_error_message TEXT,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL
                    );
                    CREATE UNIQUE INDEX notes_client_id_origin ON notes(client_id, origin);
                    CREATE UNIQUE INDEX notes_server_id ON notes(server_id) WHERE server_id IS NOT NULL;
                    CREATE INDEX notes_dirty ON notes(id) WHERE dirty;
                    CREATE INDEX notes_updated_at ON notes(updated_at, id);
                    CREATE TABLE outbox (
                        note_id INTEGER PRIMARY KEY REFERENCES notes(id) ON DELETE CASCADE,
                        edit_id INTEGER NOT NULL UNIQUE,
                        text TEXT NOT NULL,
                        deleted INTEGER NOT NULL,
                        base_version INTEGER,
                        base_text TEXT,
                        server_id INTEGER,
                        revision INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v2-account-bases") { db in
            // The base texts of the accounts this installation is not signed in to (see `switchBases` in
            // LocalStore+Sync): signing back in to one pushes its notes with that account's bases, so an edit made
            // meanwhile fast-forwards or merges instead of becoming a conflict copy.
            try db.execute(
                sql: """
                    CREATE TABLE account_bases (
                        account_id INTEGER NOT NULL,
                        note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
                        base_text TEXT NOT NULL,
                        PRIMARY KEY (account_id, note_id)
                    ) WITHOUT ROWID;
                    CREATE INDEX account_bases_note ON account_bases(note_id);
                    -- Clean live notes without a server ID: left by a sign-in for its first pull to find.
                    CREATE INDEX notes_unmatched ON notes(id) WHERE server_id IS NULL AND NOT dirty AND NOT deleted;
                    """)
        }
        migrator.registerMigration("v3-client-id-high-water") { db in
            // The last client ID minted with a scheme other than MiniFlake (see `mintClientID`): those schemes repeat
            // values, and their IDs lie far below MiniFlake's, so they cannot share `flake_high_water`.
            try db.execute(sql: "ALTER TABLE settings ADD COLUMN client_id_high_water INTEGER")
        }
        migrator.registerMigration("v4-text-bytes") { db in
            // Texts become UTF-8 BLOBs (see `StoredText`): GRDB binds and reads a Swift string as a C string, so a NUL
            // in a note cut it short. The empty text stays the TEXT value ''.
            for (table, column) in [("notes", "text"), ("notes", "base_text"), ("outbox", "text"), ("outbox", "base_text"), ("account_bases", "base_text")] {
                try db.execute(
                    sql: "UPDATE \(table) SET \(column) = CAST(\(column) AS BLOB) WHERE typeof(\(column)) = 'text' AND \(column) <> ''")
            }
        }
        migrator.registerMigration("v5-limits-and-edit-times") { db in
            try db.execute(
                sql: """
                    -- The remembered server's limits (GET /v1/info at the last sync): local writes are checked against them.
                    ALTER TABLE settings ADD COLUMN max_note_bytes INTEGER;
                    ALTER TABLE settings ADD COLUMN max_body_bytes INTEGER;
                    -- Set while a pull has more pages to fetch: `notes status` tells an interrupted sync from a finished one.
                    ALTER TABLE settings ADD COLUMN pull_unfinished INTEGER NOT NULL DEFAULT 0;
                    -- A snapshot's edit time (the note's updated_at when it was taken), sent as the change's editedAt.
                    ALTER TABLE outbox ADD COLUMN edited_at INTEGER;
                    -- A conflict copy that holds this device's text (the answer to its own push), not another device's.
                    ALTER TABLE notes ADD COLUMN conflict_here INTEGER NOT NULL DEFAULT 0;
                    -- Notes the server refused: every sync lists them.
                    CREATE INDEX notes_refused ON notes(id) WHERE push_error IS NOT NULL;
                    """)
        }
        migrator.registerMigration("v6-search") { db in
            // Full-text search over every note's text (SQLite FTS5, external content: the index holds no copy of
            // the texts). Triggers keep it in step with `notes` inside the same transactions.
            try db.execute(
                sql: """
                    CREATE VIRTUAL TABLE notes_search USING fts5(
                        text, content = 'notes', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2');
                    INSERT INTO notes_search (notes_search) VALUES ('rebuild');
                    CREATE TRIGGER notes_search_insert AFTER INSERT ON notes BEGIN
                        INSERT INTO notes_search (rowid, text) VALUES (new.id, new.text);
                    END;
                    CREATE TRIGGER notes_search_delete AFTER DELETE ON notes BEGIN
                        INSERT INTO notes_search (notes_search, rowid, text) VALUES ('delete', old.id, old.text);
                    END;
                    CREATE TRIGGER notes_search_update AFTER UPDATE OF text ON notes WHEN old.text IS NOT new.text BEGIN
                        INSERT INTO notes_search (notes_search, rowid, text) VALUES ('delete', old.id, old.text);
                        INSERT INTO notes_search (rowid, text) VALUES (new.id, new.text);
                    END;
                    """)
        }
        migrator.registerMigration("v7-trash") { db in
            // The text of each deleted note, kept for `notes trash` and `notes restore` (a sync empties the note
            // itself): filled by a trigger whenever a note becomes a tombstone, whoever deleted it; emptied when the
            // note comes back, and of entries older than the trash keeps (NotesClient.trashDays).
            try db.execute(
                sql: """
                    CREATE TABLE trash (
                        note_id INTEGER PRIMARY KEY REFERENCES notes(id) ON DELETE CASCADE,
                        text BLOB NOT NULL,
                        deleted_at INTEGER NOT NULL
                    );
                    CREATE INDEX trash_by_age ON trash(deleted_at);
                    CREATE TRIGGER notes_trash_in AFTER UPDATE OF deleted ON notes
                    WHEN new.deleted AND NOT old.deleted AND length(old.text) > 0 BEGIN
                        INSERT OR REPLACE INTO trash (note_id, text, deleted_at) VALUES (old.id, old.text, new.updated_at);
                    END;
                    CREATE TRIGGER notes_trash_out AFTER UPDATE OF deleted ON notes WHEN old.deleted AND NOT new.deleted BEGIN
                        DELETE FROM trash WHERE note_id = new.id;
                    END;
                    """)
        }
        migrator.registerMigration("v-owner-accounts") { db in
            // Accounts on one device (issue 16; see `OwnerPlanner`). Every note has an owner: the account it was
            // created under or synced with (its server-minted ID), or none for a note written while signed out and
            // never synced. `aside` hides the notes of every account but the one on show (`last_account_id`: the
            // signed-in account, else the last one), and the unowned notes while an account they were not carried
            // into is signed in. Owners of existing notes come from what the store knows: the account of the base
            // text (or of an in-flight snapshot), else an account that kept a base for the note, else the
            // signed-in account (the old client pushed every note to it), else none.
            try db.execute(
                sql: """
                    ALTER TABLE notes ADD COLUMN owner_account_id INTEGER;
                    ALTER TABLE notes ADD COLUMN aside INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE settings ADD COLUMN last_account_id INTEGER;
                    CREATE TABLE known_accounts (
                        account_id INTEGER PRIMARY KEY,
                        username TEXT NOT NULL,
                        server_url TEXT NOT NULL
                    );
                    INSERT INTO known_accounts (account_id, username, server_url)
                    SELECT account_id, username, server_url FROM settings
                    WHERE id = 1 AND account_id IS NOT NULL AND username IS NOT NULL AND server_url IS NOT NULL;
                    UPDATE settings SET last_account_id = CASE WHEN token IS NOT NULL THEN account_id ELSE base_account_id END
                    WHERE id = 1;
                    UPDATE notes SET owner_account_id = (SELECT base_account_id FROM settings WHERE id = 1)
                    WHERE base_text IS NOT NULL OR id IN (SELECT note_id FROM outbox);
                    UPDATE notes SET owner_account_id = (SELECT MIN(b.account_id) FROM account_bases b WHERE b.note_id = notes.id)
                    WHERE owner_account_id IS NULL;
                    UPDATE notes SET owner_account_id = (SELECT account_id FROM settings WHERE id = 1 AND token IS NOT NULL)
                    WHERE owner_account_id IS NULL;
                    UPDATE notes SET aside = 1
                    WHERE owner_account_id IS NOT NULL AND owner_account_id IS NOT (SELECT last_account_id FROM settings WHERE id = 1);
                    DROP TABLE account_bases;
                    DROP INDEX notes_client_id_origin;
                    CREATE UNIQUE INDEX notes_owner_client_id_origin ON notes(owner_account_id, client_id, origin);
                    CREATE INDEX notes_client_id ON notes(client_id, origin);
                    CREATE INDEX notes_aside ON notes(owner_account_id) WHERE aside;
                    -- A new note belongs to the signed-in account (none while signed out): whatever inserts it (a
                    -- local add, a pull, a conflict copy), unless the insert names an owner (a copy to an account).
                    CREATE TRIGGER notes_owner AFTER INSERT ON notes WHEN new.owner_account_id IS NULL BEGIN
                        UPDATE notes SET owner_account_id = (SELECT account_id FROM settings WHERE id = 1) WHERE id = new.id;
                    END;
                    """)
        }
        migrator.registerMigration("v-kept-account-state") { db in
            // Issue 30: the million-note account.
            // - No trigger fires on an INSERT into notes any more: a statement that fires a trigger keeps a
            //   statement journal, a copy of every page it touches that the transaction had already changed (six
            //   per pulled note, two thirds of a first sign-in's writes). Each insert names its owner
            //   (`NoteInsert.owner`) and indexes its text for search (`SearchIndex.add`) itself, in one place each.
            // - An account's sync state outlives its sessions: a sign-out (or a revoked session) keeps the notes'
            //   server IDs and versions, which belong to their owner, and the account's pull cursor
            //   (`known_accounts.cursor`), so signing in again pulls only what changed meanwhile. Server IDs are
            //   unique per owner: two servers may mint the same one.
            try db.execute(
                sql: """
                    DROP TRIGGER notes_owner;
                    DROP TRIGGER notes_search_insert;
                    ALTER TABLE known_accounts ADD COLUMN cursor TEXT;
                    DROP INDEX notes_server_id;
                    CREATE UNIQUE INDEX notes_owner_server_id ON notes(owner_account_id, server_id) WHERE server_id IS NOT NULL;
                    """)
        }
        migrator.registerMigration("v-tags-flags-history") { db in
            // Issue 31: tags, pinned and archived notes, and every version kept (see `NoteTags`).
            // - A note's tags are `notes.tags`, its display forms sorted by key and joined by "\n" ('' for none), and
            //   one row per tag in `note_tags` (key, display form), which `list --tag` and `notes tags` read by key.
            //   Both are written together, by the statements of `NoteTags` only; a tombstone keeps its `tags` and has
            //   no `note_tags` rows, so the counts are those of live notes without reading `notes`. `tag_counts` holds
            //   each key's count of those rows, kept in step by the same statements (added up per transaction).
            // - Beside `base_text`, what was last synced of the tags and flags (`base_tags`, `base_pinned`,
            //   `base_archived`): a push sends them with the note's own, and the server merges three-way. A note
            //   never synced has the empty set and false: the state every note had before, here and on the server.
            // - The outbox snapshot carries the tags, flags and their bases; NULL in a snapshot taken before this
            //   migration, which is sent again without them (the server then leaves them as they are).
            // - `note_versions` caches the server's history of a note (`notes history`), fetched on demand only.
            try db.execute(
                sql: """
                    ALTER TABLE notes ADD COLUMN tags TEXT NOT NULL DEFAULT '';
                    ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE notes ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE notes ADD COLUMN base_tags TEXT NOT NULL DEFAULT '';
                    ALTER TABLE notes ADD COLUMN base_pinned INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE notes ADD COLUMN base_archived INTEGER NOT NULL DEFAULT 0;
                    CREATE TABLE note_tags (
                        key TEXT NOT NULL,
                        note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
                        name TEXT NOT NULL,
                        PRIMARY KEY (key, note_id)
                    ) WITHOUT ROWID;
                    CREATE INDEX note_tags_note ON note_tags(note_id);
                    -- How many rows of note_tags each key has (notes set aside included): `notes tags` reads these,
                    -- not the index. Kept by the statements of NoteTags, once per transaction.
                    CREATE TABLE tag_counts (key TEXT PRIMARY KEY, notes INTEGER NOT NULL) WITHOUT ROWID;
                    -- `notes list`: pinned notes first, then the most recently edited, archived ones apart.
                    CREATE INDEX notes_listing ON notes(archived, pinned, updated_at, id);
                    ALTER TABLE outbox ADD COLUMN tags TEXT;
                    ALTER TABLE outbox ADD COLUMN pinned INTEGER;
                    ALTER TABLE outbox ADD COLUMN archived INTEGER;
                    ALTER TABLE outbox ADD COLUMN base_tags TEXT;
                    ALTER TABLE outbox ADD COLUMN base_pinned INTEGER;
                    ALTER TABLE outbox ADD COLUMN base_archived INTEGER;
                    CREATE TABLE note_versions (
                        note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
                        server_id INTEGER NOT NULL,
                        version INTEGER NOT NULL,
                        text BLOB NOT NULL,
                        deleted INTEGER NOT NULL,
                        tags TEXT NOT NULL,
                        pinned INTEGER NOT NULL,
                        archived INTEGER NOT NULL,
                        edited_at INTEGER NOT NULL,
                        saved_at INTEGER NOT NULL,
                        device TEXT
                    );
                    CREATE UNIQUE INDEX note_versions_by_note ON note_versions(note_id, server_id, version);
                    """)
        }
        migrator.registerMigration("v-e2ee-keys") { db in
            // Issue 32: end-to-end encryption (see `LocalStore+Keys.swift`).
            // - `device_key`: this installation's X25519 key pair (the secret half; the public one is recomputed),
            //   made at its first sign-in; what a rotation seals new account-key generations to.
            // - `account_keys`: each encrypted account's key ring, one row per generation, the unwrapped key. Never
            //   the password or the WrapKey. A sign-out keeps them (the notes stay readable on the device).
            // - `note_seqs`: per note of an encrypted account, the newest payload `seq` and the edit ID that wrote it
            //   that this device has seen (pushed and accepted, or pulled and opened): a record with a lower `seq`, or
            //   the same `seq` and another edit, is a rollback and is refused. A pushed edit's `seq` is this one + 1.
            // - `known_accounts.plaintext`: 1 once a sign-in sent the password itself and the server answered that the
            //   account is plaintext; a later sign-in to it skips prelogin (see `LocalStore+Keys.swift`). Never 1 for an
            //   account this device holds keys of.
            try db.execute(
                sql: """
                    ALTER TABLE known_accounts ADD COLUMN plaintext INTEGER NOT NULL DEFAULT 0;
                    CREATE TABLE device_key (id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL);
                    CREATE TABLE account_keys (
                        account_id INTEGER NOT NULL,
                        generation INTEGER NOT NULL CHECK (generation >= 1),
                        secret BLOB NOT NULL,
                        PRIMARY KEY (account_id, generation)
                    ) WITHOUT ROWID;
                    CREATE TABLE note_seqs (
                        account_id INTEGER NOT NULL,
                        client_id INTEGER NOT NULL,
                        origin INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        edit_id INTEGER NOT NULL,
                        PRIMARY KEY (account_id, client_id, origin)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v-e2ee-generations") { db in
            // Issue 32, key generations: `note_seqs.generation` is the account-key generation the note's server copy
            // was sealed under (0: seen before this column, never re-sealed by `queueReseal`); a sync queues a few
            // notes of older generations to be sealed again under the newest (lazy re-seal after a rotation).
            try db.execute(sql: "ALTER TABLE note_seqs ADD COLUMN generation INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v-attachments") { db in
            // Issue 33: attachments on notes (see `StoredAttachments`). A note's attachments are `notes.attachments`,
            // their manifests as a JSON array sorted by name ('' for none), and beside it what was last synced of
            // them (`base_attachments`), which a push sends for the server's three-way merge, as `base_tags`. The
            // outbox snapshot carries both; NULL in a snapshot taken before this migration, sent as none (with none
            // as its base, which changes nothing on the server). A version in the history cache keeps its own.
            // The chunks themselves are files in the data directory's `chunks/` (`ChunkCache`), not rows.
            try db.execute(
                sql: """
                    ALTER TABLE notes ADD COLUMN attachments TEXT NOT NULL DEFAULT '';
                    ALTER TABLE notes ADD COLUMN base_attachments TEXT NOT NULL DEFAULT '';
                    ALTER TABLE outbox ADD COLUMN attachments TEXT;
                    ALTER TABLE outbox ADD COLUMN base_attachments TEXT;
                    ALTER TABLE note_versions ADD COLUMN attachments TEXT NOT NULL DEFAULT '';
                    """)
        }
        return migrator
    }
}
