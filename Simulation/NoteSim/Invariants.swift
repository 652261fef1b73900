import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient

/// The invariants the simulation checks.
public enum Invariant: String, Codable, Sendable, CaseIterable {
    /// No account holds two notes for one (client ID, origin); no device holds two local notes for one server note.
    case noDuplicates = "no-duplicates"
    /// Every note in an account was created there by a device signed in to it, carried there by a sign-in from the
    /// notes a device wrote while signed out (never synced), or copied there: a note synced with or pulled from one
    /// account is never in another. A signed-in device shows only its account's notes.
    case noCrossAccount = "no-cross-account"
    /// Every edit is in its note's text, merged into it, or in a conflict copy, unless someone who saw it removed it.
    case noLostEdit = "no-lost-edit"
    /// After every device syncs twice with no faults, each signed-in device shows exactly its account's notes.
    case convergence = "convergence"
    /// A device's pull cursor never moves backward within one sign-in.
    case cursorMonotonic = "cursor-monotonic"
    /// A note's server ID never changes once given.
    case serverIDStable = "server-id-stable"
    /// Every ID is a valid MiniFlake value (server IDs carry the server's instance number).
    case validIDs = "valid-ids"
    /// An operation that must succeed failed (no fault was injected).
    case unexpectedError = "unexpected-error"
    /// A push delivered twice is answered the same both times, and the replay writes nothing.
    case idempotentReplay = "idempotent-replay"
    /// Pulls from a cursor miss nothing: an account's changes pulled step by step add up to all of its notes.
    case pullComplete = "pull-complete"
    /// A watching device's waiting pull is answered once its account moves past the pull's cursor (a commit wakes
    /// it, or its re-read finds the change), and once faults stop a watching device converges with its account
    /// through its watch iterations alone, with no explicit sync (issue 19).
    case watchConverges = "watch-converges"
    /// Issue 31: a tag a device put on a note stays on it (on the device, or in its account) unless someone who saw it
    /// took it off or a device deleted the note; a tag a device took off does not come back once the device has synced (the
    /// three-way expectation: each push changes only what its device changed against what it last synced).
    case noLostTagChange = "no-lost-tag-change"
    /// Issue 31: every version of a note the server acknowledged (every version number up to the note's, as the
    /// checks read them after each step: text, deleted, tags and flags) is in the note's history, read through the
    /// versions endpoint, within retention (the simulation runs well within the server's 90 days).
    case historyComplete = "history-complete"
    /// Issue 32: no byte of an encrypted account's plaintext is in the server's store. Every note and history version
    /// the server serves of an encrypted account is a note envelope that opens for exactly its note and edit, with no
    /// tag or flag in the clear (checked on every read: the auditor opens them as a device does); and the store's
    /// files (the SQLite database, its WAL and `-shm`) hold no canary word, scanned after every server restart and at
    /// the end of every run. Every word an encrypted account's notes are written in is a canary word (``Canary``).
    case noPlaintextOnServer = "no-plaintext-on-server"
    /// Issue 33: every attachment a device's note refers to saves with exactly the bytes attached: when a step saves
    /// it (unless the step cut the download, or the device is signed out or revoked), and at quiescence on every device
    /// of the account for every attachment of every live note. (With the server keeping attachments, each device's
    /// notes also hold exactly their account's attachments at quiescence.)
    case attachmentsDownloadable = "attachments-downloadable"
    /// Issue 33: a transfer resumed after a cut moves no chunk again that the device knew the other side had: no
    /// upload of a chunk the server told it it has (a `PUT` answered, or left out of a `missing` answer, in the same
    /// session), no download of a chunk it downloaded before.
    case noChunkResent = "no-chunk-resent"
}

/// An invariant broken at a step.
public struct Violation: Error, Sendable, Equatable, CustomStringConvertible {
    public var step: Int
    public var invariant: Invariant
    public var detail: String
    public var description: String { "step \(step): \(invariant.rawValue): \(detail)" }
}

