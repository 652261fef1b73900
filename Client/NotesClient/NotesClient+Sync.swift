import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol
import Synchronization

extension NotesClient {
    /// Push rounds per sync: the first sends everything; later ones pick up notes edited while a push was in
    /// flight and changes to retry after a recoverable refusal.
    static let maxPushRounds = 4
    /// Bytes of `{"changes":[` and `]}` around the changes of a push body.
    static let pushEnvelopeBytes = 14

    /// Syncs with the signed-in account: pushes local changes, then pulls the server's.
    ///
    /// 1. Push rounds. Snapshots already in the outbox are re-sent unchanged (same edit ID, so a push whose answer
    ///    was lost is answered `replayed` and applied once); dirty notes without one get a snapshot (new edit ID)
    ///    committed before anything is sent. Batches fit the server's `maxBatchChanges` and `maxBodyBytes`
    ///    (`GET /v1/info`, read once per sync). Each answer is applied in one transaction; a `conflict` answer
    ///    stores the server's conflict copy (the pushed text) locally in the same transaction. Refused changes keep
    ///    their error on the note and are not re-sent until the note is edited.
    /// 2. Pull from the stored cursor, page by page; each page and the new cursor are committed together, so an
    ///    interrupted sync resumes where it stopped. An `invalid_cursor` answer restarts from the beginning once.
    ///
    /// Transport failures and 5xx answers are retried with backoff (``NotesEnvironment/retry``).
    ///
    /// - Throws: `not_signed_in`; `signed_out_by_server` on 401 (the local session is forgotten, notes are
    ///   kept); `server_unreachable`, `server_error`, `bad_response`; `storage`. Whatever was committed before
    ///   the error stays committed, and nothing is lost.
    public func sync(progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws(NotesError) -> SyncReport {
        try await sync(progress: progress, pullFirst: false)
    }

    /// A sync; with `pullFirst` (the sign-in's), it pulls the whole account before pushing, so that the notes the
    /// account already has in their local text are found by (client ID, origin) and need no push.
    func sync(progress: (@Sendable (SyncProgress) -> Void)?, pullFirst: Bool) async throws(NotesError) -> SyncReport {
        let settings = try read { db in try Settings.fetch(db) }
        guard let settings, settings.account != nil, let token = settings.token, let server = settings.serverURL,
            let url = URL(string: server)
        else {
            throw NotesError(.notSignedIn, "Not signed in; sign in with `notes login` first.")
        }
        let connection = connection(to: url, server: server, token: token)
        do {
            return try await runSync(connection, pullFirst: pullFirst, progress: progress)
        } catch {
            if error.code == .signedOutByServer {
                _ = try? write { db in
                    try db.cachedStatement(sql: "UPDATE settings SET token = NULL WHERE id = 1 AND token = ?").execute(arguments: [token])
                    if db.changesCount > 0 { try Self.forgetAccountState(db) }
                }
            }
            throw error
        }
    }

    func connection(to url: URL, server: String, token: String?) -> ServerConnection {
        ServerConnection(
            transport: environment.transport(url), server: server, token: token, retry: environment.retry,
            sleep: environment.sleep,
            jitter: { [self] in self.random.withLock { generator in Double.random(in: 0...1, using: &generator) } })
    }

    private func runSync(
        _ connection: ServerConnection, pullFirst: Bool, progress: (@Sendable (SyncProgress) -> Void)?
    ) async throws(NotesError) -> SyncReport {
        var report = SyncReport()
        let info = try await connection.call(.info, ServerInfo.self)
        let limits = Self.sanitized(info.limits)
        if pullFirst { try await pull(connection, limits: limits, report: &report, progress: progress) }
        try await push(connection, limits: limits, report: &report, progress: progress)
        try await pull(connection, limits: limits, report: &report, progress: progress)
        let now = now
        report.pending = try write { db in
            try db.cachedStatement(sql: "UPDATE settings SET last_sync_at = ? WHERE id = 1").execute(arguments: [now])
            return try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE dirty AND push_error IS NULL")) ?? 0
        }
        return report
    }

    static func sanitized(_ limits: SyncLimits) -> SyncLimits {
        var limits = limits
        limits.maxBatchChanges = max(1, limits.maxBatchChanges)
        limits.maxBodyBytes = max(1024, limits.maxBodyBytes)
        limits.maxNoteBytes = max(1, limits.maxNoteBytes)
        limits.maxPageSize = max(1, limits.maxPageSize)
        return limits
    }

    // MARK: - Push

    private struct Prepared {
        var entry: OutboxEntry
        var json: Data
    }

    private func push(
        _ connection: ServerConnection, limits: SyncLimits, report: inout SyncReport,
        progress: (@Sendable (SyncProgress) -> Void)?
    ) async throws(NotesError) {
        for _ in 0..<Self.maxPushRounds {
            let entries = try write { db in try prepareOutbox(db) }
            if entries.isEmpty { return }

            // Encode each change once; refuse locally what the server could never take.
            var prepared: [Prepared] = []
            prepared.reserveCapacity(entries.count)
            var refused: [(OutboxEntry, APIErrorBody)] = []
            for entry in entries {
                if entry.text.utf8.count > limits.maxNoteBytes {
                    refused.append(
                        (entry, APIErrorBody(code: .noteTooLarge, message: "The note is larger than the server's limit of \(limits.maxNoteBytes) bytes.")))
                    continue
                }
                let json = entry.change.encodedJSON()
                if json.count + Self.pushEnvelopeBytes > limits.maxBodyBytes {
                    refused.append(
                        (entry, APIErrorBody(code: .bodyTooLarge, message: "The note does not fit in one request to this server.")))
                    continue
                }
                prepared.append(Prepared(entry: entry, json: json))
            }
            if !refused.isEmpty {
                try write { db in
                    for (entry, error) in refused {
                        try Self.refuse(db, entry: entry, error: error, report: &report)
                    }
                }
            }

            var queue = Self.batches(prepared, limits: limits)
            let total = prepared.count
            var done = 0
            progress?(SyncProgress(phase: .pushing, done: 0, total: total))
            while !queue.isEmpty {
                let batch = queue.removeFirst()
                let response: PushResponse
                do {
                    response = try await send(batch, over: connection)
                } catch where error.httpStatus == 413 {
                    // The server's limits are tighter than it said: halve the batch, or refuse a lone change.
                    if batch.count > 1 {
                        let middle = batch.count / 2
                        queue.insert(contentsOf: [Array(batch[..<middle]), Array(batch[middle...])], at: 0)
                    } else {
                        let error = error.api ?? APIErrorBody(code: .bodyTooLarge, message: "The note is too large for this server.")
                        try write { db in try Self.refuse(db, entry: batch[0].entry, error: error, report: &report) }
                        done += 1
                    }
                    continue
                }
                report.requests += 1
                let now = now
                try write { db in
                    try Self.apply(response, to: batch.map(\.entry), in: db, now: now, report: &report)
                }
                done += batch.count
                progress?(SyncProgress(phase: .pushing, done: done, total: total))
            }

            let waiting = try read { db in
                try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notes WHERE dirty AND push_error IS NULL")) ?? 0
            }
            if waiting == 0 { return }
        }
    }

    /// Splits encoded changes into batches within `maxBatchChanges` and `maxBodyBytes`.
    private static func batches(_ prepared: [Prepared], limits: SyncLimits) -> [[Prepared]] {
        var batches: [[Prepared]] = []
        var current: [Prepared] = []
        var bytes = pushEnvelopeBytes
        for item in prepared {
            let size = item.json.count + (current.isEmpty ? 0 : 1)
            if !current.isEmpty && (current.count >= limits.maxBatchChanges || bytes + size > limits.maxBodyBytes) {
                batches.append(current)
                current = []
                bytes = pushEnvelopeBytes
            }
            bytes += item.json.count + (current.isEmpty ? 0 : 1)
            current.append(item)
        }
        if !current.isEmpty { batches.append(current) }
        return batches
    }

    private func send(_ batch: [Prepared], over connection: ServerConnection) async throws(NotesError) -> PushResponse {
        var body = Data("{\"changes\":[".utf8)
        for (index, item) in batch.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(item.json)
        }
        body.append(contentsOf: Array("]}".utf8))
        let response = try await connection.call(.push, PushResponse.self, body: body)
        guard response.results.count == batch.count else {
            throw NotesError.badResponse("\(response.results.count) push results for \(batch.count) changes")
        }
        for (result, item) in zip(response.results, batch)
        where result.editID != item.entry.editID || result.clientID != item.entry.clientID {
            throw NotesError.badResponse("a push result names edit \(result.editID), expected \(item.entry.editID)")
        }
        return response
    }

