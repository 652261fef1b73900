import Foundation
import MiniFlake
import NoteCrypto
import NoteMerge
import NoteSyncProtocol
import Synchronization

/// The client's sync engine: the whole conversation with a server and what it does to the local store. The rules
/// are the planners' in this folder (pure functions of values, each tested without a database); the engine calls
/// the server, runs each step in a ``LocalStore`` transaction, and hands each planner what it reads.
///
/// A sync (``sync(progress:pullFirst:)``):
/// 1. Read the server's limits (`GET /v1/info`), once per sync, and remember them (local writes are checked
///    against them); the notes refused for a reason every sync retries are pending again
///    (``OutboxPlanner``: `retriesAtEverySync`).
/// 2. A sign-in's sync pulls first (step 4), so that the notes the account already has are matched and need no push.
/// 3. Push rounds, at most ``maxPushRounds``, until no note waits:
///    1. one transaction: queue, snapshot and order the outbox (``OutboxPlanner``: `prepare`, `snapshots`,
///       `pushOrder`); edit IDs are minted here, so every snapshot is committed before anything is sent;
///    2. refuse locally what the server could never take, and batch the rest (``OutboxPlanner``: `plan`; a 413
///       answer: `whenTooLarge`);
///    3. make every chunk the batch's attachments refer to present on the server, sending those it lacks from the
///       chunk cache; leave out of plaintext changes the attachments whose chunks neither side has, and refuse sealed
///       changes referring to one (``ChunkPlanner``);
///    4. send each batch and apply its answer in one transaction (``PushResultPlanner``: `apply`; refusals:
///       `refusal(for:)`).
/// 4. Pull from the stored cursor (when the sync pulled first and a push result was a replay, from where that
///    first pull started: a replay answers the stored outcome, which the first pull may have passed), page by page; each page is applied with its new cursor in one transaction
///    (``PullPlanner``: `apply` per record), so an interrupted sync resumes where it stopped. An `invalid_cursor`
///    answer restarts from the beginning, once. An encrypted account's page holding a newer version of a note whose
///    change is in flight (pushed, no answer yet) does not store its cursor, nor does any page after it in that pull:
///    the device merges that version only once the push is answered, so a later pull must bring it again.
/// 5. Record the sync time, count the notes still pending and list every note the server refuses.
///
/// A sign-in (``signIn(url:server:username:password:unowned:wipe:progress:)``):
/// 1. The sign-in request (``Endpoint/signIn``).
/// 2. One transaction (``SignInPlanner``: `plan`): first, a known account with the same username on the same server
///    but another ID was deleted there: its notes become notes of no account (``LocalStore/Transaction/disownNotes(of:)``).
///    Then, for another account, forget the account state; set the previous
///    account's notes aside or wipe them, bring this account's back, carry or keep aside the unowned notes
///    (``OwnerPlanner``); store and remember the session; for another account, queue what it may not have among
///    the notes on show (``SignInPlanner``: `queues`).
/// 3. Revoke the replaced session (best effort).
/// 4. Sync, pulling first for another account.
final class SyncEngine: Sendable {
    let store: LocalStore
    let minter: IDMinter
    let environment: NotesEnvironment
    /// This installation's origin.
    let origin: FlakeID
    /// This device's chunks (attachments): what a push sends before the changes that refer to them (``ChunkPlanner``).
    let chunkCache: ChunkCache
    /// Retry jitter.
    private let random: Mutex<any RandomNumberGenerator & Sendable>

    /// Push rounds per sync: the first sends everything; later ones pick up notes edited while a push was in
    /// flight and changes to retry after a recoverable refusal.
    static let maxPushRounds = 4

    init(
        store: LocalStore, minter: IDMinter, environment: NotesEnvironment, origin: FlakeID, chunkCache: ChunkCache,
        random: any RandomNumberGenerator & Sendable
    ) {
        self.chunkCache = chunkCache
        self.store = store
        self.minter = minter
        self.environment = environment
        self.origin = origin
        self.random = Mutex(random)
    }

    private var now: Int64 { environment.clock.unixMilliseconds() }

    /// A conversation with `server` (its normalized URL text), with `token` when signed in.
    func connection(to url: URL, server: String, token: String?) -> ServerConnection {
        ServerConnection(
            transport: environment.transport(url), server: server, token: token, retry: environment.retry,
            sleep: environment.sleep,
            jitter: { [self] in self.random.withLock { generator in Double.random(in: 0...1, using: &generator) } })
    }

    // MARK: - Sync

    /// Syncs with the signed-in account (see ``NotesClient/sync(progress:)``); with `pullFirst`, pulls before
    /// pushing.
    ///
    /// - Throws: `not_signed_in`; `signed_out_by_server` on 401 (the session is forgotten unless another one
    ///   replaced it meanwhile; notes are kept); the connection's and the store's errors.
    func sync(progress: (@Sendable (SyncProgress) -> Void)?, pullFirst: Bool) async throws(NotesError) -> SyncReport {
        let settings = try store.read { tx in try tx.settings() }
        guard let settings, settings.account != nil, let token = settings.token, let server = settings.serverURL,
            let url = URL(string: server)
        else {
            throw NotesError(.notSignedIn, "Not signed in; sign in with `notes login` first.")
        }
        let connection = connection(to: url, server: server, token: token)
        let keys = try store.read { tx in try settings.account.flatMap { account in try tx.keyRing(of: account.accountID) } }
        do {
            return try await run(connection, keys: keys, pullFirst: pullFirst, progress: progress)
        } catch {
            if error.code == .signedOutByServer { forgetRevokedSession(token: token) }
            throw error
        }
    }