/// The checks: what must hold after every step (on what the step could have changed) and at quiescence. Each reads
/// the server's view of the accounts and the devices' stores and compares them with the ``Oracle``.
extension Simulation {
    /// The checks that hold after every step, on what the step could have changed: every account's notes changed
    /// since the checks last read it (one indexed query when none did; after a server restart, the account is read
    /// whole and must match what was read before); every device the step acted on, read whole (the others' stores
    /// did not change, so they are checked against the changed server notes only).
    func checkAfterStep(_ action: SimAction) async throws {
        var changed: [Int: [NoteRecord]] = [:]
        for k in accounts.indices {
            if action == .restartServer {
                try await rereadAndCompare(account: k)
            } else {
                changed[k] = try await readChanges(account: k)
            }
        }
        if action == .restartServer { try scanStore("after the restart") }
        try checkTampered()
        try checkChunkTransfers()
        let acted = Set(action.devicesWhoseStoresChange)
        for device in devices {
            if acted.contains(device.index) {
                try checkDevice(device)
            } else if let account = device.account, let records = changed[account], !records.isEmpty {
                try checkUnchangedDevice(device, account: account, against: records)
            }
        }
    }

    /// Everything, from scratch: every account read whole (it must match what was pulled step by step) and
    /// checked note by note, every device read and checked.
    func checkEverything() async throws {
        for k in accounts.indices { try await rereadAndCompare(account: k) }
        for device in devices { try checkDevice(device) }
    }

    func fail(_ invariant: Invariant, _ detail: String) -> Violation {
        Violation(step: step, invariant: invariant, detail: detail)
    }

    /// Pulls account `k`'s changes since the last read into its view and checks them. Returns them.
    func readChanges(account k: Int) async throws -> [NoteRecord] {
        let account = accounts[k]
        let (served, cursor) = try await server.changes(accountID: account.accountID, token: account.auditToken, after: views[k].cursor)
        let records = try opened(served, account: k)
        recorder?.serverRead(account: k, accountID: account.accountID, records: records, step: step)
        views[k].cursor = cursor
        if !records.isEmpty { try checkServer(account: k, changed: records) }
        return records
    }

    /// Reads account `k` whole, after pulling what changed since the last read: both must agree. Then checks every
    /// note of the account as if first seen.
    func rereadAndCompare(account k: Int) async throws {
        _ = try await readChanges(account: k)
        let account = accounts[k]
        let (served, cursor) = try await server.changes(accountID: account.accountID, token: account.auditToken, after: .start)
        let all = try opened(served, account: k)
        recorder?.serverRead(account: k, accountID: account.accountID, records: all, step: step)
        let whole = Dictionary(all.map { ($0.serverID, $0) }, uniquingKeysWith: { _, last in last })
        if whole != views[k].byServerID {
            let missing = views[k].byServerID.keys.filter { whole[$0] == nil }.count
            let unseen = whole.keys.filter { views[k].byServerID[$0] == nil }.count
            let differ = whole.filter { serverID, note in views[k].byServerID[serverID].map { $0 != note } ?? false }.count
            throw fail(
                .pullComplete,
                "account \(k): pulled from the start, \(missing) notes pulled step by step are gone, \(unseen) were never pulled, \(differ) differ")
        }
        views[k] = AccountView(cursor: cursor)
        try checkServer(account: k, changed: all)
    }

    /// Applies changed notes of account `k` to its view, then checks each against the whole view. Notes not changed
    /// passed these checks already and nothing they depend on can have changed: what a device may carry into an
    /// account only grows, and notes never leave a view.
    func checkServer(account k: Int, changed notes: [NoteRecord]) throws {
        for note in notes {
            let key = NoteKeyValue(clientID: note.clientID, origin: note.origin)
            if let previous = views[k].byServerID[note.serverID], previous.key != key,
                views[k].serverIDByKey[previous.key] == note.serverID
            {
                views[k].serverIDByKey[previous.key] = nil
            }
            views[k].byServerID[note.serverID] = note
        }
        for note in notes {
            let key = note.key
            if let other = views[k].serverIDByKey[key], other != note.serverID, views[k].byServerID[other]?.key == key {
                throw fail(.noDuplicates, "account \(k) holds two notes for client ID \(note.clientID) origin \(note.origin)")
            }
            views[k].serverIDByKey[key] = note.serverID
            if let instance = server.instance, note.serverID.instance != instance {
                throw fail(.validIDs, "server ID \(note.serverID) has instance \(note.serverID.instance), not \(instance)")
            }
            if let previous = oracle.serverIDs[k]?[key], previous != note.serverID {
                throw fail(.serverIDStable, "account \(k): note \(note.clientID) changed server ID \(previous) → \(note.serverID)")
            }
            oracle.serverIDs[k, default: [:]][key] = note.serverID
            let permitted = oracle.permitted[k]?.contains(key) == true
            let isCopyOfOwn = note.conflictOf.map { views[k].byServerID[$0] != nil } ?? false
            if !permitted && !isCopyOfOwn {
                throw fail(.noCrossAccount, "account \(k) holds note \(note.clientID)/\(note.origin) that no device signed in to it created, carried from notes written while signed out, or copied")
            }
            if !note.deleted { oracle.seen(tokens: Lines.tokens(note.text), in: k) }
            let version = NoteContent(note)
            if let seen = oracle.versionsSeen[k]?[note.serverID]?[note.version], seen != version {
                throw fail(.historyComplete, "account \(k): note \(note.serverID) version \(note.version) read twice with other contents")
            }
            oracle.versionsSeen[k, default: [:]][note.serverID, default: [:]][note.version] = version
        }
    }

