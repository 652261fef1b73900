import Foundation
import GRDB
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

// End-to-end encryption's keys on the device (migration "v-e2ee-keys"): this installation's key pair, each encrypted
// account's key ring, the newest payload `seq` seen per note, and which accounts a sign-in found plaintext.

/// What this device knows, from its earlier sign-ins, about how an account on a server proves its password.
enum CredentialMemory: Sendable, Equatable {
    /// Never signed in to here (or forgotten): ask the server's prelogin.
    case unknown
    /// A sign-in sent the password and the server answered that the account is plaintext; this device holds no key of
    /// it. A sign-in may send the password again without asking (the server had it at that sign-in already).
    case plaintext
    /// This device holds the account's keys: it is end-to-end encrypted, whatever a server says later. Its password
    /// never leaves the device; a prelogin answer that says otherwise is a downgrade and is refused.
    case encrypted
}

extension LocalStore.Transaction {
    /// This installation's key pair, made and stored on first use.
    func deviceKeyPair() throws -> DeviceKeyPair {
        if let secret = try Data.fetchOne(db.cachedStatement(sql: "SELECT secret FROM device_key WHERE id = 1")) {
            return try DeviceKeyPair(restoringSecretKey: [UInt8](secret))
        }
        let pair = DeviceKeyPair.generate()
        let secret = pair.withSecretKeyBytes { Data($0) }
        try db.execute(sql: "INSERT INTO device_key (id, secret) VALUES (1, ?)", arguments: [secret])
        return pair
    }

    /// The key ring of `account`: nil when this device holds no key of it (a plaintext account, or never signed in).
    func keyRing(of account: FlakeID) throws -> AccountKeyRing? {
        let rows = try Row.fetchAll(
            db.cachedStatement(sql: "SELECT generation, secret FROM account_keys WHERE account_id = ? ORDER BY generation"),
            arguments: [account.rawValue])
        guard !rows.isEmpty else { return nil }
        let keys = try rows.map { row throws in
            try AccountKey(account: account, generation: UInt32(row["generation"] as Int64), restoringSecretBytes: [UInt8](row["secret"] as Data))
        }
        return try AccountKeyRing(account: account, keys: keys)
    }

    /// Stores `keys` (of one or more generations of one account); a generation already stored is kept.
    func storeKeys(_ keys: [AccountKey]) throws {
        for key in keys {
            let secret = key.withSecretBytes { Data($0) }
            try db.execute(
                sql: "INSERT OR IGNORE INTO account_keys (account_id, generation, secret) VALUES (?, ?, ?)",
                arguments: [key.account.rawValue, Int64(key.generation), secret])
        }
    }

    /// Forgets every key of `account` and the `seq`s of its notes (the user forgets the account on this device).
    func forgetKeys(of account: FlakeID) throws {
        try db.execute(sql: "DELETE FROM account_keys WHERE account_id = ?", arguments: [account.rawValue])
        try db.execute(sql: "DELETE FROM note_seqs WHERE account_id = ?", arguments: [account.rawValue])
    }

    /// The newest payload `seq` of a note of `account` this device has seen, with the edit that wrote it.
    func noteSeq(account: FlakeID, clientID: FlakeID, origin: FlakeID) throws -> (seq: UInt64, editID: FlakeID)? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT seq, edit_id FROM note_seqs WHERE account_id = ? AND client_id = ? AND origin = ?"),
                arguments: [account.rawValue, clientID.rawValue, origin.rawValue])
        else { return nil }
        return (UInt64(row["seq"] as Int64), try FlakeID(stored: row["edit_id"]))
    }

    /// Remembers `seq` and `editID` as the newest seen of a note of `account`, sealed under key `generation`.
    func setNoteSeq(account: FlakeID, clientID: FlakeID, origin: FlakeID, seq: UInt64, editID: FlakeID, generation: UInt32) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO note_seqs (account_id, client_id, origin, seq, edit_id, generation) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (account_id, client_id, origin)
                DO UPDATE SET seq = excluded.seq, edit_id = excluded.edit_id, generation = excluded.generation
                """
        ).execute(arguments: [account.rawValue, clientID.rawValue, origin.rawValue, Int64(seq), editID.rawValue, Int64(generation)])
    }

    /// Queues for push at most `limit` notes of `account` whose server copy this device saw sealed under a key
    /// generation from 1 to `generation − 1` (lazy re-seal after a rotation): live, synced, without changes waiting,
    /// oldest generation first. Each push seals the note again under the newest generation. Returns how many.
    func queueReseal(account: FlakeID, below generation: UInt32, limit: Int) throws -> Int {
        guard generation > 1, limit > 0 else { return 0 }
        let ids = try Int64.fetchAll(
            db,
            sql: """
                SELECT n.id FROM note_seqs s JOIN notes n ON n.client_id = s.client_id AND n.origin = s.origin
                WHERE s.account_id = ? AND s.generation BETWEEN 1 AND ? AND n.owner_account_id = ?
                  AND n.server_id IS NOT NULL AND NOT n.dirty AND NOT n.deleted
                ORDER BY s.generation, n.id LIMIT ?
                """,
            arguments: [account.rawValue, Int64(generation) - 1, account.rawValue, limit])
        try queueForPush(ids)
        return ids.count
    }

    /// What this device knows about `username`'s account on `server` (its normalized URL text; the username is
    /// compared in its canonical form, as the server stores it).
    func credentialMemory(server: String, username: String) throws -> CredentialMemory {
        guard let canonical = CredentialRules.canonicalUsername(username) else { return .unknown }
        let row = try Row.fetchOne(
            db,
            sql: """
                SELECT EXISTS (SELECT 1 FROM account_keys WHERE account_id = k.account_id), k.plaintext
                FROM known_accounts k WHERE k.server_url = ? AND k.username = ?
                ORDER BY 1 DESC, k.account_id DESC LIMIT 1
                """,
            arguments: [server, canonical])
        guard let row else { return .unknown }
        if row[0] as Bool { return .encrypted }
        return row[1] as Bool ? .plaintext : .unknown
    }

    /// Remembers whether the known account `account` signed in as plaintext (``CredentialMemory/plaintext``); never
    /// for an account whose keys this device holds.
    func setPlaintext(_ account: FlakeID, _ plaintext: Bool) throws {
        try db.execute(
            sql: """
                UPDATE known_accounts SET plaintext = ? AND NOT EXISTS (SELECT 1 FROM account_keys WHERE account_id = ?)
                WHERE account_id = ?
                """,
            arguments: [plaintext, account.rawValue, account.rawValue])
    }
}
