import Logging
import MiniFlake
import NIOCore
import NoteCrypto
import NoteSyncProtocol
import PostgresNIO

extension PostgresNoteStore: EncryptionStore {
    /// Inserts an encrypted account's key material on `connection` (in the transaction inserting the account).
    static func insertKeys(_ keys: AccountKeys, accountID: FlakeID, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.execute(
            """
            INSERT INTO account_keys (account_id, kdf_ops, kdf_mem, kdf_salt, wrapped_key, recovery_wrapped_key,
                                      recovery_public_key, password_public_key)
            VALUES (\(accountID.rawValue), \(Int64(clamping: keys.kdf.cost.opsLimit)), \(Int64(keys.kdf.cost.memLimitBytes)),
                    \(ByteBuffer(bytes: keys.kdf.salt)), \(ByteBuffer(bytes: keys.wrappedKey.bytes)),
                    \(ByteBuffer(bytes: keys.recoveryWrappedKey.bytes)), \(ByteBuffer(bytes: keys.recoveryPublicKey.bytes)),
                    \(ByteBuffer(bytes: keys.passwordPublicKey.bytes)))
            """,
            logger: logger)
    }

    public func serverSecret(named name: String, orCreate make: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        let candidate = ByteBuffer(bytes: make())
        // Insert unless there is one, then read whichever won: two daemons starting at once agree.
        return try await transaction { connection in
            try await connection.execute(
                "INSERT INTO server_secrets (name, secret) VALUES (\(name), \(candidate)) ON CONFLICT (name) DO NOTHING", logger: self.logger)
            var secret: [UInt8]?
            for try await value in try await connection.query("SELECT secret FROM server_secrets WHERE name = \(name)", logger: self.logger)
                .decode(ByteBuffer.self)
            {
                secret = Array(buffer: value)
            }
            guard let secret else { throw PostgresStoreError("the server secret \(name) was not stored") }
            return secret
        }
    }

    public func encryptionKeys(accountID: FlakeID) async throws -> AccountKeys? {
        try await run { client in
            let rows = try await client.query(
                """
                SELECT kdf_ops, kdf_mem, kdf_salt, wrapped_key, recovery_wrapped_key, recovery_public_key, password_public_key
                FROM account_keys WHERE account_id = \(accountID.rawValue)
                """,
                logger: self.logger)
            var keys: AccountKeys?
            for try await (ops, mem, salt, wrapped, recovery, recoveryPublic, passwordPublic) in rows.decode(
                (Int64, Int64, ByteBuffer, ByteBuffer, ByteBuffer, ByteBuffer, ByteBuffer).self)
            {
                keys = try EncryptionColumns.keys(
                    ops: ops, mem: mem, blobs: [salt, wrapped, recovery, recoveryPublic, passwordPublic].map { Array(buffer: $0) })
            }
            return keys
        }
    }

    public func keyChain(accountID: FlakeID, sessionID: FlakeID, generations: ClosedRange<UInt32>) async throws -> KeyChain {
        let (low, high) = (Int64(generations.lowerBound), Int64(generations.upperBound))
        let account = accountID.rawValue
        // One snapshot for both reads.
        return try await transaction { connection in
            var chain = KeyChain()
            for try await blob in try await connection.query(
                """
                SELECT wrapped_key FROM key_chain WHERE account_id = \(account) AND generation BETWEEN \(low) AND \(high)
                ORDER BY generation
                """,
                logger: self.logger
            ).decode(ByteBuffer.self) {
                chain.older.append(try WrappedAccountKey(decoding: Array(buffer: blob)))
            }
            for try await (recipient, generation, blob) in try await connection.query(
                """
                SELECT recipient, generation, handover FROM key_handovers
                WHERE account_id = \(account)
                  AND ((recipient = \(EncryptionColumns.sessionRecipient) AND session_id = \(sessionID.rawValue))
                       OR recipient = \(EncryptionColumns.passwordRecipient) OR recipient = \(EncryptionColumns.recoveryRecipient))
                  AND generation BETWEEN \(low) AND \(high)
                ORDER BY generation
                """,
                logger: self.logger
            ).decode((String, Int64, ByteBuffer).self) {
                let entry = (generation: UInt32(clamping: generation), handover: try KeyHandover(decoding: Array(buffer: blob)))
                chain.append(entry, recipient: recipient)
            }
            return chain
        }
    }