    /// Creates snapshots for dirty notes that have none (one new edit ID each) and returns the whole outbox in push
    /// order (see `OutboxEntry.fetchAll`). Never-synced tombstones are marked clean instead: they have nothing to tell
    /// a server. Live notes that are clean but have no server ID are queued first: a sign-in left them for its pull to find,
    /// and the account did not return them (its pull was interrupted, or the server lost them), so they are pushed
    /// by (client ID, origin) and the server reconciles or creates them.
    private func prepareOutbox(_ db: Database) throws -> [OutboxEntry] {
        try db.cachedStatement(
            sql: "UPDATE notes SET dirty = 1 WHERE server_id IS NULL AND NOT dirty AND NOT deleted"
        ).execute()
        try db.cachedStatement(
            sql: """
                UPDATE notes SET dirty = 0 WHERE dirty AND deleted AND base_text IS NULL AND server_id IS NULL
                AND id NOT IN (SELECT note_id FROM outbox)
                """
        ).execute()
        let rows = try Row.fetchAll(
            db.cachedStatement(
            sql: """
                SELECT id, text, deleted, server_version, base_text, server_id, revision FROM notes
                WHERE dirty AND push_error IS NULL AND id NOT IN (SELECT note_id FROM outbox) ORDER BY id
                """))
        if !rows.isEmpty {
            let editIDs = try minter.mint(rows.count, in: db)
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO outbox (note_id, edit_id, text, deleted, base_version, base_text, server_id, revision)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            for (row, editID) in zip(rows, editIDs) {
                let deleted: Bool = row[2]
                let text: String = deleted ? "" : row[1]
                let baseVersion: Int64? = row[3]
                let baseText: String? = row[4]
                let serverID: Int64? = row[5]
                let revision: Int64 = row[6]
                let noteID: Int64 = row[0]
                try insert.execute(arguments: [noteID, editID.rawValue, text, deleted, baseVersion, baseText, serverID, revision])
            }
        }
        return try OutboxEntry.fetchAll(db)
    }