    /// Reads a device's note identities, account and cursor, and checks them all.
    func checkDevice(_ device: SimDevice) throws {
        let snapshot = try local(device.index) { try device.client.identities() }
        let live = snapshot.notes.filter { !$0.isDeleted && !$0.isSetAside }
        device.liveIDs = live.map(\.id)
        device.maxLocalID = snapshot.notes.map(\.id).max() ?? 0
        device.liveOwners = Dictionary(live.compactMap { note in note.owner.map { (note.id, $0) } }, uniquingKeysWith: { a, _ in a })
        device.account = snapshot.account.flatMap { info in accounts.firstIndex { $0.accountID == info.accountID } }
        var serverIDs: [FlakeID: NoteKeyValue] = [:]
        var ownedServerIDs = Set<OwnedServerID>()
        var keys = Set<OwnedKey>()
        let accountID = snapshot.account?.accountID
        for note in snapshot.notes {
            let key = NoteKeyValue(clientID: note.clientID, origin: note.origin)
            if let accountID, !note.isSetAside, note.owner != accountID {
                throw fail(.noCrossAccount, "device \(device.index) shows note \(note.clientID)/\(note.origin) of another owner (\(note.owner.map { "\($0)" } ?? "none")) while signed in to \(accountID)")
            }
            guard keys.insert(OwnedKey(owner: note.owner, key: key)).inserted else {
                throw fail(.noDuplicates, "device \(device.index) holds two local notes for client ID \(note.clientID) origin \(note.origin)")
            }
            if let serverID = note.serverID {
                guard ownedServerIDs.insert(OwnedServerID(owner: note.owner, serverID: serverID)).inserted else {
                    throw fail(.noDuplicates, "device \(device.index) holds two local notes for server note \(serverID)")
                }
                if note.owner == accountID { serverIDs[serverID] = key }
            }
        }
        device.serverKeys = serverIDs
        // A server ID belongs to its note's owner, who keeps it while signed out or set aside (issue 30): every note
        // that has one, on show or not, names that note of its owner's.
        for note in snapshot.notes {
            guard let serverID = note.serverID else { continue }
            let key = NoteKeyValue(clientID: note.clientID, origin: note.origin)
            // A deleted account's notes keep their server IDs until a sign-in to its username disowns them.
            if let owner = note.owner, oracle.deletedAccountIDs.values.contains(where: { $0.contains(owner) }) { continue }
            guard let owner = accounts.firstIndex(where: { $0.accountID == note.owner }) else {
                throw fail(.noCrossAccount, "device \(device.index) holds server ID \(serverID) on note \(key.clientID)/\(key.origin) of no account of this server (owner \(note.owner.map { "\($0)" } ?? "none"))")
            }
            guard let stored = views[owner].byServerID[serverID] else {
                throw fail(.noCrossAccount, "device \(device.index) holds server ID \(serverID) on a note of account \(owner), which is not a note of that account")
            }
            guard stored.key == key else {
                throw fail(.serverIDStable, "device \(device.index): server ID \(serverID) is note \(stored.clientID)/\(stored.origin) on the server but \(key.clientID)/\(key.origin) locally")
            }
        }
        guard let account = device.account else { return }
        // Cursors only move forward within one sign-in.
        if let text = snapshot.cursor, let cursor = SyncCursor(text: text) {
            if let last = device.lastCursor, last.account == account, cursor < last.cursor {
                throw fail(.cursorMonotonic, "device \(device.index): cursor moved back from \(last.cursor) to \(cursor)")
            }
            device.lastCursor = (account, cursor)
        }
    }

