import GRDB

extension SQLiteNoteStore {
    /// The schema's migrations. Never edit a shipped migration: add a new one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE accounts (
                        id INTEGER PRIMARY KEY,
                        username TEXT NOT NULL UNIQUE,
                        password_hash TEXT NOT NULL,
                        change_seq INTEGER NOT NULL DEFAULT 0,
                        created_at INTEGER NOT NULL
                    );
                    CREATE TABLE sessions (
                        id INTEGER PRIMARY KEY,
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        token_hash TEXT NOT NULL UNIQUE,
                        device_name TEXT,
                        origin INTEGER,
                        created_at INTEGER NOT NULL
                    );
                    CREATE INDEX sessions_by_account ON sessions(account_id);
                    CREATE TABLE notes (
                        server_id INTEGER PRIMARY KEY,
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        client_id INTEGER NOT NULL,
                        origin INTEGER NOT NULL,
                        version INTEGER NOT NULL,
                        text BLOB,
                        deleted INTEGER NOT NULL DEFAULT 0,
                        conflict_of INTEGER,
                        change_seq INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL
                    );
                    CREATE UNIQUE INDEX notes_by_client_key ON notes(account_id, client_id, origin);
                    CREATE UNIQUE INDEX notes_by_change_seq ON notes(account_id, change_seq);
                    CREATE TABLE applied_edits (
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        edit_id INTEGER NOT NULL,
                        client_id INTEGER NOT NULL,
                        origin INTEGER NOT NULL,
                        pusher INTEGER NOT NULL, -- 0 when the pushing installation is unknown (a key column)
                        status TEXT NOT NULL,
                        server_id INTEGER,
                        version INTEGER,
                        conflict_server_id INTEGER,
                        conflict_client_id INTEGER,
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (account_id, edit_id, client_id, origin, pusher)
                    ) WITHOUT ROWID;
                    """
            )
        }
        migrator.registerMigration("v2: applied edits by age") { db in
            try db.execute(sql: "CREATE INDEX applied_edits_by_age ON applied_edits(created_at)")
        }
        migrator.registerMigration("v3: applied edits keep their answer's text") { db in
            // A replay answers exactly the original result, text included. Edits applied before this migration
            // did not keep it: the merged, conflict and kept ones (the statuses whose answer had a text) take the
            // note's text at migration time, which is what their replays answered until now.
            try db.execute(
                sql: """
                    ALTER TABLE applied_edits ADD COLUMN text BLOB;
                    UPDATE applied_edits SET text = (
                        SELECT COALESCE(n.text, X'') FROM notes n
                        WHERE n.server_id = applied_edits.server_id AND n.account_id = applied_edits.account_id)
                    WHERE status IN ('merged', 'conflict', 'kept');
                    """
            )
        }
        migrator.registerMigration("v4: edit times") { db in
            // When each note's content was edited, by the editing device's clock (NULL before this migration).
            try db.execute(sql: "ALTER TABLE notes ADD COLUMN edited_at INTEGER")
        }
        migrator.registerMigration("v5: sessions and quotas") { db in
            // When each session last made a request (kept to the minute; NULL until then), and each account's running
            // totals for its quota, counted once here from the notes it has (an empty text is stored as NULL).
            try db.execute(
                sql: """
                    ALTER TABLE sessions ADD COLUMN last_seen_at INTEGER;
                    ALTER TABLE accounts ADD COLUMN note_count INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE accounts ADD COLUMN text_bytes INTEGER NOT NULL DEFAULT 0;
                    UPDATE accounts SET
                        note_count = (SELECT COUNT(*) FROM notes WHERE notes.account_id = accounts.id),
                        text_bytes = (SELECT COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM notes WHERE notes.account_id = accounts.id);
                    """
            )
        }
        migrator.registerMigration("v6: operators") { db in
            // When the operator disabled the account (`notesyncd users disable`); NULL while it is enabled.
            try db.execute(sql: "ALTER TABLE accounts ADD COLUMN disabled_at INTEGER")
        }
        migrator.registerMigration("v7: invites") { db in
            // Invite codes (`--sign-up invite`, `notesyncd invites`): only each code's SHA-256 is kept; a sign-up takes
            // one use in the transaction that inserts its account.
            try db.execute(
                sql: """
                    CREATE TABLE invites (
                        id INTEGER PRIMARY KEY,
                        code_hash TEXT NOT NULL UNIQUE,
                        note TEXT,
                        uses_total INTEGER NOT NULL CHECK (uses_total >= 1),
                        uses_left INTEGER NOT NULL CHECK (uses_left >= 0 AND uses_left <= uses_total),
                        expires_at INTEGER,
                        created_at INTEGER NOT NULL,
                        revoked_at INTEGER
                    );
                    """
            )
        }
        migrator.registerMigration("v8: replay texts in the quota") { db in
            // The UTF-8 bytes of the texts each account's applied edits keep for replays, a running total like
            // text_bytes (the byte limit counts both), counted once here from the applied edits the account has.
            try db.execute(
                sql: """
                    ALTER TABLE accounts ADD COLUMN replay_text_bytes INTEGER NOT NULL DEFAULT 0;
                    UPDATE accounts SET replay_text_bytes = (
                        SELECT COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM applied_edits
                        WHERE applied_edits.account_id = accounts.id);
                    """
            )
        }
        migrator.registerMigration("v9: tags, flags and history") { db in
            // Tags and flags on notes (a note's tags are its display forms sorted by key, joined by "\n", '' for
            // none: a tag holds no "\n"), the ones a push answer carried on applied edits (NULL: the answer carried
            // none), and the history: every version of a note a push wrote from now on (notes written before this
            // migration have none until their next change), with its text's bytes as a running total like the others.
            try db.execute(
                sql: """
                    ALTER TABLE notes ADD COLUMN tags TEXT NOT NULL DEFAULT '';
                    ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE notes ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE applied_edits ADD COLUMN tags TEXT;
                    ALTER TABLE applied_edits ADD COLUMN pinned INTEGER;
                    ALTER TABLE applied_edits ADD COLUMN archived INTEGER;
                    ALTER TABLE accounts ADD COLUMN history_bytes INTEGER NOT NULL DEFAULT 0;
                    CREATE TABLE note_versions (
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        server_id INTEGER NOT NULL,
                        version INTEGER NOT NULL,
                        text BLOB NOT NULL,
                        deleted INTEGER NOT NULL,
                        tags TEXT NOT NULL,
                        pinned INTEGER NOT NULL,
                        archived INTEGER NOT NULL,
                        edited_at INTEGER NOT NULL,
                        saved_at INTEGER NOT NULL,
                        device TEXT,
                        PRIMARY KEY (account_id, server_id, version)
                    );
                    CREATE INDEX note_versions_by_age ON note_versions(saved_at);
                    """
            )
        }
        migrator.registerMigration("v10: chunks") { db in
            // Attachments' chunks (issue 33; "v10" because issue 31's "v9: tags, flags and history" landed first):
            // one row per chunk an account stores (its bytes are a file under the data directory's chunks/), and
            // their bytes in the account's running totals (the byte limit counts them). referenced_at is when a note
            // (or a `missing` answer) last referred to the chunk: the garbage collector deletes a chunk unreferenced
            // for the grace period.
            try db.execute(
                sql: """
                    ALTER TABLE accounts ADD COLUMN chunk_bytes INTEGER NOT NULL DEFAULT 0;
                    CREATE TABLE chunks (
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        hash TEXT NOT NULL,
                        size INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        referenced_at INTEGER NOT NULL,
                        PRIMARY KEY (account_id, hash)
                    ) WITHOUT ROWID;
                    CREATE INDEX chunks_by_reference ON chunks(referenced_at);
                    """
            )
        }
        // Registered last under a name of its own: at a merge with another branch's migration it moves after it
        // and takes the next number (the name is what GRDB records; nothing before the merge has shipped it).
        migrator.registerMigration(Self.encryptionMigration) { db in
            // End-to-end encryption: each account's state and current key generation on its row (plaintext, 0 for
            // every account before this migration); an encrypted account's key material (opaque blobs the server
            // cannot open), its key chain (generation g wrapped by g + 1) and its rotations' hand-overs; each
            // session's device public key; the edit that wrote each note's content and each version; and the
            // server's own secrets (the one fake prelogin salts are made with).
            try db.execute(
                sql: """
                    ALTER TABLE accounts ADD COLUMN encryption TEXT NOT NULL DEFAULT 'plaintext';
                    ALTER TABLE accounts ADD COLUMN key_generation INTEGER NOT NULL DEFAULT 0;
                    CREATE TABLE account_keys (
                        account_id INTEGER PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
                        kdf_ops INTEGER NOT NULL,
                        kdf_mem INTEGER NOT NULL,
                        kdf_salt BLOB NOT NULL,
                        wrapped_key BLOB NOT NULL,
                        recovery_wrapped_key BLOB NOT NULL,
                        recovery_public_key BLOB NOT NULL,
                        password_public_key BLOB NOT NULL
                    );
                    CREATE TABLE key_chain (
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        generation INTEGER NOT NULL,
                        wrapped_key BLOB NOT NULL,
                        PRIMARY KEY (account_id, generation)
                    );
                    CREATE TABLE key_handovers (
                        account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        generation INTEGER NOT NULL,
                        recipient TEXT NOT NULL,
                        session_id INTEGER NOT NULL,
                        handover BLOB NOT NULL,
                        PRIMARY KEY (account_id, recipient, session_id, generation)
                    );
                    ALTER TABLE sessions ADD COLUMN device_public_key BLOB;
                    ALTER TABLE notes ADD COLUMN edit_id INTEGER;
                    ALTER TABLE note_versions ADD COLUMN edit_id INTEGER;
                    CREATE TABLE server_secrets (
                        name TEXT PRIMARY KEY,
                        secret BLOB NOT NULL
                    );
                    """
            )
        }
        // Registered after the encryption migration under a name of its own, for the same reason (renumber at a merge).
        migrator.registerMigration(Self.conversionMigration) { db in
            // Converting a plaintext account to end-to-end encryption (`POST /v1/account/encryption` on an account
            // that holds notes): the notes and history versions of a converting account still in the clear (set for
            // every note and version of the account when the conversion starts; a note's is cleared when an
            // encrypted push replaces its text), and the index that counts what is left.
            try db.execute(
                sql: """
                    ALTER TABLE notes ADD COLUMN plaintext INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE note_versions ADD COLUMN plaintext INTEGER NOT NULL DEFAULT 0;
                    CREATE INDEX notes_still_plaintext ON notes(account_id) WHERE plaintext = 1;
                    """
            )
        }
        migrator.registerMigration(Self.attachmentsMigration) { db in
            // Attachments on notes (issue 33 phase 2): a note's and a version's manifests as a JSON array ('' for
            // none; always '' in an encrypted account, whose manifests are in the envelope), and the chunks each
            // refers to (ascending addresses joined by "\n"; an encrypted note's pushed chunkRefs): what the chunk
            // collector keeps. The partial indexes list only the rows that refer to a chunk.
            try db.execute(
                sql: """
                    ALTER TABLE notes ADD COLUMN attachments TEXT NOT NULL DEFAULT '';
                    ALTER TABLE notes ADD COLUMN chunk_refs TEXT NOT NULL DEFAULT '';
                    ALTER TABLE note_versions ADD COLUMN attachments TEXT NOT NULL DEFAULT '';
                    ALTER TABLE note_versions ADD COLUMN chunk_refs TEXT NOT NULL DEFAULT '';
                    CREATE INDEX notes_with_chunks ON notes(account_id) WHERE chunk_refs <> '';
                    CREATE INDEX note_versions_with_chunks ON note_versions(account_id) WHERE chunk_refs <> '';
                    """
            )
        }
        return migrator
    }

    /// The end-to-end encryption migration's name (after "v10: chunks", which landed first).
    static let encryptionMigration = "v11: end-to-end encryption"

    /// The conversion migration's name (after the encryption migration; renumber it at a merge).
    static let conversionMigration = "v12: conversion to end-to-end encryption"

    /// The attachments-on-notes migration's name (after the conversion migration; renumber it at a merge).
    static let attachmentsMigration = "v13: attachments on notes"
}