    /// Drops a snapshot the server refused (or could never take) and records the error on its note.
    private static func refuse(_ db: Database, entry: OutboxEntry, error: APIErrorBody, report: inout SyncReport) throws {
        try db.cachedStatement(sql: "DELETE FROM outbox WHERE edit_id = ?").execute(arguments: [entry.editID.rawValue])
        guard db.changesCount > 0 else { return }
        try refuseAfterRemoval(db, entry: entry, error: error, report: &report)
    }

    /// Applies one push answer: one transaction for the whole batch.
    private static func apply(
        _ response: PushResponse, to entries: [OutboxEntry], in db: Database, now: Int64, report: inout SyncReport
    ) throws {
        let takeSnapshot = try db.cachedStatement(sql: "DELETE FROM outbox WHERE edit_id = ?")
        let readRevision = try db.cachedStatement(sql: "SELECT revision FROM notes WHERE id = ?")
        let releaseServerID = try db.cachedStatement(
            sql: "UPDATE notes SET server_id = NULL, server_version = NULL WHERE server_id = ? AND id != ?")
        let settle = try db.cachedStatement(
            sql: """
                UPDATE notes SET server_id = COALESCE(?, server_id), server_version = ?, text = ?, deleted = ?,
                base_text = ?, dirty = 0, push_error = NULL, push_error_message = NULL,
                updated_at = CASE WHEN ? THEN ? ELSE updated_at END WHERE id = ?
                """)
        let rebase = try db.cachedStatement(
            sql: "UPDATE notes SET server_id = ?, server_version = NULL, base_text = ? WHERE id = ?")
        let findCopy = try db.cachedStatement(sql: "SELECT 1 FROM notes WHERE server_id = ? OR (client_id = ? AND origin = ?)")
        let insertCopy = try db.cachedStatement(
            sql: """
                INSERT INTO notes (client_id, origin, server_id, server_version, text, deleted, base_text, revision, dirty,
                is_conflict, conflict_of_server_id, created_at, updated_at)
                VALUES (?, ?, ?, 1, ?, 0, ?, 0, 0, 1, ?, ?, ?)
                """)

        for (entry, result) in zip(entries, response.results) {
            try takeSnapshot.execute(arguments: [entry.editID.rawValue])
            guard db.changesCount > 0 else { continue }  // another process applied this answer already
            guard let revision = try Int64.fetchOne(readRevision, arguments: [entry.noteID]) else { continue }

            if result.status == .rejected {
                let error = result.error ?? APIErrorBody(code: APIErrorCode("rejected"), message: "The server refused the change.")
                // The snapshot is already gone; record the error the way `refuse` does.
                try refuseAfterRemoval(db, entry: entry, error: error, report: &report)
                continue
            }

            report.pushed += 1
            report.count(result.status)
            if result.replayed { report.replayed += 1 }
            let serverID = result.serverID?.rawValue
            if let serverID {
                try releaseServerID.execute(arguments: [serverID, entry.noteID])
            }
            if result.status == .conflict, let copy = result.conflict, let serverID,
                try Row.fetchOne(findCopy, arguments: [copy.serverID.rawValue, copy.clientID.rawValue, entry.origin.rawValue]) == nil
            {
                // The pushed text now lives in a conflict copy on the server, and the note takes the server's text
                // below: keep the copy here at once rather than at the next pull, so the text never leaves this
                // device, even when the pull fails and the device then signs in to another account. (The copy is
                // what the server stored: the pushed text, version 1, the note's origin; a later pull of it
                // changes nothing.)
                try insertCopy.execute(arguments: [
                    copy.clientID.rawValue, entry.origin.rawValue, copy.serverID.rawValue, entry.text, entry.text, serverID,
                    copy.clientID.unixMilliseconds, now,
                ])
            }
            if revision == entry.revision {
                // Not edited while the push was in flight: the note now matches the server.
                let text = result.text ?? entry.text
                let deleted: Bool
                switch result.status {
                case .kept, .merged, .conflict: deleted = false
                case .deleted: deleted = true
                default: deleted = entry.deleted
                }
                // A delete the server never stored anything for leaves a purely local tombstone.
                let baseText: String? = serverID == nil && deleted ? nil : text
                let serverVersion: Int64? = result.replayed ? nil : result.version
                let textFromServer = result.text != nil
                try settle.execute(arguments: [
                    serverID, serverVersion, text, deleted, baseText, textFromServer, now, entry.noteID,
                ])
            } else if let serverID {
                // Edited meanwhile: stay dirty and merge from what was pushed (the server may have moved on).
                try rebase.execute(arguments: [serverID, entry.text, entry.noteID])
            }
        }
    }