    /// A note's identity among one owner's notes on a device.
    struct OwnedKey: Hashable {
        var owner: FlakeID?
        var key: NoteKeyValue
    }

    /// A server ID among one owner's notes on a device.
    struct OwnedServerID: Hashable {
        var owner: FlakeID?
        var serverID: FlakeID
    }

    /// A device the step did not act on: its store is as the checks last read it, so only the account's changed
    /// notes can break what held (a server note that now names another note than the device's).
    func checkUnchangedDevice(_ device: SimDevice, account: Int, against changed: [NoteRecord]) throws {
        for stored in changed {
            guard let key = device.serverKeys[stored.serverID], key != stored.key else { continue }
            throw fail(.serverIDStable, "device \(device.index): server ID \(stored.serverID) is note \(stored.clientID)/\(stored.origin) on the server but \(key.clientID)/\(key.origin) locally")
        }
    }

    /// Among one account's notes (tombstones too), how many share their client ID with a note of another origin,
    /// counting each client ID's first note as the one the others would have merged into.
    static func clientIDCollisions(in notes: [NoteRecord]) -> Int {
        var origins: [FlakeID: Set<FlakeID>] = [:]
        for note in notes { origins[note.clientID, default: []].insert(note.origin) }
        return origins.values.reduce(0) { $0 + $1.count - 1 }
    }

    /// Every signed-in device syncs twice with no faults; then convergence and lost edits are checked.
    func quiesceAndCheck() async throws {
        try await quiesceWatchers()
        note(nil, .sync, "quiescence: every signed-in device syncs twice, no faults")
        for _ in 0..<2 {
            for device in devices where try device.client.account() != nil {
                try await sync(device, faults: [])
            }
        }
        try await checkEverything()
        var finalTexts: [Int: [NoteRecord]] = [:]
        var total = 0
        for k in accounts.indices {
            let notes = Array(views[k].byServerID.values)
            finalTexts[k] = notes
            total += notes.filter { !$0.deleted }.count
        }
        summary.notes = total
        summary.clientIDCollisions = finalTexts.values.reduce(0) { $0 + Self.clientIDCollisions(in: $1) }
        for notes in finalTexts.values {
            // Not an invariant: a measure of conflict copies that repeat one another (see Docs/PERFORMANCE.md).
            var copies = Set<String>()
            for note in notes where !note.deleted {
                guard let original = note.conflictOf else { continue }
                if !copies.insert("\(original)\u{0}\(note.text)").inserted { summary.repeatedCopies += 1 }
            }
        }
        // Convergence: the same notes, each with the same text, tags (by key) and flags.
        for device in devices {
            guard let account = try accountIndex(of: device), let serverNotes = finalTexts[account] else { continue }
            let expected = Dictionary(
                serverNotes.filter { !$0.deleted }.map { (NoteKeyValue(clientID: $0.clientID, origin: $0.origin), NoteContent($0)) },
                uniquingKeysWith: { a, _ in a })
            let local = try device.client.notes()
            let actual = Dictionary(local.map { ($0.key, NoteContent($0)) }, uniquingKeysWith: { a, _ in a })
            if actual != expected {
                let missing = expected.keys.filter { actual[$0] == nil }.count
                let extra = actual.keys.filter { expected[$0] == nil }.count
                let differ = expected.keys.filter { actual[$0] != nil && actual[$0]?.text != expected[$0]?.text }.count
                let tagged = expected.keys.filter { actual[$0] != nil && actual[$0]?.text == expected[$0]?.text && actual[$0] != expected[$0] }.count
                throw fail(
                    .convergence,
                    "device \(device.index) differs from account \(account): \(missing) missing, \(extra) extra, \(differ) with other text, \(tagged) with other tags or flags")
            }
        }
        // No lost edit: per account, every token the server ever held is still there unless someone who saw it
        // removed it; per device, every token it wrote is still on it (or in its account) unless removed.
        for (k, notes) in finalTexts {
            let present = Set(notes.filter { !$0.deleted }.flatMap { Lines.tokens($0.text) })
            for token in oracle.seenOnServer[k] ?? [] where !present.contains(token) && !oracle.legitimatelyRemoved.contains(token) {
                throw fail(.noLostEdit, "account \(k) lost \(token) (written by device \(oracle.author[token].map(String.init) ?? "?")); nobody who saw it removed it")
            }
        }
        for device in devices {
            // Set-aside notes count: they are kept for their account.
            var present = Set(try device.client.allNotes(includingSetAside: true).filter { !$0.isDeleted }.flatMap { Lines.tokens($0.text) })
            if let account = try accountIndex(of: device) {
                present.formUnion((finalTexts[account] ?? []).filter { !$0.deleted }.flatMap { Lines.tokens($0.text) })
            }
            for (token, author) in oracle.author where author == device.index && !present.contains(token) && !oracle.legitimatelyRemoved.contains(token) {
                throw fail(.noLostEdit, "device \(device.index) lost its own edit \(token); nobody who saw it removed it")
            }
        }
        try checkTags(final: finalTexts)
        try await checkAttachments(final: finalTexts)
        try checkChunkTransfers()
        try await checkHistories()
        try scanStore("at the end of the run")
    }