    /// What a 401 to `token` does: the session is forgotten (unless another one replaced it meanwhile) and the
    /// device behaves as signed out; every note is kept.
    func forgetRevokedSession(token: String) {
        _ = try? store.write { tx in
            if try tx.dropToken(token) {
                try tx.forgetAccountState()
                if OwnerPlanner.afterSignOut { try tx.showUnownedNotes() }
            }
        }
    }

    /// One sync over `connection`; `keys`: the account is encrypted (its notes are sealed and opened with them).
    ///
    /// An encrypted account's sync first asks for the key generations this device lacks (``refreshKeys(_:account:ring:password:recovery:)``:
    /// one request, usually answering that there are none), so edits are sealed under the newest generation, and
    /// queues a few notes sealed under older generations to be sealed again (``reseal(_:keys:)``).
    private func run(
        _ connection: ServerConnection, keys held: AccountKeyRing?, pullFirst: Bool, progress: (@Sendable (SyncProgress) -> Void)?
    ) async throws(NotesError) -> SyncReport {
        var report = SyncReport()
        let info = try await connection.call(.info, ServerInfo.self)
        let limits = Self.sanitized(info.limits)
        try store.write { tx in
            try tx.rememberLimits(limits)
            try tx.applyRetriesAtEverySync()
        }
        var keys = held
        if let ring = held {
            let fresh = try await refreshKeys(connection, account: ring.account, ring: ring).ring
            keys = fresh
            report.resealed = try store.write { tx in try tx.queueReseal(account: fresh.account, below: fresh.current.generation, limit: Self.resealPerSync) }
        }
        let cursorBeforePull = pullFirst ? try store.read { tx in try tx.cursor() } : nil
        if pullFirst { try await pull(connection, keys: &keys, limits: limits, report: &report, progress: progress) }
        let replayedBeforePush = report.replayed
        try await push(connection, keys: &keys, limits: limits, report: &report, progress: progress)
        if pullFirst, report.replayed > replayedBeforePush {
            // A replay answers the outcome stored when the edit was first applied, not the note's state now, and
            // the pull that came first may already have passed a later change to that note (it left the dirty
            // note alone): pull again from where that pull started, so the settled note catches up.
            try store.write { tx in
                if let cursorBeforePull { try tx.setCursor(cursorBeforePull) } else { try tx.clearCursor() }
            }
        }
        try await pull(connection, keys: &keys, limits: limits, report: &report, progress: progress)
        let now = now
        (report.pending, report.refused) = try store.write { tx in
            try tx.recordSync(at: now)
            return (try tx.pendingCount(), try tx.refusedNotes())
        }
        return report
    }

    /// The server's limits, raised to workable minimums.
    static func sanitized(_ limits: SyncLimits) -> SyncLimits {
        var limits = limits
        limits.maxBatchChanges = max(1, limits.maxBatchChanges)
        limits.maxBodyBytes = max(1024, limits.maxBodyBytes)
        limits.maxNoteBytes = max(1, limits.maxNoteBytes)
        limits.maxPageSize = max(1, limits.maxPageSize)
        return limits
    }

    // MARK: - Push

    private func push(
        _ connection: ServerConnection, keys: inout AccountKeyRing?, limits: SyncLimits, report: inout SyncReport,
        progress: (@Sendable (SyncProgress) -> Void)?
    ) async throws(NotesError) {
        for _ in 0..<Self.maxPushRounds {
            var entries = try store.write { tx in try prepareOutbox(tx) }
            if entries.isEmpty { return }
            if let keys { entries = try store.read { tx in try Self.seal(entries, keys: keys, in: tx) } }
            let staleBeforeRound = report.stale

            let plan = OutboxPlanner.plan(entries, limits: limits)
            if !plan.refused.isEmpty {
                try store.write { tx in
                    for refused in plan.refused { try refuse(refused, in: tx, report: &report) }
                }
            }

            var queue = plan.batches
            var done = 0
            progress?(SyncProgress(phase: .pushing, done: 0, total: plan.total))
            while !queue.isEmpty {
                var batch = queue.removeFirst()
                let before = batch.count
                batch = try await presentChunks(for: batch, keys: keys, over: connection, report: &report)
                done += before - batch.count
                if batch.isEmpty { continue }
                let response: PushResponse
                do {
                    response = try await send(batch, over: connection)
                } catch where error.httpStatus == 413 {
                    switch OutboxPlanner.whenTooLarge(batch, serverError: error.api) {
                    case .split(let first, let second):
                        queue.insert(contentsOf: [first, second], at: 0)
                    case .refuse(let refused):
                        try store.write { tx in try refuse(refused, in: tx, report: &report) }
                        done += 1
                    }
                    continue
                }
                report.requests += 1
                let now = now
                try store.write { tx in try apply(response, to: batch, keys: keys, in: tx, now: now, report: &report) }
                done += batch.count
                progress?(SyncProgress(phase: .pushing, done: done, total: plan.total))
            }
            if report.stale > staleBeforeRound {
                // The server cannot merge what it cannot read: bring the notes' current versions, merge them on this
                // device (the pull does), and push the merges in the next round, based on those versions.
                try await pull(connection, keys: &keys, limits: limits, report: &report, progress: progress)
            }

            let waiting = try store.read { tx in try tx.pendingCount() }
            if waiting == 0 { return }
        }
    }

