import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import NotesClient

/// Issue 32 in the simulation: encrypted accounts, the canary words their notes are written in, the auditor's opening
/// of what the server serves of them, and the scans of the server's store (``Invariant/noPlaintextOnServer``).
extension Simulation {
    /// Signs up account `k` as ``SimParameters/encryptedAccounts`` says it is.
    func createAccount(_ k: Int, username: String) async throws -> SimAccount {
        guard parameters.encryptedAccounts.contains(k) else {
            return try await SimAccount.create(username: username, password: Self.password, on: server)
        }
        summary.encryptedAccounts += 1
        return try await SimAccount.create(username: username, password: Self.password, encryptedAs: try mintAccountID(), on: server)
    }

    /// Whether notes of `owner` are an encrypted account's: one of the accounts, or a deleted account of an encrypted
    /// account's index (its notes on devices are still its own until a sign-in disowns them). Nil: no account.
    func isEncrypted(owner: FlakeID?) -> Bool {
        guard let owner else { return false }
        if let account = accounts.first(where: { $0.accountID == owner }) { return account.isEncrypted }
        return oracle.deletedAccountIDs.contains { k, ids in ids.contains(owner) && parameters.encryptedAccounts.contains(k) }
    }

    /// What a schedule's token or tag becomes on a note of `owner`: its canary word on an encrypted account's note,
    /// itself otherwise (a note of no account may join a plaintext account).
    func written(_ token: String, owner: FlakeID?) -> String {
        guard isEncrypted(owner: owner) else { return token }
        summary.canaryWords += 1
        return Canary.word(token)
    }

    /// The owner of one of the device's live notes, as the checks last read it (its account's when not read yet).
    func owner(of note: LocalNote, on device: SimDevice) -> FlakeID? {
        if let owner = device.liveOwners[note.id] { return owner }
        return device.liveIDs.contains(note.id) ? nil : (try? device.client.account()?.accountID)
    }

    /// Whether the device holds a note of no account (on show, set aside or deleted) with a canary word in its text or
    /// tags (a deleted encrypted account's), or an attachment whose bytes hold one (``SimFile/canaryBytes``).
    func holdsUnownedCanary(_ device: SimDevice) throws -> Bool {
        let unowned = Set(try local(device.index) { try device.client.identities() }.notes.filter { $0.owner == nil }.map(\.id))
        guard !unowned.isEmpty else { return false }
        return try local(device.index) { try device.client.allNotes(includingSetAside: true) }.contains { note in
            unowned.contains(note.id) && holdsCanary(note)
        }
    }

    /// Whether `note`'s text, a tag or an attachment's bytes hold a canary word: it must not reach a plaintext account.
    func holdsCanary(_ note: LocalNote) -> Bool {
        Canary.isIn(note.text) || note.tags.contains(where: Canary.isIn) || note.attachments.contains { oracle.canaryFiles.contains($0.sha256) }
    }

    /// Account `k`'s notes as the server serves them, opened as a device of the account opens them when it is
    /// encrypted: each text must be an envelope (a tombstone's may be empty) that opens for exactly its note and edit,
    /// with no tag or flag in the clear beside it; its payload's text, tags and flags take its place, so every other
    /// check compares what the devices wrote.
    ///
    /// - Throws: a ``Invariant/noPlaintextOnServer`` violation naming the first note that is not so.
    func opened(_ records: [NoteRecord], account k: Int) throws -> [NoteRecord] {
        guard let keys = accounts[k].keys else { return records }
        return try records.map { record in
            if !(record.tags ?? []).isEmpty || record.pinned == true || record.archived == true {
                throw fail(.noPlaintextOnServer, "account \(k) (encrypted): the server serves note \(record.clientID)/\(record.origin) with tags or flags in the clear")
            }
            if record.deleted && record.text.isEmpty { return record }
            let payload = try open(
                record.text, editID: record.editID, of: "note \(record.clientID)/\(record.origin)", clientID: record.clientID,
                origin: record.origin, account: k, keys: keys)
            return record.opened(as: payload)
        }
    }

    /// A note's history versions (`serverID` of account `k`), opened as ``opened(_:account:)`` opens its records.
    func opened(_ versions: [NoteVersion], of record: NoteRecord, account k: Int) throws -> [NoteVersion] {
        guard let keys = accounts[k].keys else { return versions }
        return try versions.map { version in
            if !version.tags.isEmpty || version.pinned || version.archived {
                throw fail(.noPlaintextOnServer, "account \(k) (encrypted): version \(version.version) of note \(record.serverID) has tags or flags in the clear")
            }
            if version.deleted && version.text.isEmpty { return version }
            let payload = try open(
                version.text, editID: version.editID, of: "version \(version.version) of note \(record.clientID)/\(record.origin)",
                clientID: record.clientID, origin: record.origin, account: k, keys: keys)
            return version.opened(as: payload)
        }
    }