    /// Records a refusal whose snapshot is already removed. Two refusals are recoverable and retried in the next
    /// round: `unknown_note` (the account has no note with that server ID, e.g. the server lost it: push by client
    /// ID instead) and `invalid_base` (the server's history is behind ours, e.g. restored from a backup: merge from
    /// the base text alone). Any other error stays on the note until it is edited.
    private static func refuseAfterRemoval(_ db: Database, entry: OutboxEntry, error: APIErrorBody, report: inout SyncReport) throws {
        switch error.code {
        case .unknownNote:
            try db.cachedStatement(sql: "UPDATE notes SET server_id = NULL, server_version = NULL WHERE id = ?").execute(arguments: [entry.noteID])
        case .invalidBase:
            try db.cachedStatement(sql: "UPDATE notes SET server_version = NULL WHERE id = ?").execute(arguments: [entry.noteID])
        default:
            try db.execute(
                sql: "UPDATE notes SET push_error = ?, push_error_message = ? WHERE id = ? AND revision = ?",
                arguments: [error.code.rawValue, error.message, entry.noteID, entry.revision])
            if db.changesCount > 0 {
                report.failures.append(PushFailure(noteID: entry.noteID, clientID: entry.clientID, origin: entry.origin, error: PushError(error)))
            }
        }
    }

    // MARK: - Pull

    private func pull(
        _ connection: ServerConnection, limits: SyncLimits, report: inout SyncReport,
        progress: (@Sendable (SyncProgress) -> Void)?
    ) async throws(NotesError) {
        var since = try read { db in try String.fetchOne(db.cachedStatement(sql: "SELECT cursor FROM settings WHERE id = 1")) } ?? SyncCursor.start.text
        var restarted = false
        var done = 0
        progress?(SyncProgress(phase: .pulling, done: 0, total: nil))
        while true {
            let page: PullResponse
            do {
                page = try await connection.call(
                    .pull, PullResponse.self,
                    query: [(PullQuery.since, since), (PullQuery.limit, String(limits.maxPageSize))])
            } catch where error.api?.code == .invalidCursor && !restarted {
                // The server does not know our cursor (e.g. it was restored from a backup): start over. Applying
                // records is idempotent, so this costs only bandwidth.
                restarted = true
                since = SyncCursor.start.text
                try write { db in try db.cachedStatement(sql: "UPDATE settings SET cursor = NULL WHERE id = 1").execute() }
                continue
            }
            report.requests += 1
            let now = now
            let (applied, matched) = try write { db in try Self.apply(page, in: db, now: now) }
            report.applied += applied
            report.matched += matched
            report.pulled += page.changes.count
            done += page.changes.count
            progress?(SyncProgress(phase: .pulling, done: done, total: nil))
            if !page.hasMore { return }
            guard page.cursor.text != since || !page.changes.isEmpty else {
                throw NotesError.badResponse("the pull announced more changes without moving its cursor")
            }
            since = page.cursor.text
        }
    }