    /// Makes every chunk `batch` refers to present on the server (``ChunkPlanner``); returns the batch without the
    /// changes it refused (a chunk neither this device nor the server has), whose refusals are recorded.
    private func presentChunks(
        for batch: [OutboxPlanner.Prepared], keys: AccountKeyRing?, over connection: ServerConnection, report: inout SyncReport
    ) async throws(NotesError) -> [OutboxPlanner.Prepared] {
        let entries = batch.map(\.entry)
        let chunks = ChunkPlanner.chunks(of: entries)
        guard !chunks.isEmpty else { return batch }
        let uploader = ChunkUploader(connection: connection, cache: chunkCache, progress: nil)
        // An encrypted account's chunks in the clear are never uploaded (a backstop: ``ChunkPlanner/clearChunks(of:)``).
        let clear = keys == nil ? [] : ChunkPlanner.clearChunks(of: entries)
        let (sent, absent, withheld) = try await uploader.uploadCached(chunks, withholding: clear)
        report.chunksUploaded += sent.chunks
        report.chunkBytesUploaded += sent.bytes
        // Attachments whose bytes neither side has are left out of their changes (``ChunkPlanner``).
        let (kept, dropped) = ChunkPlanner.droppingAbsent(entries, absent: absent)
        report.attachmentsDropped += dropped
        var batch = batch
        if dropped > 0 {
            for index in batch.indices where kept[index] != batch[index].entry {
                var entry = kept[index]
                if entry.sealed != nil, let keys {
                    entry = try store.read { tx in try Self.seal([entry], keys: keys, in: tx) }[0]
                }
                batch[index] = OutboxPlanner.Prepared(entry: entry, json: entry.change.encodedJSON())
            }
        }
        let refusals = ChunkPlanner.refusals(kept, absent: absent) + ChunkPlanner.refusingUnsealed(kept, withheld: withheld)
        guard !refusals.isEmpty else { return batch }
        try store.write { tx in
            for refused in refusals { try refuse(refused, in: tx, report: &report) }
        }
        let refused = Set(refusals.map(\.entry.editID))
        return batch.filter { !refused.contains($0.entry.editID) }
    }

    /// `entries` sealed with `keys`: each payload's `seq` is 1 + the newest this device has seen of the note.
    private static func seal(_ entries: [OutboxEntry], keys: AccountKeyRing, in tx: LocalStore.Transaction) throws -> [OutboxEntry] {
        try entries.map { entry throws in
            var entry = entry
            let base = try tx.noteSeq(account: keys.account, clientID: entry.clientID, origin: entry.origin)?.seq ?? 0
            entry.sealed = try NoteSealing.seal(entry, baseSeq: base, keys: keys)
            return entry
        }
    }

    /// Queues and snapshots what a round pushes, and returns the whole outbox in push order (``OutboxPlanner``).
    private func prepareOutbox(_ tx: LocalStore.Transaction) throws -> [OutboxEntry] {
        try tx.applyRequeues()
        try tx.applySettles()
        let notes = try tx.notesNeedingSnapshot()
        let editIDs = try tx.mintIDs(notes.count, with: minter)
        try tx.insertSnapshots(OutboxPlanner.snapshots(of: notes, editIDs: editIDs))
        return OutboxPlanner.pushOrder(try tx.outbox())
    }

    private func send(_ batch: [OutboxPlanner.Prepared], over connection: ServerConnection) async throws(NotesError) -> PushResponse {
        let response = try await connection.call(.push, PushResponse.self, body: OutboxPlanner.body(of: batch))
        guard response.results.count == batch.count else {
            throw NotesError.badResponse("\(response.results.count) push results for \(batch.count) changes")
        }
        for (result, item) in zip(response.results, batch)
        where result.editID != item.entry.editID || result.clientID != item.entry.clientID {
            throw NotesError.badResponse("a push result names edit \(result.editID), expected \(item.entry.editID)")
        }
        return response
    }