    public func rotateKeys(accountID: FlakeID, _ rotation: KeyRotation) async throws -> RotationOutcome {
        do {
            return try await transaction { connection in
                let outcome = try await self.rotate(accountID: accountID, rotation, on: connection)
                if outcome == .rotated, let recovery = rotation.recovery {
                    try await self.renewRecovery(recovery, accountID: accountID, generation: rotation.generation, on: connection)
                }
                return outcome
            }
        } catch RotationRefusal.unknownSession(let id) {
            return .unknownSession(id)
        }
    }

    /// Replaces the account's recovery material by `recovery` (of `generation`) and deletes the hand-overs sealed to
    /// the old recovery key, on a transaction's connection.
    private func renewRecovery(_ recovery: AccountRecovery, accountID: FlakeID, generation: UInt32, on connection: PostgresConnection)
        async throws
    {
        let account = accountID.rawValue
        try await connection.execute(
            """
            UPDATE account_keys SET recovery_wrapped_key = \(ByteBuffer(bytes: recovery.wrappedKey.bytes)),
                recovery_public_key = \(ByteBuffer(bytes: recovery.publicKey.bytes))
            WHERE account_id = \(account)
            """,
            logger: self.logger)
        try await connection.execute(
            """
            DELETE FROM key_handovers
            WHERE account_id = \(account) AND recipient = \(EncryptionColumns.recoveryRecipient) AND generation < \(Int64(generation))
            """,
            logger: self.logger)
    }

    public func changeEncryptedPassword(
        accountID: FlakeID, passwordHash: String, keys: AccountKeys, keepingSession: FlakeID,
        rotation: KeyRotation?
    ) async throws -> (RotationOutcome, revokedSessions: Int) {
        let account = accountID.rawValue
        let plaintext = EncryptionState.plaintext.rawValue
        do {
            return try await transaction { connection in
                if let rotation {
                    let outcome = try await self.rotate(accountID: accountID, rotation, on: connection)
                    guard outcome == .rotated else { return (outcome, 0) }
                }
                // The wrapped key must be of the generation the account is at (a rotation may have come between).
                let generation = Int64(keys.wrappedKey.generation)
                guard
                    try await self.count(
                        """
                        UPDATE accounts SET password_hash = \(passwordHash),
                            encryption = CASE WHEN encryption = \(EncryptionState.reset.rawValue) THEN \(EncryptionState.encrypted.rawValue) ELSE encryption END
                        WHERE id = \(account) AND encryption <> \(plaintext) AND key_generation = \(generation) RETURNING 1
                        """,
                        on: connection) == 1
                else {
                    return (.stale(current: try await self.keyGeneration(accountID: accountID, on: connection)), 0)
                }
                try await connection.execute(
                    """
                    UPDATE account_keys SET kdf_ops = \(Int64(clamping: keys.kdf.cost.opsLimit)), kdf_mem = \(Int64(keys.kdf.cost.memLimitBytes)),
                        kdf_salt = \(ByteBuffer(bytes: keys.kdf.salt)), wrapped_key = \(ByteBuffer(bytes: keys.wrappedKey.bytes)),
                        password_public_key = \(ByteBuffer(bytes: keys.passwordPublicKey.bytes))
                    WHERE account_id = \(account)
                    """,
                    logger: self.logger)
                let revoked = try await self.count(
                    "DELETE FROM sessions WHERE account_id = \(account) AND id <> \(keepingSession.rawValue) \(unescaped: Self.wakeWaiters)",
                    on: connection)
                return (.rotated, revoked)
            }
        } catch RotationRefusal.unknownSession(let id) {
            return (.unknownSession(id), 0)
        }
    }

