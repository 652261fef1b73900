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
        return migrator
    }
}