    /// Applies one push answer (``PushResultPlanner``).
    /// `stale` (encrypted accounts): the snapshot is dropped, the note stays dirty; the pull that follows merges it.
    private func apply(
        _ response: PushResponse, to batch: [OutboxPlanner.Prepared], keys: AccountKeyRing?, in tx: LocalStore.Transaction,
        now: Int64, report: inout SyncReport
    ) throws {
        let writer = try tx.pushResultWriter()
        for (item, result) in zip(batch, response.results) {
            let entry = item.entry
            guard let revision = try writer.takeSnapshot(of: entry) else { continue }
            if result.status == .stale {
                report.stale += 1
                continue
            }
            // A replayed answer stored nothing: the edit went in on an earlier send, sealed then, and a resend is sealed
            // again (a newer seq after a pull brought the stored version: notes-sim's seed 841). The pull the replay
            // rewinds to records the seq the server holds.
            if let keys, let sealed = entry.sealed, !result.replayed, [.created, .reconciled, .updated, .deleted].contains(result.status) {
                // The server now holds this edit: its `seq` is the note's newest (unless a pull already brought a newer one).
                let seen = try tx.noteSeq(account: keys.account, clientID: entry.clientID, origin: entry.origin)
                if seen.map({ sealed.seq > $0.seq }) ?? true {
                    try tx.setNoteSeq(
                        account: keys.account, clientID: entry.clientID, origin: entry.origin, seq: sealed.seq, editID: entry.editID,
                        generation: keys.current.generation)
                }
            }
            switch PushResultPlanner.apply(result, to: entry, localRevision: revision, now: now) {
            case .accept(let acceptance):
                report.countAccepted(result)
                if result.status == .conflict && !result.replayed { report.conflictNotes.append(entry.noteID) }
                if result.status == .kept && !result.replayed { report.undeleted.append(entry.noteID) }
                try writer.apply(acceptance, toNote: entry.noteID)
            case .refuse(let refusal):
                try record(refusal, of: entry, in: tx, report: &report)
            }
        }
    }

    /// Drops the snapshot of a change no request could carry, and records the refusal.
    private func refuse(_ refused: OutboxPlanner.Refused, in tx: LocalStore.Transaction, report: inout SyncReport) throws {
        guard try tx.dropSnapshot(editID: refused.entry.editID) else { return }
        try record(PushResultPlanner.refusal(for: refused.error), of: refused.entry, in: tx, report: &report)
    }

    /// Executes a refusal whose snapshot is already removed.
    private func record(
        _ refusal: PushResultPlanner.Refusal, of entry: OutboxEntry, in tx: LocalStore.Transaction, report: inout SyncReport
    ) throws {
        switch refusal {
        case .forgetServerID:
            try tx.forgetServerID(ofNote: entry.noteID)
        case .forgetServerVersion:
            try tx.forgetServerVersion(ofNote: entry.noteID)
        case .recordError(let error):
            if try tx.recordPushError(error, onNote: entry.noteID, revision: entry.revision) {
                report.countFailure(of: entry, error: error)
            }
        }
    }

    // MARK: - Pull

    private func pull(
        _ connection: ServerConnection, keys: inout AccountKeyRing?, limits: SyncLimits, report: inout SyncReport,
        progress: (@Sendable (SyncProgress) -> Void)?
    ) async throws(NotesError) {
        try await store.withBulkWrites { () async throws(NotesError) in
            try await pullPages(connection, keys: &keys, limits: limits, report: &report, progress: progress)
        }
    }

