import Foundation
import GRDB
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

extension SQLiteNoteStore: EncryptionStore {
    /// Inserts an encrypted account's key material in the caller's transaction (the one inserting the account).
    static func insertKeys(_ keys: AccountKeys, accountID: FlakeID, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO account_keys (account_id, kdf_ops, kdf_mem, kdf_salt, wrapped_key, recovery_wrapped_key,
                                          recovery_public_key, password_public_key)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                accountID.rawValue, Int64(clamping: keys.kdf.cost.opsLimit), keys.kdf.cost.memLimitBytes, Data(keys.kdf.salt),
                Data(keys.wrappedKey.bytes), Data(keys.recoveryWrappedKey.bytes), Data(keys.recoveryPublicKey.bytes),
                Data(keys.passwordPublicKey.bytes),
            ])
    }

    public func serverSecret(named name: String, orCreate make: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        let candidate = make()
        return try await write { db in
            if let secret = try Data.fetchOne(db, sql: "SELECT secret FROM server_secrets WHERE name = ?", arguments: [name]) {
                return Array(secret)
            }
            try db.execute(sql: "INSERT INTO server_secrets (name, secret) VALUES (?, ?)", arguments: [name, Data(candidate)])
            return candidate
        }
    }

    public func encryptionKeys(accountID: FlakeID) async throws -> AccountKeys? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT kdf_ops, kdf_mem, kdf_salt, wrapped_key, recovery_wrapped_key, recovery_public_key,
                                   password_public_key
                            FROM account_keys WHERE account_id = ?
                            """), arguments: [accountID.rawValue])
            else { return nil }
            let blobs: [Data] = [row[2], row[3], row[4], row[5], row[6]]
            return try EncryptionColumns.keys(ops: row[0], mem: row[1], blobs: blobs.map { Array($0) })
        }
    }

    public func keyChain(accountID: FlakeID, sessionID: FlakeID, generations: ClosedRange<UInt32>) async throws -> KeyChain {
        try await read { db in
            let account = accountID.rawValue
            let (low, high) = (Int64(generations.lowerBound), Int64(generations.upperBound))
            var chain = KeyChain()
            let older = try Data.fetchCursor(
                db.cachedStatement(
                    sql: "SELECT wrapped_key FROM key_chain WHERE account_id = ? AND generation BETWEEN ? AND ? ORDER BY generation"),
                arguments: [account, low, high])
            while let blob = try older.next() { chain.older.append(try WrappedAccountKey(decoding: Array(blob))) }
            let handovers = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT recipient, generation, handover FROM key_handovers
                        WHERE account_id = ? AND ((recipient = ? AND session_id = ?) OR recipient IN (?, ?))
                          AND generation BETWEEN ? AND ?
                        ORDER BY generation
                        """),
                arguments: [
                    account, EncryptionColumns.sessionRecipient, sessionID.rawValue, EncryptionColumns.passwordRecipient,
                    EncryptionColumns.recoveryRecipient, low, high,
                ])
            while let row = try handovers.next() {
                let blob: Data = row[2]
                let entry = (generation: UInt32(clamping: row[1] as Int64), handover: try KeyHandover(decoding: Array(blob)))
                chain.append(entry, recipient: row[0])
            }
            return chain
        }
    }

    public func rotateKeys(accountID: FlakeID, _ rotation: KeyRotation) async throws -> RotationOutcome {
        do {
            return try await write { db in
                let outcome = try Self.rotate(accountID: accountID, rotation, db)
                if outcome == .rotated, let recovery = rotation.recovery {
                    try Self.renewRecovery(recovery, accountID: accountID, generation: rotation.generation, db)
                }
                return outcome
            }
        } catch RotationRefusal.unknownSession(let id) {
            return .unknownSession(id)
        }
    }

    /// Replaces the account's recovery material by `recovery` (of `generation`) and deletes the hand-overs sealed to
    /// the old recovery key, in the caller's transaction.
    static func renewRecovery(_ recovery: AccountRecovery, accountID: FlakeID, generation: UInt32, _ db: Database) throws {
        try db.execute(
            sql: "UPDATE account_keys SET recovery_wrapped_key = ?, recovery_public_key = ? WHERE account_id = ?",
            arguments: [Data(recovery.wrappedKey.bytes), Data(recovery.publicKey.bytes), accountID.rawValue])
        try db.execute(
            sql: "DELETE FROM key_handovers WHERE account_id = ? AND recipient = ? AND generation < ?",
            arguments: [accountID.rawValue, EncryptionColumns.recoveryRecipient, Int64(generation)])
    }

    public func changeEncryptedPassword(
        accountID: FlakeID, passwordHash: String, keys: AccountKeys, keepingSession: FlakeID,
        rotation: KeyRotation?
    ) async throws -> (RotationOutcome, revokedSessions: Int) {
        do {
            return try await write { db in
                let account = accountID.rawValue
                let plaintext = EncryptionState.plaintext.rawValue
                if let rotation {
                    let outcome = try Self.rotate(accountID: accountID, rotation, db)
                    guard outcome == .rotated else { return (outcome, 0) }
                }
                // The wrapped key must be of the generation the account is at (a rotation may have come between).
                try db.execute(
                    sql: """
                        UPDATE accounts SET password_hash = ?, encryption = CASE WHEN encryption = ? THEN ? ELSE encryption END
                        WHERE id = ? AND encryption <> ? AND key_generation = ?
                        """,
                    arguments: [
                        passwordHash, EncryptionState.reset.rawValue, EncryptionState.encrypted.rawValue, account, plaintext,
                        Int64(keys.wrappedKey.generation),
                    ])
                guard db.changesCount == 1 else { return (.stale(current: try Self.keyGeneration(accountID: accountID, db)), 0) }
                try db.execute(
                    sql: "UPDATE account_keys SET kdf_ops = ?, kdf_mem = ?, kdf_salt = ?, wrapped_key = ?, password_public_key = ? WHERE account_id = ?",
                    arguments: [
                        Int64(clamping: keys.kdf.cost.opsLimit), keys.kdf.cost.memLimitBytes, Data(keys.kdf.salt), Data(keys.wrappedKey.bytes),
                        Data(keys.passwordPublicKey.bytes), account,
                    ])
                try db.execute(
                    sql: "DELETE FROM sessions WHERE account_id = ? AND id <> ?", arguments: [account, keepingSession.rawValue])
                return (.rotated, db.changesCount)
            }
        } catch RotationRefusal.unknownSession(let id) {
            return (.unknownSession(id), 0)
        }
    }

    /// A rotation but its `recovery`, in the caller's transaction (see ``rotateKeys(accountID:_:)``); throws
    /// ``RotationRefusal`` to roll it back.
    static func rotate(accountID: FlakeID, _ rotation: KeyRotation, _ db: Database) throws -> RotationOutcome {
        let (generation, older, handovers) = (rotation.generation, rotation.older, rotation.handovers)
        let account = accountID.rawValue
        try db.execute(
            sql: "UPDATE accounts SET key_generation = ? WHERE id = ? AND key_generation = ? AND encryption <> ?",
            arguments: [Int64(generation), account, Int64(generation) - 1, EncryptionState.plaintext.rawValue])
        guard db.changesCount == 1 else { return .stale(current: try keyGeneration(accountID: accountID, db)) }
        let sessions = try Set(Int64.fetchAll(db, sql: "SELECT id FROM sessions WHERE account_id = ?", arguments: [account]))
        for case (.session(let id), _) in handovers where !sessions.contains(id.rawValue) {
            // Nothing of the rotation is kept: the transaction rolls back.
            throw RotationRefusal.unknownSession(id)
        }
        try db.execute(
            sql: "INSERT INTO key_chain (account_id, generation, wrapped_key) VALUES (?, ?, ?)",
            arguments: [account, Int64(generation) - 1, Data(older.bytes)])
        let insert = try db.cachedStatement(
            sql: "INSERT INTO key_handovers (account_id, generation, recipient, session_id, handover) VALUES (?, ?, ?, ?, ?)")
        for (recipient, handover) in handovers {
            let columns = EncryptionColumns.columns(recipient)
            try insert.execute(arguments: [account, Int64(generation), columns.recipient, columns.sessionID, Data(handover.bytes)])
        }
        return .rotated
    }

    /// The key generation of an account that is not plaintext; 0 for a plaintext account or none.
    static func keyGeneration(accountID: FlakeID, _ db: Database) throws -> UInt32 {
        let current = try Int64.fetchOne(
            db, sql: "SELECT key_generation FROM accounts WHERE id = ? AND encryption <> ?",
            arguments: [accountID.rawValue, EncryptionState.plaintext.rawValue]) ?? 0
        return UInt32(clamping: current)
    }

    public func setUpEncryption(accountID: FlakeID, passwordHash: String, keys: AccountKeys, keepingSession: FlakeID) async throws
        -> SetUpOutcome
    {
        let outcome = try await setUp(accountID: accountID, passwordHash: passwordHash, keys: keys, keepingSession: keepingSession)
        // A conversion with nothing live to convert finished at once: its old texts leave the WAL too.
        if case .done(_, 0) = outcome { await truncateWriteAheadLog() }
        return outcome
    }

    private func setUp(accountID: FlakeID, passwordHash: String, keys: AccountKeys, keepingSession: FlakeID) async throws -> SetUpOutcome {
        try await write { db in
            let account = accountID.rawValue
            guard let row = try Row.fetchOne(db, sql: "SELECT encryption, note_count FROM accounts WHERE id = ?", arguments: [account]),
                (row[0] as String) == EncryptionState.plaintext.rawValue
            else { return .notPlaintext }
            let converting = (row[1] as Int64) > 0
            try db.execute(
                sql: "UPDATE accounts SET password_hash = ?, encryption = ?, key_generation = 1 WHERE id = ?",
                arguments: [passwordHash, (converting ? EncryptionState.converting : .encrypted).rawValue, account])
            try Self.insertKeys(keys, accountID: accountID, db)
            try db.execute(sql: "DELETE FROM sessions WHERE account_id = ? AND id <> ?", arguments: [account, keepingSession.rawValue])
            let revoked = db.changesCount
            return .done(revokedSessions: revoked, plaintextNotes: converting ? try Self.startConversion(accountID: accountID, db) : 0)
        }
    }

    public func plaintextNoteCount(accountID: FlakeID) async throws -> Int64 {
        try await read { db in try Self.plaintextNoteCount(accountID: accountID, db) }
    }

    public func resetEncryptedPassword(accountID: FlakeID, passwordHash: String) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE accounts SET password_hash = ?, encryption = ? WHERE id = ? AND encryption <> ?",
                arguments: [passwordHash, EncryptionState.reset.rawValue, accountID.rawValue, EncryptionState.plaintext.rawValue])
            guard db.changesCount == 1 else { return false }
            try db.execute(sql: "DELETE FROM sessions WHERE account_id = ?", arguments: [accountID.rawValue])
            return true
        }
    }
}