    /// `no-lost-tag-change` at quiescence (see ``Invariant/noLostTagChange``).
    func checkTags(final: [Int: [NoteRecord]]) throws {
        for device in devices {
            let account = try accountIndex(of: device)
            let inAccount = Dictionary(
                (account.flatMap { final[$0] } ?? []).map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
            var here: [NoteKeyValue: [LocalNote]] = [:]
            for note in try device.client.allNotes(includingSetAside: true) { here[note.key, default: []].append(note) }
            // Every tag it put on a note is on that note, here or in its account, unless it may be gone: taken off by
            // a device that saw it, or its note deleted by any device (``Oracle/deletedNotes``).
            for (pair, adders) in oracle.tagAdds
            where adders.contains(device.index) && !oracle.tagsMayBeGone.contains(pair) && !oracle.deletedNotes.contains(pair.note) {
                let local = here[pair.note] ?? []
                let server = inAccount[pair.note]
                if local.contains(where: { !$0.isDeleted && $0.tags.contains { Tags.key($0) == pair.tag } }) { continue }
                if let server, !server.deleted, (server.tags ?? []).contains(where: { Tags.key($0) == pair.tag }) { continue }
                // Gone with its note (deleted by no step of this device's: a tombstone pulled, a deleted account's
                // notes), or no longer here (a wipe).
                if local.allSatisfy(\.isDeleted) && (server?.deleted ?? true) { continue }
                throw fail(
                    .noLostTagChange,
                    "device \(device.index) put tag \(pair.tag) on note \(pair.note.clientID)/\(pair.note.origin) and it is gone; nobody who saw it took it off")
            }
            // Every tag it took off stays off, once it synced: it is signed in at the end to the account it took the
            // tag off in (quiescence synced it).
            guard let account, let accountID = try device.client.account()?.accountID else { continue }
            for (pair, removal) in oracle.tagRemovals
            where removal.device == device.index && removal.account == accountID && (oracle.tagAdds[pair]?.count ?? 0) <= 1
                && oracle.baseLostOn[pair.note] == nil {
                guard let server = inAccount[pair.note], !server.deleted else { continue }
                if (server.tags ?? []).contains(where: { Tags.key($0) == pair.tag }) {
                    throw fail(
                        .noLostTagChange,
                        "device \(device.index) took tag \(pair.tag) off note \(pair.note.clientID)/\(pair.note.origin), and account \(account) has it again")
                }
            }
        }
    }

    /// `history-complete` at quiescence (see ``Invariant/historyComplete``): every note of every account, tombstones
    /// too, read through the versions endpoint.
    func checkHistories() async throws {
        for k in accounts.indices {
            for (serverID, note) in views[k].byServerID {
                let versions = try opened(
                    try await server.versions(serverID: serverID, token: accounts[k].auditToken), of: note, account: k)
                summary.versionsChecked += versions.count
                let numbers = versions.map(\.version)
                guard numbers == Array(1...max(1, note.version)) || (note.version == 0 && numbers.isEmpty) else {
                    let missing = Set(1...max(1, note.version)).subtracting(numbers).sorted()
                    throw fail(
                        .historyComplete,
                        "account \(k): note \(serverID) is at version \(note.version) but its history holds \(numbers.count) versions (missing \(missing.prefix(6).map(String.init).joined(separator: ", ")))")
                }
                for version in versions {
                    guard let seen = oracle.versionsSeen[k]?[serverID]?[version.version] else { continue }
                    if seen != NoteContent(version) {
                        throw fail(
                            .historyComplete,
                            "account \(k): note \(serverID) version \(version.version) in its history is not what the server acknowledged")
                    }
                }
            }
        }
    }
}