    /// Pulls every page after the cursor. A page holding a record sealed under a key generation this device lacks
    /// (the account key was rotated since this sync began) has the keys fetched before it is applied.
    private func pullPages(
        _ connection: ServerConnection, keys: inout AccountKeyRing?, limits: SyncLimits, report: inout SyncReport,
        progress: (@Sendable (SyncProgress) -> Void)?
    ) async throws(NotesError) {
        var since = try store.read { tx in try tx.cursor() } ?? SyncCursor.start.text
        var restarted = false
        var done = 0
        var total: Int?
        progress?(SyncProgress(phase: .pulling, done: 0, total: nil))
        // A task asks for each next page as soon as a page names its cursor (``PullPageQueue``): the server reads
        // and writes the pages ahead while this device writes the ones before (issue 30). The requests are the
        // same, in the same order, as one at a time.
        let pageSize = String(limits.maxPageSize)
        let fetch: @Sendable (String) async -> Result<PullResponse, NotesError> = { since in
            do throws(NotesError) {
                return .success(
                    try await connection.call(
                        .pull, PullResponse.self, query: [(PullQuery.since, since), (PullQuery.limit, pageSize)]))
            } catch {
                return .failure(error)
            }
        }
        var queue = PullPageQueue(capacity: Self.groupNotes)
        var fetching = await queue.startFetching(from: since, with: fetch)
        defer {
            fetching.cancel()
            Task { [queue] in await queue.close() }
        }
        // Pages are written a group at a time, each group in one transaction with the cursor of its last page: a
        // commit rewrites every index page the group touched, and notes pulled in another order than their client
        // IDs' (an account edited over years) touch most of them: 1,000-note commits made a 200,000-note first
        // sign-in 2.5 times as slow (issue 30). A failure commits the pages that came before it.
        var group: [PullResponse] = []
        // Set once a page met a version it could not merge yet (``PageCounts/heldBack``): the stored cursor stays
        // before that page for the rest of this pull.
        var holdingCursor = false
        var markedUnfinished = false
        var groupNotes = 0
        var groupBytes = 0
        func write(_ pages: [PullResponse], report: inout SyncReport) throws(NotesError) {
            guard !pages.isEmpty else { return }
            let now = now
            let holding = holdingCursor
            let counts = try store.write { tx in
                var counted: [PageCounts] = []
                for page in pages {
                    let heldBack = counted.contains(where: \.heldBack)
                    counted.append(try apply(page, keys: keys, in: tx, now: now, storeCursor: !holding && !heldBack))
                }
                return counted
            }
            for page in counts { page.add(to: &report) }
            if counts.contains(where: \.heldBack) { holdingCursor = true }
            let pulled = pages.reduce(0) { $0 + $1.changes.count }
            report.pulled += pulled
            done += pulled
        }
        while true {
            let page: PullResponse
            switch await queue.take() {
            case .success(let answer):
                page = answer
            case .failure(let error) where error.api?.code == .invalidCursor && !restarted:
                // The server does not know our cursor (e.g. it was restored from a backup): start over. Applying
                // records is idempotent, so this costs only bandwidth.
                restarted = true
                fetching.cancel()
                await queue.close()
                try write(group, report: &report)
                group = []
                groupNotes = 0
                groupBytes = 0
                since = SyncCursor.start.text
                try store.write { tx in try tx.clearCursor() }
                queue = PullPageQueue(capacity: Self.groupNotes)
                fetching = await queue.startFetching(from: since, with: fetch)
                continue
            case .failure(let error):
                try write(group, report: &report)
                throw error
            }
            if page.hasMore, page.cursor.text == since, page.changes.isEmpty {
                try write(group, report: &report)
                throw NotesError.badResponse("the pull announced more changes without moving its cursor")
            }
            report.requests += 1
            if let remaining = page.remaining {
                // An upper bound, exact for a pull from the start: the tightest one seen is the total.
                total = min(total ?? Int.max, done + groupNotes + page.changes.count + remaining)
            }
            if page.hasMore, !markedUnfinished {
                // Said before the group is written: a pull killed before its first group still shows as unfinished.
                try store.write { tx in try tx.setPullUnfinished(true) }
                markedUnfinished = true
            }
            if let held = keys, page.changes.contains(where: { Self.sealed($0.text, underAGenerationMissingFrom: held) }) {
                try write(group, report: &report)
                group = []
                groupNotes = 0
                groupBytes = 0
                keys = try await refreshKeys(connection, account: held.account, ring: held).ring
            }
            group.append(page)
            groupNotes += page.changes.count
            groupBytes += page.changes.reduce(0) { $0 + $1.text.utf8.count }
            // Progress counts the notes received, page by page (a group is written about once a second).
            progress?(SyncProgress(phase: .pulling, done: done + groupNotes, total: total))
            if !page.hasMore || groupNotes >= Self.groupNotes || groupBytes >= Self.groupBytes {
                try write(group, report: &report)
                if !page.hasMore { return }
                group = []
                groupNotes = 0
                groupBytes = 0
            }
            since = page.cursor.text
        }
    }

    /// Whether the envelope `text` (a record's, a history version's) names a key generation `keys` lacks (a text that
    /// is no envelope is not: opening it refuses it).
    static func sealed(_ text: String, underAGenerationMissingFrom keys: AccountKeyRing) -> Bool {
        guard !text.isEmpty, let envelope = try? NoteEnvelope(text: text) else { return false }
        return keys.key(generation: envelope.keyGeneration) == nil
    }

    /// How many notes sealed under an older key generation one sync queues to be sealed again under the newest
    /// (Docs/SECURITY.md, "Rotation"): ordinary pushes, each a new version. 100: a sync after a rotation pushes at
    /// most 100 more changes (about 1.5 MB of envelopes for 10-KiB notes), and 10,000 notes are re-sealed in 100 syncs.
    static let resealPerSync = 100

    /// A pull writes its pages in groups of this many notes at least (or ``groupBytes`` of text), each group one
    /// transaction: 10,000 took a 200,000-note sign-in in random client-ID order from 3.3 to about 1.5 times the
    /// disk's floor; larger groups gained nothing more (a kill loses at most one group's work, about a second).
    static let groupNotes = 10_000
    /// The most text a pull holds in one group before it writes it (pages are at most 4 MiB of text each).
    static let groupBytes = 8 << 20

    /// What a pull page did, for the report.
    private struct PageCounts {
        var applied = 0
        var matched = 0
        var conflictCopies = 0
        var undeleted: [Int64] = []
        var deviceMerged = 0
        var deviceConflicts: [Int64] = []
        var tampered: [TamperedNote] = []
        /// A record of the page was not merged because its note's change is in flight (``apply(_:keys:in:now:storeCursor:)``).
        var heldBack = false

        /// Counts the page in `report` (once its transaction committed).
        func add(to report: inout SyncReport) {
            report.applied += applied
            report.matched += matched
            report.pulledConflictCopies += conflictCopies
            report.undeleted += undeleted
            report.deviceMerged += deviceMerged
            report.deviceConflicts += deviceConflicts
            report.tampered += tampered
        }
    }