extension KeyChain {
    /// Files a hand-over read from `key_handovers` under its recipient column.
    mutating func append(_ entry: (generation: UInt32, handover: KeyHandover), recipient: String) {
        switch recipient {
        case EncryptionColumns.passwordRecipient: passwordHandovers.append(entry)
        case EncryptionColumns.recoveryRecipient: recoveryHandovers.append(entry)
        default: handovers.append(entry)
        }
    }
}

/// Thrown inside a rotation's transaction to roll it back (``RotationOutcome/unknownSession(_:)``).
enum RotationRefusal: Error {
    case unknownSession(FlakeID)
}

/// How both stores keep key material: the columns' forms, read back strictly (a blob that does not decode is a
/// server fault, never served).
enum EncryptionColumns {
    /// `key_handovers.recipient` for a hand-over sealed to a session's device key (`session_id` names it).
    static let sessionRecipient = "session"
    /// ... to the password's public key (`session_id` 0).
    static let passwordRecipient = "password"
    /// ... to the recovery key's public key (`session_id` 0).
    static let recoveryRecipient = "recovery"

    /// The recipient's column values.
    static func columns(_ recipient: HandoverRecipient) -> (recipient: String, sessionID: Int64) {
        switch recipient {
        case .session(let id): (sessionRecipient, id.rawValue)
        case .password: (passwordRecipient, 0)
        case .recoveryKey: (recoveryRecipient, 0)
        }
    }

    /// An `account_keys` row: the KDF cost, then the salt, the wrapped key, the recovery-wrapped key, the recovery
    /// public key and the password public key.
    static func keys(ops: Int64, mem: Int64, blobs: [[UInt8]]) throws -> AccountKeys {
        AccountKeys(
            kdf: try KDFParameters(cost: KDFCost(opsLimit: UInt64(clamping: ops), memLimitBytes: Int(clamping: mem)), salt: blobs[0]),
            wrappedKey: try WrappedAccountKey(decoding: blobs[1]), recoveryWrappedKey: try WrappedAccountKey(decoding: blobs[2]),
            recoveryPublicKey: try DevicePublicKey(bytes: blobs[3]), passwordPublicKey: try DevicePublicKey(bytes: blobs[4]))
    }
}
