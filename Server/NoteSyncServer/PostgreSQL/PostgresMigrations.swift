import PostgresNIO

/// The schema: its migrations and the runner. The tables `instance_leases` (``InstanceLease``),
/// `sign_in_attempts` (``PostgresSignInThrottle``) and `notesyncd_migrations` exist only in PostgreSQL; the others match the SQLite store's (a test compares them).
extension PostgresDatabase {
    /// The migrations, in order. Never edit a shipped migration: append a new one.
    static let migrations: [(version: Int, sql: [String])] = [
        (
            1,
            [
                """
                CREATE TABLE accounts (
                    id BIGINT PRIMARY KEY,
                    username TEXT NOT NULL UNIQUE,
                    password_hash TEXT NOT NULL,
                    change_seq BIGINT NOT NULL DEFAULT 0,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE sessions (
                    id BIGINT PRIMARY KEY,
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    token_hash TEXT NOT NULL UNIQUE,
                    device_name TEXT,
                    origin BIGINT,
                    created_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX sessions_by_account ON sessions(account_id)",
                """
                CREATE TABLE notes (
                    server_id BIGINT PRIMARY KEY,
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    client_id BIGINT NOT NULL,
                    origin BIGINT NOT NULL,
                    version BIGINT NOT NULL,
                    text BYTEA NOT NULL,
                    deleted BOOLEAN NOT NULL DEFAULT FALSE,
                    conflict_of BIGINT,
                    change_seq BIGINT NOT NULL,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL
                )
                """,
                "CREATE UNIQUE INDEX notes_by_client_key ON notes(account_id, client_id, origin)",
                "CREATE UNIQUE INDEX notes_by_change_seq ON notes(account_id, change_seq)",
                """
                CREATE TABLE applied_edits (
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    edit_id BIGINT NOT NULL,
                    client_id BIGINT NOT NULL,
                    origin BIGINT NOT NULL,
                    pusher BIGINT NOT NULL, -- 0 when the pushing installation is unknown (a key column)
                    status TEXT NOT NULL,
                    server_id BIGINT,
                    version BIGINT,
                    conflict_server_id BIGINT,
                    conflict_client_id BIGINT,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (account_id, edit_id, client_id, origin, pusher)
                )
                """,
                """
                CREATE TABLE instance_leases (
                    instance INTEGER PRIMARY KEY CHECK (instance BETWEEN 0 AND 1023),
                    holder TEXT NOT NULL,
                    acquired_at TIMESTAMPTZ NOT NULL,
                    renewed_at TIMESTAMPTZ NOT NULL,
                    expires_at TIMESTAMPTZ NOT NULL
                )
                """,
            ]
        ),
        (2, ["CREATE INDEX applied_edits_by_age ON applied_edits(created_at)"]),
        (
            3,
            [
                // A replay answers exactly the original result, text included. Edits applied before this migration
                // take the note's text at migration time for the statuses whose answer had one (what their replays
                // answered until now).
                "ALTER TABLE applied_edits ADD COLUMN text BYTEA",
                """
                UPDATE applied_edits e SET text = n.text FROM notes n
                WHERE n.server_id = e.server_id AND n.account_id = e.account_id AND e.status IN ('merged', 'conflict', 'kept')
                """,
            ]
        ),
        (
            4,
            [
                // The sign-in throttle shared by every daemon (PostgresSignInThrottle); PostgreSQL only.
                """
                CREATE TABLE sign_in_attempts (
                    username TEXT NOT NULL,
                    attempted_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX sign_in_attempts_by_username ON sign_in_attempts(username, attempted_at)",
                "CREATE INDEX sign_in_attempts_by_age ON sign_in_attempts(attempted_at)",
            ]
        ),
        // When each note's content was edited, by the editing device's clock (NULL before this migration).
        (5, ["ALTER TABLE notes ADD COLUMN edited_at BIGINT"]),
        (
            6,
            [
                // Sessions and quotas: when each session last made a request (kept to the minute), and each account's
                // running totals, counted once here from the notes it has.
                "ALTER TABLE sessions ADD COLUMN last_seen_at BIGINT",
                "ALTER TABLE accounts ADD COLUMN note_count BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE accounts ADD COLUMN text_bytes BIGINT NOT NULL DEFAULT 0",
                """
                UPDATE accounts a SET note_count = c.n, text_bytes = c.b
                FROM (SELECT account_id, COUNT(*) AS n, COALESCE(SUM(octet_length(text)), 0) AS b FROM notes GROUP BY account_id) c
                WHERE c.account_id = a.id
                """,
            ]
        ),
        // When the operator disabled the account (`notesyncd users disable`); NULL while it is enabled.
        (7, ["ALTER TABLE accounts ADD COLUMN disabled_at BIGINT"]),
        (
            8,
            [
                // Invite codes (`--sign-up invite`, `notesyncd invites`): only each code's SHA-256 is kept; a sign-up
                // takes one use in the transaction that inserts its account.
                """
                CREATE TABLE invites (
                    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    code_hash TEXT NOT NULL UNIQUE,
                    note TEXT,
                    uses_total BIGINT NOT NULL CHECK (uses_total >= 1),
                    uses_left BIGINT NOT NULL CHECK (uses_left >= 0 AND uses_left <= uses_total),
                    expires_at BIGINT,
                    created_at BIGINT NOT NULL,
                    revoked_at BIGINT
                )
                """,
            ]
        ),
        (
            9,
            [
                // The UTF-8 bytes of the texts each account's applied edits keep for replays, a running total like
                // text_bytes (the byte limit counts both), counted once here from the applied edits the account has.
                "ALTER TABLE accounts ADD COLUMN replay_text_bytes BIGINT NOT NULL DEFAULT 0",
                """
                UPDATE accounts a SET replay_text_bytes = c.b
                FROM (SELECT account_id, SUM(octet_length(text)) AS b FROM applied_edits WHERE text IS NOT NULL GROUP BY account_id) c
                WHERE c.account_id = a.id
                """,
            ]
        ),
        (
            10,
            [
                // Tags and flags on notes (display forms sorted by key, joined by "\n", '' for none), the ones a push
                // answer carried on applied edits (NULL: none), and the history: every version of a note a push
                // writes from now on, with its texts' bytes as a running total like the others.
                "ALTER TABLE notes ADD COLUMN tags TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE notes ADD COLUMN pinned BOOLEAN NOT NULL DEFAULT FALSE",
                "ALTER TABLE notes ADD COLUMN archived BOOLEAN NOT NULL DEFAULT FALSE",
                "ALTER TABLE applied_edits ADD COLUMN tags TEXT",
                "ALTER TABLE applied_edits ADD COLUMN pinned BOOLEAN",
                "ALTER TABLE applied_edits ADD COLUMN archived BOOLEAN",
                "ALTER TABLE accounts ADD COLUMN history_bytes BIGINT NOT NULL DEFAULT 0",
                """
                CREATE TABLE note_versions (
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    server_id BIGINT NOT NULL,
                    version BIGINT NOT NULL,
                    text BYTEA NOT NULL,
                    deleted BOOLEAN NOT NULL,
                    tags TEXT NOT NULL,
                    pinned BOOLEAN NOT NULL,
                    archived BOOLEAN NOT NULL,
                    edited_at BIGINT NOT NULL,
                    saved_at BIGINT NOT NULL,
                    device TEXT,
                    PRIMARY KEY (account_id, server_id, version)
                )
                """,
                "CREATE INDEX note_versions_by_age ON note_versions(saved_at)",
            ]
        ),
        (
            // 11: issue 31's tags, flags and history (10) landed first.
            11,
            [
                // Attachments' chunks (issue 33): one row per chunk an account stores, the same table as SQLite's;
                // their bytes in chunk_data (PostgreSQL only: SQLite keeps them in files), one bytea each, stored out
                // of line uncompressed (a chunk is often compressed or encrypted already); and their bytes in the
                // account's running totals (the byte limit counts them).
                "ALTER TABLE accounts ADD COLUMN chunk_bytes BIGINT NOT NULL DEFAULT 0",
                """
                CREATE TABLE chunks (
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    hash TEXT NOT NULL,
                    size BIGINT NOT NULL,
                    created_at BIGINT NOT NULL,
                    referenced_at BIGINT NOT NULL,
                    PRIMARY KEY (account_id, hash)
                )
                """,
                "CREATE INDEX chunks_by_reference ON chunks(referenced_at)",
                """
                CREATE TABLE chunk_data (
                    account_id BIGINT NOT NULL,
                    hash TEXT NOT NULL,
                    data BYTEA NOT NULL,
                    PRIMARY KEY (account_id, hash),
                    FOREIGN KEY (account_id, hash) REFERENCES chunks(account_id, hash) ON DELETE CASCADE
                )
                """,
                "ALTER TABLE chunk_data ALTER COLUMN data SET STORAGE EXTERNAL",
            ]
        ),
        (
            // End-to-end encryption (SQLite's "v11: end-to-end encryption"; 12 because attachments' chunks (11)
            // landed first).
            12,
            [
                "ALTER TABLE accounts ADD COLUMN encryption TEXT NOT NULL DEFAULT 'plaintext'",
                "ALTER TABLE accounts ADD COLUMN key_generation BIGINT NOT NULL DEFAULT 0",
                """
                CREATE TABLE account_keys (
                    account_id BIGINT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
                    kdf_ops BIGINT NOT NULL,
                    kdf_mem BIGINT NOT NULL,
                    kdf_salt BYTEA NOT NULL,
                    wrapped_key BYTEA NOT NULL,
                    recovery_wrapped_key BYTEA NOT NULL,
                    recovery_public_key BYTEA NOT NULL,
                    password_public_key BYTEA NOT NULL
                )
                """,
                """
                CREATE TABLE key_chain (
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    generation BIGINT NOT NULL,
                    wrapped_key BYTEA NOT NULL,
                    PRIMARY KEY (account_id, generation)
                )
                """,
                """
                CREATE TABLE key_handovers (
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    generation BIGINT NOT NULL,
                    recipient TEXT NOT NULL,
                    session_id BIGINT NOT NULL,
                    handover BYTEA NOT NULL,
                    PRIMARY KEY (account_id, recipient, session_id, generation)
                )
                """,
                "ALTER TABLE sessions ADD COLUMN device_public_key BYTEA",
                "ALTER TABLE notes ADD COLUMN edit_id BIGINT",
                "ALTER TABLE note_versions ADD COLUMN edit_id BIGINT",
                """
                CREATE TABLE server_secrets (
                    name TEXT PRIMARY KEY,
                    secret BYTEA NOT NULL
                )
                """,
            ]
        ),
        (
            // Converting a plaintext account to end-to-end encryption (SQLite's "v12: conversion to end-to-end
            // encryption"; renumber freely at a merge, nothing has shipped it): which notes and history versions of a
            // converting account are still in the clear.
            13,
            [
                "ALTER TABLE notes ADD COLUMN plaintext BOOLEAN NOT NULL DEFAULT false",
                "ALTER TABLE note_versions ADD COLUMN plaintext BOOLEAN NOT NULL DEFAULT false",
                "CREATE INDEX notes_still_plaintext ON notes(account_id) WHERE plaintext",
            ]
        ),
        (
            // Attachments on notes (SQLite's "v13: attachments on notes"; renumber freely at a merge): a note's and a
            // version's manifests as a JSON array ('' for none) and the chunks each refers to (addresses joined by
            // "\n"), what the chunk collector keeps; partial indexes over the rows that refer to a chunk.
            14,
            [
                "ALTER TABLE notes ADD COLUMN attachments TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE notes ADD COLUMN chunk_refs TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE note_versions ADD COLUMN attachments TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE note_versions ADD COLUMN chunk_refs TEXT NOT NULL DEFAULT ''",
                "CREATE INDEX notes_with_chunks ON notes(account_id) WHERE chunk_refs <> ''",
                "CREATE INDEX note_versions_with_chunks ON note_versions(account_id) WHERE chunk_refs <> ''",
            ]
        ),
    ]

    /// The newest schema version this build knows.
    public static var schemaVersion: Int { migrations.last?.version ?? 0 }

    /// Brings the schema up to date. Safe when several daemons start at once: the whole migration runs in one
    /// transaction holding a transaction-level advisory lock (keyed by the schema's name), so one daemon migrates
    /// and the others wait, then find nothing to do. Refuses a database migrated by a newer notesyncd.
    public func migrate() async throws {
        try await transaction { connection in
            try await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.notesyncd.migrate'))", logger: self.logger
            )
            try await connection.execute(
                """
                CREATE TABLE IF NOT EXISTS notesyncd_migrations (
                    version INTEGER PRIMARY KEY,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """,
                logger: self.logger
            )
            var applied = Set<Int>()
            for try await version in try await connection.query("SELECT version FROM notesyncd_migrations", logger: self.logger)
                .decode(Int.self)
            {
                applied.insert(version)
            }
            if let newest = applied.max(), newest > Self.schemaVersion {
                throw ConfigurationError(
                    "the database schema is at version \(newest), newer than this notesyncd knows (\(Self.schemaVersion)); upgrade notesyncd"
                )
            }
            for migration in Self.migrations where !applied.contains(migration.version) {
                for statement in migration.sql {
                    try await connection.execute(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                }
                try await connection.execute(
                    "INSERT INTO notesyncd_migrations (version) VALUES (\(migration.version))", logger: self.logger
                )
                self.logger.info("database migrated", metadata: ["version": "\(migration.version)"])
            }
        }
    }

    /// The schema version recorded in the database (0 before the first migration).
    public func appliedSchemaVersion() async throws -> Int {
        try await run { client in
            let rows = try await client.query(
                "SELECT COALESCE(MAX(version), 0) FROM notesyncd_migrations", logger: self.logger
            )
            var version = 0
            for try await value in rows.decode(Int.self) { version = value }
            return version
        }
    }
}