    /// Applies one pull page (``PullPlanner``) and, with `storeCursor`, stores its cursor (and whether more pages wait).
    ///
    /// With `keys` (an encrypted account) each record is opened first (``NoteSealing/open(_:keys:seen:)``): one that
    /// does not open or is a rollback is refused and reported, and the note here stays as it is. A note with changes
    /// waiting whose server version is not the record's is merged here (``DeviceMerge``), since the server cannot;
    /// unless a push of its change is in flight (a sign-in's first pull, after a sync whose push got no answer): the
    /// answer decides (a replay, or `stale`), so the record is left alone and the page's cursor is not stored
    /// (``PageCounts/heldBack``). The pull after that push brings the record again and merges it, also when the push
    /// comes in a later sync; before, the cursor passed it, every push was answered `stale` and the note never
    /// converged (notes-sim seed 1190).
    private func apply(
        _ page: PullResponse, keys: AccountKeyRing?, in tx: LocalStore.Transaction, now: Int64, storeCursor: Bool
    ) throws -> PageCounts {
        let writer = try tx.pullPageWriter()
        var counts = PageCounts()
        for pulled in page.changes {
            var record = pulled
            var seq: UInt64?
            if let keys {
                let seen = try tx.noteSeq(account: keys.account, clientID: record.clientID, origin: record.origin)
                switch NoteSealing.open(record, keys: keys, seen: seen) {
                case .refused(let tampered):
                    counts.tampered.append(tampered)
                    continue
                case .opened(let opened, let payloadSeq):
                    record = opened
                    seq = payloadSeq
                }
            }
            let (plain, merging) = try writer.withLocalNote(matching: record) {
                local -> (PullPlanner.Outcome, (DeviceMerge, PullPlanner.Outcome)?) in
                let plain = PullPlanner.apply(record, local: local, now: now)
                guard keys != nil, let local, local.isDirty, local.serverVersion != record.version else { return (plain, nil) }
                let merge = DeviceMerge(local: local)
                return (plain, (merge, PullPlanner.apply(record, local: merge.asClean, now: now)))
            }
            var outcome = plain
            var merge: DeviceMerge?
            if let merging {
                if try tx.hasSnapshot(noteID: merging.0.noteID) {
                    counts.heldBack = true
                } else {
                    merge = merging.0
                    outcome = merging.1
                }
            }
            if outcome.applied { counts.applied += 1 }
            if outcome.matched { counts.matched += 1 }
            if outcome.newConflictCopy { counts.conflictCopies += 1 }
            if outcome.undeleted, case .take(let noteID, _, _, _) = outcome.action { counts.undeleted.append(noteID) }
            try writer.perform(outcome.action)
            if let merge {
                switch try merge.apply(theirs: record, in: tx, minter: minter, origin: origin, now: now) {
                case .merged: counts.deviceMerged += 1
                case .conflict: counts.deviceConflicts.append(merge.noteID)
                case .tookTheirs: break
                }
            }
            if let keys, let seq, let editID = record.editID {
                try tx.setNoteSeq(
                    account: keys.account, clientID: record.clientID, origin: record.origin, seq: seq, editID: editID,
                    generation: (try? NoteEnvelope(text: pulled.text))?.keyGeneration ?? 0)
            }
        }
        if storeCursor && !counts.heldBack { try tx.setCursor(page.cursor.text) }
        try tx.setPullUnfinished(page.hasMore)
        return counts
    }

    // MARK: - Accounts

    /// Creates an account on the server; `encrypted`: an end-to-end encrypted one (its key stored here, and its
    /// recovery key returned, to be shown once), else a plaintext one (nil returned).
    ///
    /// An encrypted account's ID is minted here (its keys are bound to it); the password itself is never sent, its
    /// AuthKey is.
    func signUp(
        url: URL, server: String, username: String, password: String, invite: String? = nil, encrypted: Bool = false
    ) async throws(NotesError) -> RecoveryKey? {
        var request = SignUpRequest(username: username, password: password, invite: invite)
        var made: NoteSealing.NewAccount?
        if encrypted {
            let accountID = try store.write { tx in try tx.mintIDs(1, with: minter)[0] }
            let account = try NoteSealing.newAccount(
                accountID: accountID, password: password, cost: environment.kdfCost, policy: environment.kdfPolicy)
            request.password = account.authKey.serverPassword
            request.encryption = account.setup
            made = account
        }
        let response = try await connection(to: url, server: server, token: nil)
            .call(.signUp, AccountResponse.self, body: encodeBody(request))
        guard let made else { return nil }
        guard response.accountID == made.accountKey.account else {
            throw NotesError.badResponse("the new account is \(response.accountID), not the ID its keys are bound to")
        }
        try store.write { tx in try tx.storeKeys([made.accountKey]) }
        return made.recoveryKey
    }