    /// A rotation but its `recovery`, on a transaction's connection (see ``rotateKeys(accountID:_:)``); throws
    /// ``RotationRefusal`` to roll it back.
    private func rotate(accountID: FlakeID, _ rotation: KeyRotation, on connection: PostgresConnection) async throws -> RotationOutcome {
        let (older, handovers) = (rotation.older, rotation.handovers)
        let account = accountID.rawValue
        let new = Int64(rotation.generation)
        let plaintext = EncryptionState.plaintext.rawValue
        // The row lock serializes rotations (and pushes) of the account across daemons.
        guard
            try await self.count(
                """
                UPDATE accounts SET key_generation = \(new)
                WHERE id = \(account) AND key_generation = \(new - 1) AND encryption <> \(plaintext) RETURNING 1
                """, on: connection) == 1
        else {
            return .stale(current: try await keyGeneration(accountID: accountID, on: connection))
        }
        var sessions = Set<Int64>()
        for try await id in try await connection.query("SELECT id FROM sessions WHERE account_id = \(account)", logger: self.logger)
            .decode(Int64.self)
        {
            sessions.insert(id)
        }
        for case (.session(let id), _) in handovers where !sessions.contains(id.rawValue) {
            throw RotationRefusal.unknownSession(id)
        }
        try await connection.execute(
            "INSERT INTO key_chain (account_id, generation, wrapped_key) VALUES (\(account), \(new - 1), \(ByteBuffer(bytes: older.bytes)))",
            logger: self.logger)
        var recipients: [String] = [], sessionIDs: [Int64] = [], blobs: [ByteBuffer] = []
        for (recipient, handover) in handovers {
            let columns = EncryptionColumns.columns(recipient)
            recipients.append(columns.recipient)
            sessionIDs.append(columns.sessionID)
            blobs.append(ByteBuffer(bytes: handover.bytes))
        }
        try await connection.execute(
            """
            INSERT INTO key_handovers (account_id, generation, recipient, session_id, handover)
            SELECT \(account), \(new), r, s, h FROM unnest(\(recipients)::text[], \(sessionIDs)::int8[], \(blobs)::bytea[]) AS u(r, s, h)
            """,
            logger: self.logger)
        return .rotated
    }

    /// The key generation of an account that is not plaintext; 0 for a plaintext account or none.
    private func keyGeneration(accountID: FlakeID, on connection: PostgresConnection) async throws -> UInt32 {
        var current: Int64 = 0
        for try await value in try await connection.query(
            """
            SELECT key_generation FROM accounts WHERE id = \(accountID.rawValue) AND encryption <> \(EncryptionState.plaintext.rawValue)
            """, logger: logger
        ).decode(Int64.self) {
            current = value
        }
        return UInt32(clamping: current)
    }

    public func setUpEncryption(accountID: FlakeID, passwordHash: String, keys: AccountKeys, keepingSession: FlakeID) async throws
        -> SetUpOutcome
    {
        let account = accountID.rawValue
        return try await transaction { connection in
            // The row lock serializes the set-up with the account's pushes.
            var state: (String, Int64)?
            for try await row in try await connection.query(
                "SELECT encryption, note_count FROM accounts WHERE id = \(account) FOR UPDATE", logger: self.logger
            ).decode((String, Int64).self) {
                state = row
            }
            guard let state, state.0 == EncryptionState.plaintext.rawValue else { return .notPlaintext }
            let converting = state.1 > 0
            try await connection.execute(
                """
                UPDATE accounts SET password_hash = \(passwordHash),
                                    encryption = \((converting ? EncryptionState.converting : .encrypted).rawValue), key_generation = 1
                WHERE id = \(account)
                """,
                logger: self.logger)
            try await Self.insertKeys(keys, accountID: accountID, on: connection, logger: self.logger)
            let revoked = try await self.count(
                "DELETE FROM sessions WHERE account_id = \(account) AND id <> \(keepingSession.rawValue) \(unescaped: Self.wakeWaiters)",
                on: connection)
            let left = converting ? try await Self.startConversion(accountID: accountID, on: connection, logger: self.logger) : 0
            return .done(revokedSessions: revoked, plaintextNotes: left)
        }
    }

    public func plaintextNoteCount(accountID: FlakeID) async throws -> Int64 {
        try await transaction { connection in
            try await Self.plaintextNoteCount(accountID: accountID, on: connection, logger: self.logger)
        }
    }

    public func resetEncryptedPassword(accountID: FlakeID, passwordHash: String) async throws -> Bool {
        try await transaction { connection in
            let updated = try await self.count(
                """
                UPDATE accounts SET password_hash = \(passwordHash), encryption = \(EncryptionState.reset.rawValue)
                WHERE id = \(accountID.rawValue) AND encryption <> \(EncryptionState.plaintext.rawValue) RETURNING 1
                """, on: connection)
            guard updated == 1 else { return false }
            _ = try await self.count(
                "DELETE FROM sessions WHERE account_id = \(accountID.rawValue) \(unescaped: Self.wakeWaiters)", on: connection)
            return true
        }
    }
}