    /// Applies one pull page and stores its cursor, in one transaction. Returns how many local notes it added or
    /// changed (records of notes already up to date, such as this device's own pushes, change nothing), and how
    /// many of them had no server ID here and were found by (client ID, origin).
    private static func apply(_ page: PullResponse, in db: Database, now: Int64) throws -> (applied: Int, matched: Int) {
        var applied = 0
        var matched = 0
        let columns = "id, dirty, server_id, text, deleted, updated_at, server_version, base_text, is_conflict, conflict_of_server_id, push_error"
        // The local note with the record's server ID, else the one with its (client ID, origin): one statement,
        // whose first arm is read first, so a server ID match wins.
        let lookup = try db.cachedStatement(
            sql: """
                SELECT \(columns) FROM notes WHERE server_id = ?
                UNION ALL SELECT \(columns) FROM notes WHERE client_id = ? AND origin = ?
                LIMIT 1
                """)
        let take = try db.cachedStatement(
            sql: """
                UPDATE notes SET server_id = ?, server_version = ?, text = ?, deleted = ?, base_text = ?, is_conflict = ?,
                conflict_of_server_id = ?, push_error = NULL, push_error_message = NULL, updated_at = ? WHERE id = ?
                """)
        let adopt = try db.cachedStatement(sql: "UPDATE notes SET server_id = ? WHERE id = ?")
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO notes (client_id, origin, server_id, server_version, text, deleted, base_text, revision, dirty,
                is_conflict, conflict_of_server_id, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?)
                """)

        for record in page.changes {
            let serverID = record.serverID.rawValue
            let changedAt = WireTime.parse(record.updatedAt) ?? now
            // Read in place from the statement (no copy of the row); every value is read before the next statement.
            let rows = try Row.fetchCursor(lookup, arguments: [serverID, record.clientID.rawValue, record.origin.rawValue])
            guard let row = try rows.next() else {
                try insert.execute(arguments: [
                    record.clientID.rawValue, record.origin.rawValue, serverID, record.version, record.text, record.deleted,
                    record.text, record.conflictOf != nil, record.conflictOf?.rawValue, record.clientID.unixMilliseconds,
                    changedAt,
                ])
                applied += 1
                continue
            }
            let id: Int64 = row[0]
            let dirty: Bool = row[1]
            let localServerID: Int64? = row[2]
            if localServerID == nil { matched += 1 }
            if dirty {
                // Local changes wait to be pushed: keep their base so the server merges them; learn the ID only.
                if localServerID != serverID { try adopt.execute(arguments: [serverID, id]) }
                continue
            }
            let localText: String = row[3]
            let localDeleted: Bool = row[4]
            let changed = localText != record.text || localDeleted != record.deleted
            if changed { applied += 1 }
            // Already exactly what `take` would write (a sign-in pulls back every note it just pushed): no write.
            if !changed && localServerID == serverID && row[6] as Int64? == record.version && row[7] as String? == record.text
                && row[8] as Bool == (record.conflictOf != nil) && row[9] as Int64? == record.conflictOf?.rawValue
                && row[10] as String? == nil
            {
                continue
            }
            try take.execute(arguments: [
                serverID, record.version, record.text, record.deleted, record.text, record.conflictOf != nil,
                record.conflictOf?.rawValue, changed ? changedAt : row[5] as Int64, id,
            ])
        }
        try db.cachedStatement(sql: "UPDATE settings SET cursor = ? WHERE id = 1").execute(arguments: [page.cursor.text])
        return (applied, matched)
    }

    // MARK: - Account state

    /// Forgets everything that belongs to the account (token, account, cursor, every server ID and version, in
    /// notes and snapshots alike) and keeps every note, its base text and every snapshot's edit ID.
    static func forgetAccountState(_ db: Database) throws {
        try db.execute(
            sql: """
                UPDATE settings SET account_id = NULL, username = NULL, token = NULL, cursor = NULL, last_sync_at = NULL
                WHERE id = 1;
                UPDATE notes SET server_id = NULL, server_version = NULL, conflict_of_server_id = NULL
                WHERE server_id IS NOT NULL OR server_version IS NOT NULL OR conflict_of_server_id IS NOT NULL;
                UPDATE outbox SET server_id = NULL, base_version = NULL;
                """)
    }
}