    /// Signs in to `username`'s account on `server` (its normalized URL text), stores the session, then syncs (see
    /// ``NotesClient/signIn(server:username:password:progress:)``).
    func signIn(
        url: URL, server: String, username: String, password: String, unowned: UnownedNotes, wipe: Bool, setUpEmpty: Bool = true,
        progress: (@Sendable (SyncProgress) -> Void)?
    ) async throws(NotesError) -> SignInReport {
        let anonymous = connection(to: url, server: server, token: nil)
        let memory = try store.read { tx in try tx.credentialMemory(server: server, username: username) }
        // An encrypted account's credential is the password's AuthKey (the password never leaves the device); the
        // server's prelogin says how to derive it. An account this device signed in to as plaintext skips it: the
        // password goes as at that sign-in, to the server that had it then (and a server can answer any prelogin
        // `encrypted: false` for an account a device never saw encrypted anyway). An account this device holds keys
        // of never skips it, and a prelogin that calls it plaintext is refused (a downgrade).
        var derived: DerivedKeys?
        if memory != .plaintext {
            derived = try await credentialKeys(username: username, password: password, memory: memory, connection: anonymous, server: server)
        }
        let devicePublicKey = try store.write { tx in try tx.deviceKeyPair().publicKey.text }
        var request = SignInRequest(
            username: username, password: derived?.authKey.serverPassword ?? password,
            deviceName: String(
                String.UnicodeScalarView(environment.deviceName.unicodeScalars.filter { $0.properties.generalCategory != .control })
                    .prefix(SignInRequest.maxDeviceNameLength)),
            origin: origin, devicePublicKey: devicePublicKey)
        let session: SignInResponse
        do {
            session = try await anonymous.call(.signIn, SignInResponse.self, body: encodeBody(request))
        } catch where memory == .plaintext && error.code == .invalidCredentials {
            // Set up as encrypted since (by another device), or just a wrong password: the prelogin tells.
            guard let keys = try await credentialKeys(username: username, password: password, memory: .unknown, connection: anonymous, server: server)
            else { throw error }
            derived = keys
            request.password = keys.authKey.serverPassword
            session = try await anonymous.call(.signIn, SignInResponse.self, body: encodeBody(request))
        }
        var accountKey: AccountKey?
        var setUp: RecoveryKey?
        if session.encryption == nil, derived == nil, setUpEmpty, memory == .unknown,
            try store.read({ tx in try tx.keyRing(of: session.accountID) }) == nil,
            let made = try await setUpEmptyAccount(session, password: password, url: url, server: server)
        {
            // An empty plaintext account (its operator made it): encrypted from its first sign-in here on.
            (accountKey, setUp) = (made.key, made.recoveryKey)
        }
        if let encryption = session.encryption {
            guard let derived else { throw NotesError.badResponse("an encrypted account's sign-in after a plaintext prelogin") }
            // The password opens the generation the server keeps wrapped by it (an operator's reset: it does not, and
            // the error says what happened); the keys answer brings the rest: every older generation through the
            // chain, every newer one through the hand-overs sealed to the password. All stored, or none.
            let withToken = connection(to: url, server: server, token: session.token)
            do {
                _ = try NoteSealing.accountKey(encryption, account: session.accountID, keys: derived)
                let held = try store.read { tx in try tx.keyRing(of: session.accountID) }
                _ = try await refreshKeys(withToken, account: session.accountID, ring: held, password: derived)
            } catch {
                _ = try? await withToken.exchange(.signOut, attempts: 1)
                throw error
            }
        } else if setUp == nil, try store.read({ tx in try tx.keyRing(of: session.accountID) }) != nil {
            throw NotesError(
                .encryption,
                "The server \(server) says \(session.username)'s account is not end-to-end encrypted, but this device holds its keys: refusing to sync it (a server cannot downgrade an account).")
        }
        // Remembered only when the password itself went and the server took it as a plaintext account's.
        let plaintext = derived == nil && session.encryption == nil && setUp == nil

        let account = AccountInfo(accountID: session.accountID, username: session.username, serverURL: server)
        // Notes of no account carried into an encrypted account get their attachments sealed for it first (staged
        // here, outside the transaction), so that their push never uploads a chunk in the clear.
        var carriedResealer: AttachmentResealer?
        if unowned == .carry {
            let (held, manifests) = try store.read { tx in (try tx.keyRing(of: session.accountID), try tx.attachmentsOfUnownedNotes()) }
            if let keys = accountKey.map(AccountKeyRing.init) ?? held {
                carriedResealer = try AttachmentResealer(cache: chunkCache, keys: keys, staging: manifests)
            }
        }
        let (plan, owners) = try store.write { tx in
            // A known account with this username on this server but another ID was deleted there (usernames are
            // unique per server): its notes become notes of no account, which `unowned` decides about below.
            var rekeyed: [RekeyedNote] = []
            for stale in try tx.knownAccounts(username: session.username)
            where stale.serverURL == server && stale.accountID != session.accountID {
                rekeyed += try tx.disownNotes(of: stale.accountID, minter: minter, origin: origin, now: now, onDevice: chunkCache.holds).rekeyed
            }
            let settings = try tx.requireSettings()
            let plan = SignInPlanner.plan(
                stored: SignInPlanner.Stored(
                    token: settings.token, accountID: settings.accountID, serverURL: settings.serverURL,
                    shownAccountID: try tx.shownAccountID(),
                    keptCursor: settings.accountID == session.accountID ? settings.cursor : try tx.keptCursor(of: session.accountID)),
                accountID: session.accountID, serverURL: server, unowned: unowned, wipe: wipe)
            if plan.reconciling { try tx.forgetAccountState() }
            var attachmentsDropped = 0
            if plan.owners.unowned == .carry {
                // Sealed before the clash check, so that a twin another device carried (sealed alike) is one note.
                if let carriedResealer { attachmentsDropped = try tx.resealAttachmentsOfUnownedNotes { try carriedResealer($0) } }
                rekeyed += try tx.resolveKeyClashes(moving: nil, to: session.accountID, minter: minter, origin: origin, now: now)
            }
            var owners = try tx.applyOwners(plan.owners)
            owners.rekeyed = rekeyed
            owners.attachmentsDropped = attachmentsDropped
            try tx.storeSession(serverURL: server, accountID: session.accountID, username: session.username, token: session.token)
            // The set-up's generation 1 (an encrypted account's keys were stored by refreshKeys above).
            if let accountKey { try tx.storeKeys([accountKey]) }
            try tx.rememberAccount(account)
            try tx.setPlaintext(session.accountID, plaintext)
            if let cursor = plan.resumeCursor {
                try tx.setCursor(cursor)
            } else if plan.reconciling {
                try tx.queueForPush(try tx.signInQueueStates().filter { SignInPlanner.queues($0.state) }.map(\.id))
            }
            return (plan, owners)
        }
        if let replaced = plan.revoke, let oldURL = URL(string: replaced.serverURL) {
            _ = try? await connection(to: oldURL, server: replaced.serverURL, token: replaced.token).exchange(.signOut, attempts: 1)
        }
        let result: Result<SyncReport, NotesError>
        do {
            result = .success(try await sync(progress: progress, pullFirst: plan.reconciling))
        } catch {
            result = .failure(error)
        }
        return SignInReport(
            account: account, reconciling: plan.reconciling, owners: owners, sync: result, recoveryKey: setUp?.humanForm, setUpEncryption: setUp != nil)
    }