    /// The payload of a text the server serves of encrypted account `k` as edit `editID` of a note.
    private func open(
        _ text: String, editID: FlakeID?, of what: String, clientID: FlakeID, origin: FlakeID, account k: Int, keys: SimAccountKeys
    ) throws -> NotePayload {
        do {
            let payload = try keys.open(text, editID: editID, clientID: clientID, origin: origin)
            summary.envelopesOpened += 1
            return payload
        } catch .inTheClear {
            throw fail(.noPlaintextOnServer, "account \(k) (encrypted): the server holds the text of \(what) in the clear, not as a note envelope")
        } catch .doesNotOpen(let why) {
            throw fail(.noPlaintextOnServer, "account \(k) (encrypted): the text of \(what) is not an envelope of that note's edit: \(why)")
        }
    }

    /// The invariant's second half: the server's store, read as files, holds no canary word. After every server
    /// restart and at the end of every run; the in-process server's SQLite store is a file (database, WAL, `-shm`)
    /// and its attachment chunk files (`chunks/` beside it), a daemon's are scanned when `--scan-store` names its
    /// database (see ``SimServer/storeFiles``), and a PostgreSQL store's tables (`chunk_data`'s bytea included, read
    /// in hexadecimal), dumped by `pg_dump`, when `--scan-postgres` names the database (``SimServer/postgresURL``).
    func scanStore(_ when: String) throws {
        guard server.storeFiles != nil || server.postgresURL != nil else { return }
        var result = StoreScan.Result()
        do {
            if let files = server.storeFiles { result = try StoreScan.scan(files: files) }
            if let database = server.postgresURL {
                let tables = try StoreScan.scanPostgres(database)
                result.hits += tables.hits
                result.bytes += tables.bytes
            }
        } catch {
            throw fail(.unexpectedError, "the server's store could not be read for the scan \(when): \(error)")
        }
        summary.storeScans += 1
        summary.bytesScanned += result.bytes
        note(nil, .sync, "store scanned \(when): \(result.bytes) bytes, \(result.hits.count) canary words")
        guard result.hits.isEmpty else {
            throw fail(
                .noPlaintextOnServer,
                "the server's store holds an encrypted account's words in the clear (scan \(when)): \(result.hits.prefix(3).map(\.description).joined(separator: ", "))\(result.hits.count > 3 ? ", ..." : "")")
        }
    }

    /// An encrypted account's device made conflict copies in a sync (texts that did not merge on the device: a new
    /// note of this device, in that account, with this device's text): the account may hold them. They are the notes
    /// above the device's largest local ID at its last check, of this device's origin, owned by an encrypted account,
    /// that the account was not known to hold (pulled notes of this origin are; a note created by a step is permitted
    /// by it, and notes that change owner keep their local IDs). Called after every network step of a device while
    /// an account is encrypted, whether the step's sync finished or a fault cut it short, before the checks read the
    /// server.
    func permitDeviceConflictCopies(on device: SimDevice) throws {
        let origin = device.client.origin
        for copy in try local(device.index, { try device.client.identities() }).notes
        where copy.id > device.maxLocalID && copy.origin == origin {
            guard let k = accounts.firstIndex(where: { $0.accountID == copy.owner }), accounts[k].isEncrypted else { continue }
            let key = NoteKeyValue(clientID: copy.clientID, origin: copy.origin)
            if oracle.permitted[k]?.contains(key) != true {
                oracle.permit(key, in: k)
                note(device.index, .conflict, "conflict copy made on the device: \(copy.clientID.base32)")
            }
        }
    }

    /// Notes the devices refused as tampered in this step: a correct server never serves one.
    func checkTampered() throws {
        guard let first = tampered.first else { return }
        tampered = []
        throw fail(.unexpectedError, first)
    }
}

extension SimFile {
    /// The file's bytes as attached to a note of an encrypted account or of no account (which may join one): ``bytes``
    /// with the canary word `qzcanaryxvfile` at the start of every chunk (a file shorter than the word has none), so
    /// that a chunk of it stored in the clear on the server is a canary hit of the store scans.
    var canaryBytes: Data {
        var data = bytes
        let word = Data(Canary.word("file").utf8)
        for offset in stride(from: 0, to: data.count - word.count + 1, by: ChunkRules.chunkSize) {
            data.replaceSubrange(offset..<offset + word.count, with: word)
        }
        return data
    }
}