    /// The keys of `username`'s password when its server's prelogin says the account is encrypted (the cost held to
    /// the environment's ``KDFPolicy``), nil when it says plaintext (or the server has no prelogin: an older one, with
    /// plaintext accounts only).
    ///
    /// - Throws: `encryption` when `memory` says this device holds the account's keys and the server says plaintext
    ///   (a downgrade: nothing is sent), or the cost is out of bounds; the connection's errors.
    func credentialKeys(
        username: String, password: String, memory: CredentialMemory, connection: ServerConnection, server: String
    ) async throws(NotesError) -> DerivedKeys? {
        let prelogin: PreloginResponse?
        do {
            prelogin = try await connection.call(.prelogin, PreloginResponse.self, body: encodeBody(PreloginRequest(username: username)))
        } catch where error.httpStatus == 404 {
            prelogin = nil
        }
        guard let prelogin, prelogin.encrypted else {
            if memory == .encrypted {
                throw NotesError(
                    .encryption,
                    "The server \(server) says \(username)'s account is not end-to-end encrypted, but this device holds its keys: refusing to send the password (a server cannot downgrade an account). Nothing was sent.")
            }
            return nil
        }
        guard let kdf = prelogin.kdf else { throw NotesError.badResponse("a prelogin answer of an encrypted account without kdf") }
        return try NoteSealing.derive(password: password, parameters: try NoteSealing.parameters(kdf, server: server), policy: environment.kdfPolicy)
    }

    /// Signs out (see ``NotesClient/signOut(wipe:)``): revokes the token when the server is reachable, then
    /// forgets the account state and shows the unowned notes again (``OwnerPlanner/afterSignOut``); with `wipe`,
    /// deletes the notes on show from this device (the account's and the unowned ones).
    func signOut(wipe: Bool) async throws(NotesError) -> SignOutReport {
        let settings = try store.read { tx in try tx.settings() }
        var revoked = false
        if let settings, let token = settings.token, let server = settings.serverURL, let url = URL(string: server) {
            do {
                _ = try await connection(to: url, server: server, token: token).exchange(.signOut, attempts: 1)
                revoked = true
            } catch {
                revoked = error.code == .signedOutByServer  // already revoked
            }
        }
        return try store.write { tx in
            let pending = try tx.dirtyCount()
            let shown = try tx.shownAccountID()
            try tx.forgetAccountState()
            if OwnerPlanner.afterSignOut { try tx.showUnownedNotes() }
            var wiped = 0
            var kept = 0
            if wipe {
                wiped = try tx.deleteNotesOnShow()
            } else if let shown {
                kept = try tx.liveCount(ownedBy: shown)
            }
            return SignOutReport(
                revoked: revoked, pending: pending, wiped: wiped, account: try shown.map { id throws in try tx.knownAccount(id) },
                kept: kept, unowned: try tx.unownedCount())
        }
    }
}
