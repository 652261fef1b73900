import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import NotesClient
import SyncHarness

/// Counts for the summary line.
public struct SimSummary: Sendable, Equatable {
    public var steps = 0
    public var syncs = 0
    public var signIns = 0
    public var signOuts = 0
    public var faults = 0
    public var failedOperations = 0
    public var notes = 0
    public var conflicts = 0
    /// Live conflict copies at the end with the same text as another live copy of the same note.
    public var repeatedCopies = 0
    public var merges = 0
    /// Notes a sign-in found again instead of duplicating: by its pull (client ID and origin) or by the server's
    /// reconciliation of a push.
    public var reconciled = 0
    public var replayed = 0
    public var restarts = 0
    public var collisions = 0
    public var clockJumps = 0
    /// Notes at the end that share their account and client ID with an earlier note of another origin: the notes a
    /// design keyed by (account, client ID) alone would have merged into another. Shown only when an ID scheme was
    /// chosen (``SimParameters/idScheme``).
    public var clientIDCollisions = 0
    public var reportsClientIDCollisions = false
    /// Accounts on one device (issue 16): live notes set aside by a sign-in to another account, brought back by
    /// their account's sign-in, carried into an account from those written while signed out, kept off it, and
    /// copied into another account.
    public var setAside = 0
    public var restored = 0
    public var carried = 0
    public var keptAside = 0
    public var copies = 0
    /// Sessions revoked by another device (issue 18), and those the device learned of during a sync.
    public var revocations = 0
    public var revokedMidSync = 0
    /// Accounts deleted (and signed up again).
    public var accountsDeleted = 0
    /// Notes of a deleted account that became new notes of a device because their key was taken (not shown).
    public var rekeyed = 0
    /// Watch iterations (issue 19), the syncs the watch ran (at its start, on a feed's answer, after local writes),
    /// and the faults injected on the feed.
    public var watchWakes = 0
    public var watchSyncs = 0
    public var feedFaults = 0
    /// Tag and flag changes made by tag steps (issue 31), and the versions read back from the notes' histories.
    public var tagChanges = 0
    public var versionsChecked = 0
    /// Issue 32: end-to-end encrypted accounts (each sign-up counts, a deleted one's too), the canary words written to
    /// them (line tokens and tags), the envelopes the auditor opened (each time it read one), pushes answered `stale`
    /// and merged on the device, and the scans of the server's store for canary words with the bytes they read.
    public var encryptedAccounts = 0
    public var canaryWords = 0
    public var envelopesOpened = 0
    public var staleAnswers = 0
    public var deviceMerges = 0
    public var storeScans = 0
    public var bytesScanned = 0
    /// Issue 33: files attached, attachments saved and compared with what was attached, syncs cut mid-upload and
    /// saves cut mid-download (each resumed), and the chunks devices uploaded and downloaded.
    public var filesAttached = 0
    public var attachmentsSaved = 0
    public var uploadsCut = 0
    public var downloadsCut = 0
    public var chunksUploaded = 0
    public var chunksDownloaded = 0

    public init() {}

    public mutating func add(_ other: SimSummary) {
        steps += other.steps; syncs += other.syncs; signIns += other.signIns; signOuts += other.signOuts
        faults += other.faults; failedOperations += other.failedOperations; notes += other.notes
        conflicts += other.conflicts; repeatedCopies += other.repeatedCopies; merges += other.merges; reconciled += other.reconciled
        replayed += other.replayed; restarts += other.restarts; collisions += other.collisions
        clockJumps += other.clockJumps
        clientIDCollisions += other.clientIDCollisions
        reportsClientIDCollisions = reportsClientIDCollisions || other.reportsClientIDCollisions
        setAside += other.setAside; restored += other.restored; carried += other.carried; keptAside += other.keptAside
        copies += other.copies
        revocations += other.revocations; revokedMidSync += other.revokedMidSync; accountsDeleted += other.accountsDeleted
        rekeyed += other.rekeyed
        watchWakes += other.watchWakes; watchSyncs += other.watchSyncs; feedFaults += other.feedFaults
        tagChanges += other.tagChanges; versionsChecked += other.versionsChecked
        encryptedAccounts += other.encryptedAccounts; canaryWords += other.canaryWords; envelopesOpened += other.envelopesOpened
        staleAnswers += other.staleAnswers; deviceMerges += other.deviceMerges
        storeScans += other.storeScans; bytesScanned += other.bytesScanned
        filesAttached += other.filesAttached; attachmentsSaved += other.attachmentsSaved; uploadsCut += other.uploadsCut
        downloadsCut += other.downloadsCut; chunksUploaded += other.chunksUploaded; chunksDownloaded += other.chunksDownloaded
    }

    public var fields: [(String, String)] {
        let schemeFields = reportsClientIDCollisions ? [("client-ID collisions in one account", "\(clientIDCollisions)")] : []
        let watchFields = watchWakes > 0
            ? [("watch iterations", "\(watchWakes)"), ("syncs run by watches", "\(watchSyncs)"), ("feed faults", "\(feedFaults)")] : []
        return [
            ("steps", "\(steps)"), ("syncs", "\(syncs)"), ("sign-ins", "\(signIns)"), ("sign-outs", "\(signOuts)"),
            ("faults injected", "\(faults)"), ("operations failed by faults", "\(failedOperations)"),
            ("server restarts", "\(restarts)"), ("clock jumps", "\(clockJumps)"), ("forced ID collisions", "\(collisions)"),
            ("notes on the server", "\(notes)"), ("conflict copies", "\(conflicts)"),
            ("conflict copies repeating another copy's text", "\(repeatedCopies)"), ("merges", "\(merges)"),
            ("duplicates avoided by reconciliation", "\(reconciled)"), ("replays answered idempotently", "\(replayed)"),
            ("notes set aside", "\(setAside)"), ("notes restored", "\(restored)"), ("notes carried", "\(carried)"),
            ("notes kept aside", "\(keptAside)"), ("copies to another account", "\(copies)"),
            ("devices revoked", "\(revocations)"), ("revocations met mid-sync", "\(revokedMidSync)"),
            ("accounts deleted", "\(accountsDeleted)"), ("tag and flag changes", "\(tagChanges)"),
            ("versions checked in histories", "\(versionsChecked)"),
            ("encrypted accounts", "\(encryptedAccounts)"), ("canary words written", "\(canaryWords)"),
            ("envelopes opened by the auditor", "\(envelopesOpened)"), ("pushes answered stale", "\(staleAnswers)"),
            ("stale changes merged on the device", "\(deviceMerges)"), ("store scans for canary words", "\(storeScans)"),
            ("store bytes scanned", "\(bytesScanned)"), ("canary words found in the store", "0"),
            ("files attached", "\(filesAttached)"), ("attachments saved as attached", "\(attachmentsSaved)"),
            ("uploads cut mid-file", "\(uploadsCut)"), ("downloads cut mid-file", "\(downloadsCut)"),
            ("chunks uploaded", "\(chunksUploaded)"), ("chunks downloaded", "\(chunksDownloaded)"),
            ("chunks sent again after a resume", "0"),
        ] + watchFields + schemeFields
    }
}

/// The result of one run.
public struct SimOutcome: Sendable {
    public var summary: SimSummary
    public var violation: Violation?
    public var events: [SimEvent]
    /// What the report shows, when the run was recorded (`recordEvents`).
    public var recording: RunRecording? = nil
    /// How long the run took (set by the sweep's caller, for the sweep report).
    public var duration: Duration = .zero
}

/// Where the server runs.
public enum SimTarget: Sendable, Equatable {
    /// The server library in this process, over an in-memory store: deterministic, no sockets, no sleeps.
    case inProcess
    /// A running `notesyncd`; `restartCommand` (a shell command) restarts it for `restartServer` steps; `storePath`
    /// is its SQLite database, `postgresURL` its PostgreSQL database, each scanned for canary words (issue 32) when
    /// given.
    case http(url: String, restartCommand: String?, storePath: String? = nil, postgresURL: String? = nil)
}

/// One simulation run: sets up accounts and devices, executes a schedule step by step, checks the invariants after
/// every step and at quiescence.
public final class Simulation {
    let parameters: SimParameters
    let target: SimTarget
    let recordEvents: Bool
    let runTag: String

    var server: (any SimServer)!
    var devices: [SimDevice] = []
    var accounts: [SimAccount] = []
    var oracle = Oracle()
    /// Per account: the server's notes as the checks last read them.
    var views: [AccountView] = []
    var summary = SimSummary()
    var events: [SimEvent] = []
    /// Records the run for its report; nil unless `recordEvents`.
    let recorder: RunRecorder?
    var step = 0
    /// The simulated wall time: every step advances it by one second. Device clocks are this plus their skew.
    var now: Int64 = 1_767_225_600_000  // 2026-01-01T00:00:00Z
    var serverClock: ManualFlakeClock!
    /// Devices whose session another device revoked and that have not learned it yet: their next network step may
    /// meet 401 `signed_out_by_server`, which is then expected.
    var revoked: Set<Int> = []
    /// Devices in watch mode: those with a `watchWake` step so far.
    var watching: Set<Int> = []
    /// Mints the IDs of encrypted accounts (their keys are bound to the ID, so the client mints it: see
    /// Docs/SECURITY.md), on the server's clock (which takes an ID minted within a day of its own time).
    var mintAccountID: (() throws -> FlakeID)!
    /// Notes devices refused as tampered in the step (``SyncReport/tampered``), checked after the step's reads.
    var tampered: [String] = []
    /// A directory of this run's own (issue 33), in memory where there is some (``InProcessSimServer/scratchParent``):
    /// the files steps attach and save, and each device's chunk cache.
    let scratch: URL

    static let password = "simulated-password"

    /// How the devices mint client IDs.
    var idScheme: IDScheme { parameters.idScheme ?? .miniflake }

    init(parameters: SimParameters, target: SimTarget, recordEvents: Bool, runTag: String) {
        self.parameters = parameters
        self.target = target
        self.recordEvents = recordEvents
        self.runTag = runTag
        recorder = recordEvents ? RunRecorder(devices: max(1, parameters.devices)) : nil
        scratch = InProcessSimServer.scratchParent.appendingPathComponent("notes-sim-files-\(UUID().uuidString)", isDirectory: true)
    }

    /// Runs a schedule and returns what happened. Never throws for a violation: it is in the outcome. With
    /// `recordEvents` the outcome also carries the run's events and its ``RunRecording`` (for `--report`); recording
    /// only reads, so the run is the same.
    public static func run(
        _ steps: [SimAction], parameters: SimParameters, target: SimTarget = .inProcess, recordEvents: Bool = false,
        runTag: String = ""
    ) async throws -> SimOutcome {
        let simulation = Simulation(parameters: parameters, target: target, recordEvents: recordEvents, runTag: runTag)
        defer { try? FileManager.default.removeItem(at: simulation.scratch) }
        try await simulation.setUp()
        var violation: Violation?
        do {
            for (index, action) in steps.enumerated() {
                simulation.step = index
                try await simulation.execute(action)
                try await simulation.checkAfterStep(action)
                simulation.recordStep(action)
            }
            simulation.step = steps.count
            try await simulation.quiesceAndCheck()
            await simulation.recordEverything()
        } catch let found as Violation {
            violation = found
            simulation.note(nil, .violation, found.description)
            await simulation.recordEverything()
        } catch {
            simulation.dropHeldPulls()
            await simulation.server.shutdown()
            throw error
        }
        simulation.dropHeldPulls()
        await simulation.server.shutdown()
        simulation.summary.steps = steps.count
        simulation.summary.reportsClientIDCollisions = parameters.idScheme != nil
        return SimOutcome(
            summary: simulation.summary, violation: violation, events: simulation.events, recording: simulation.recorder?.finish())
    }

    // MARK: - Setup

    func setUp() async throws {
        serverClock = ManualFlakeClock(unixMilliseconds: now)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        switch target {
        case .inProcess:
            server = try await InProcessSimServer(clock: serverClock)
        case .http(let url, let restartCommand, let storePath, let postgresURL):
            server = try HTTPSimServer(url: url, restartCommand: restartCommand, storePath: storePath, postgresURL: postgresURL)
        }
        // An instance of its own (the in-process server mints with 0): an account ID is never one the server issued.
        switch target {
        case .inProcess:
            let generator = try FlakeGenerator(instance: 5, clock: serverClock)
            mintAccountID = { try generator.next() }
        case .http:
            let generator = try FlakeGenerator(instance: Int.random(in: 0...1023), clock: SystemFlakeClock.coarse)
            mintAccountID = { try generator.next() }
        }
        for k in 0..<max(1, parameters.accounts) {
            let username = runTag.isEmpty ? "sim-a\(k)" : "sim-\(runTag)-a\(k)"
            accounts.append(try await createAccount(k, username: username))
        }
        var seeds = SplitMix64(seed: parameters.seed ^ 0xD1CE_5EED)
        for d in 0..<max(1, parameters.devices) {
            devices.append(
                try SimDevice(
                    index: d, now: now, server: server, seed: seeds.next(), idScheme: idScheme, recordsExchanges: recorder != nil,
                    chunkCache: scratch.appendingPathComponent("device-\(d)-chunks", isDirectory: true)))
            if let recorder { recorder.learn(origin: devices[d].client.origin, of: d) }
        }
        recorder?.learn(accounts: accounts)
        views = Array(repeating: AccountView(), count: accounts.count)
        for device in devices { device.liveIDs = try device.client.identities().notes.filter { !$0.isDeleted && !$0.isSetAside }.map(\.id) }
    }

    // MARK: - Steps

    func note(_ device: Int?, _ kind: SimEvent.Kind, _ detail: String) {
        if recordEvents { events.append(SimEvent(step: step, device: device, kind: kind, detail: detail)) }
    }

    func execute(_ action: SimAction) async throws {
        now += 1000
        serverClock.set(unixMilliseconds: now)
        for device in devices { device.clock.set(unixMilliseconds: now + device.skew) }
        if action.writesLocally { for d in action.devices { devices[safe: d]?.wroteSinceSync = true } }
        switch action {
        case .create(let d, let token):
            guard let device = devices[safe: d] else { return }
            let token = written(token, owner: try device.client.account()?.accountID)
            let note = try local(d) { try device.client.add(token + "\n") }
            oracle.added(token: token, by: d)
            oracle.created(note.key, on: d, in: try accountIndex(of: device))
            self.note(d, .create, "\(token) \(note.clientID.base32)")

        case .edit(let d, let index, let op):
            guard let device = devices[safe: d], let target = try liveNote(d, index: index) else { return }
            try apply(op, to: target, on: device)

        case .delete(let d, let index):
            guard let device = devices[safe: d], let target = try liveNote(d, index: index) else { return }
            oracle.removed(tokens: Lines.tokens(target.text))
            oracle.deletedNotes.insert(target.key)
            _ = try local(d) { try device.client.delete(target.id) }
            note(d, .delete, target.clientID.base32)

        case .tagNote(let d, let index, let op):
            guard let device = devices[safe: d], let target = try liveNote(d, index: index) else { return }
            try apply(op, to: target, on: device)

        case .concurrentTags(let a, let b, let index, let firstOp, let secondOp):
            guard let (mine, theirs) = try sharedNote(a, b, index: index) else { return }
            try apply(firstOp, to: mine, on: devices[a])
            try apply(secondOp, to: theirs, on: devices[b])

        case .sync(let d, let faults):
            guard let device = devices[safe: d], try device.client.account() != nil else { return }
            try await sync(device, faults: faults)

        case .signOut(let d, let faults):
            guard let device = devices[safe: d], try device.client.account() != nil else { return }
            try await signOut(device, faults: faults)

        case .signIn(let d, let account, let faults, let carry):
            guard let device = devices[safe: d], let target = accounts[safe: account] else { return }
            if let current = try accountIndex(of: device), current == account {
                try await sync(device, faults: faults)
                return
            }
            if try device.client.account() != nil { try await signOut(device, faults: []) }
            try await signIn(device, to: account, target: target, faults: faults, carry: carry)

        case .copy(let d, let index, let account):
            guard let device = devices[safe: d], let target = accounts[safe: account], device.knownAccounts.contains(account),
                try device.client.shownAccount()?.accountID != target.accountID, let source = try liveNote(d, index: index)
            else { return }
            // A copy of an encrypted account's words (its note, or a note of a deleted encrypted account's) or of a
            // file with canary words into a plaintext account puts them in the clear, as the user asked: not a step of
            // this simulation, whose invariant is that no such word reaches the server.
            if !target.isEncrypted && holdsCanary(source) { return }
            // A copy refers to its source's chunks, which the device uploads into the other account from its cache: a
            // note with an attachment this device never downloaded cannot be copied whole (see Docs/TESTING.md). Into
            // an encrypted account the device seals each file for it from its cache, and the store scans find any
            // chunk of a file with canary words that goes up in the clear.
            if !source.attachments.allSatisfy(device.client.hasAttachment) { return }
            let copy = try local(d) { try device.client.copy(source.id, to: target.username).note }
            oracle.permit(copy.key, in: account)
            for manifest in copy.attachments { oracle.attachedTo[manifest.sha256, default: []].insert(copy.key) }
            for tag in copy.tags { oracle.addedTag(TagPair(note: copy.key, tag: Tags.key(tag)), by: d) }
            summary.copies += 1
            note(d, .create, "copy of \(source.clientID.base32) into account \(account): \(copy.clientID.base32)")

        case .clockJump(let d, let milliseconds):
            guard let device = devices[safe: d] else { return }
            device.skew += milliseconds
            device.clock.set(unixMilliseconds: now + device.skew)
            summary.clockJumps += 1
            note(d, .clockJump, "\(milliseconds > 0 ? "+" : "")\(milliseconds / 1000) s")

        case .concurrentEdit(let a, let b, let index, let firstOp, let secondOp):
            guard let (mine, theirs) = try sharedNote(a, b, index: index) else { return }
            try apply(firstOp, to: mine, on: devices[a])
            try apply(secondOp, to: theirs, on: devices[b])

        case .collide(let a, let b, let firstToken, let secondToken):
            guard a != b, let first = devices[safe: a], let second = devices[safe: b] else { return }
            // Both devices share one flake instance (see SimDevice); set both clocks to one fresh millisecond past
            // either generator's high-water mark, so both mint the same client ID.
            let marks = try [first, second].map { try $0.client.status().highWaterMark?.unixMilliseconds ?? 0 }
            var instant = max(marks.max() ?? 0, first.clock.unixMilliseconds(), second.clock.unixMilliseconds()) + 1000
            if idScheme != .miniflake {
                // Past the client IDs either device minted with the scheme too, so that neither raises its value.
                // CDCounter: both apps are relaunched in that second, so both counters start from it.
                instant = max(instant, try collisionInstant(after: [first, second]))
                if idScheme == .cdcounter { for device in [first, second] { device.client.restartIDGenerators() } }
            }
            for device in [first, second] {
                device.skew = instant - now
                device.clock.set(unixMilliseconds: instant)
            }
            let firstToken = written(firstToken, owner: try first.client.account()?.accountID)
            let secondToken = written(secondToken, owner: try second.client.account()?.accountID)
            let one = try local(a) { try first.client.add(firstToken + "\n") }
            let two = try local(b) { try second.client.add(secondToken + "\n") }
            oracle.added(token: firstToken, by: a)
            oracle.added(token: secondToken, by: b)
            oracle.created(one.key, on: a, in: try accountIndex(of: first))
            oracle.created(two.key, on: b, in: try accountIndex(of: second))
            if one.clientID == two.clientID { summary.collisions += 1 }
            note(a, .collide, "\(firstToken) \(one.clientID.base32)")
            note(b, .collide, "\(secondToken) \(two.clientID.base32)")

        case .restartServer:
            dropHeldPulls()
            try await server.restart()
            summary.restarts += 1
            note(nil, .restart, "server restarted")

        case .revoke(let d, let request):
            guard let device = devices[safe: d], let k = try accountIndex(of: device) else { return }
            try await revoke(device, account: k, atRequest: request)

        case .deleteAccount(let d):
            guard let device = devices[safe: d], let k = try accountIndex(of: device), !revoked.contains(d) else { return }
            try await deleteAccount(k, from: device)

        case .watchWake(let d, let fault):
            guard let device = devices[safe: d] else { return }
            watching.insert(d)
            try await watchIteration(device, fault: fault)

        case .attach(let d, let index, let file):
            try attach(file, note: index, on: d)

        case .detach(let d, let index, let attachment):
            try detach(note: index, attachment: attachment, on: d)

        case .save(let d, let index, let attachment, let cutAfter):
            try await save(note: index, attachment: attachment, on: d, cutAfter: cutAfter)

        case .cutUpload(let d, let index, let file, let afterChunks):
            try attach(file, note: index, on: d)
            try await cutUpload(on: d, afterChunks: afterChunks)
        }
    }

    /// `device` deletes account `k`; the username is signed up again (a new account, empty). The deleting device's
    /// notes of it become notes of no account at once; every other device signed in to it meets 401 at its next
    /// request, and keeps the old account's notes until it signs in to the username again.
    func deleteAccount(_ k: Int, from device: SimDevice) async throws {
        let old = accounts[k]
        let report: AccountDeletionReport
        do {
            report = try await device.client.deleteAccount(password: Self.password)
        } catch {
            throw Violation(step: step, invariant: .unexpectedError, detail: "device \(device.index): deleting account \(k) failed: \(error)")
        }
        summary.accountsDeleted += 1
        note(device.index, .deleteAccount, "account \(k) deleted; \(report.keptNotes) notes kept as notes of no account")
        oracle.deleted(account: k, id: old.accountID)
        // The deleting device's notes of the account are now its notes of no account.
        for note in try local(device.index, { try device.client.identities() }).notes where note.owner == nil {
            oracle.disowned(NoteKeyValue(clientID: note.clientID, origin: note.origin), on: device.index)
        }
        summary.rekeyed += report.rekeyed.count
        try followRekeys(report.rekeyed, on: device)
        device.lastCursor = nil
        device.knownAccounts.remove(k)  // forgotten with the account
        for other in devices where other.index != device.index {
            if try other.client.account()?.accountID == old.accountID { revoked.insert(other.index) }
        }
        accounts[k] = try await createAccount(k, username: old.username)
        views[k] = AccountView()
    }

    /// Before `device` signs in to account `k`: the notes it holds of `k`'s deleted accounts (same username, other
    /// ID) will lose their owner in that sign-in, becoming notes of no account, which the sign-in carries or not.
    func disownDeletedAccounts(on device: SimDevice, signingInTo k: Int) throws {
        guard let deleted = oracle.deletedAccountIDs[k], !deleted.isEmpty else { return }
        let notes = try local(device.index) { try device.client.identities() }.notes
        for note in notes {
            guard let owner = note.owner, deleted.contains(owner) else { continue }
            oracle.disowned(NoteKeyValue(clientID: note.clientID, origin: note.origin), on: device.index)
        }
    }

    /// Another device of the account (the auditor's session stands in for it) revokes every session of `device`'s
    /// installation just before the device's `request`-th request of a sync; the device must then be signed out
    /// by the server with its notes kept, or learn it at its next network step.
    func revoke(_ device: SimDevice, account k: Int, atRequest request: Int) async throws {
        let origin = device.client.origin
        let token = accounts[k].auditToken
        let transport = server.transport
        let failure = Locked<String?>(nil)
        let revoke: @Sendable () async -> Void = {
            if let problem = await Self.revokeSessions(of: origin, token: token, transport: transport) {
                failure.withLock { $0 = problem }
            }
        }
        summary.revocations += 1
        revoked.insert(device.index)
        note(device.index, .revoke, "revoked by another device before request \(request) of its sync")
        device.transport.arm([])
        device.transport.before(request: request, run: revoke)
        summary.syncs += 1
        do {
            try record(try await device.client.sync(), device: device)
        } catch let error as NotesError where error.code == .signedOutByServer {
            summary.revokedMidSync += 1
            learnedRevocation(device)
        } catch {
            device.transport.disarm()
            throw Violation(step: step, invariant: .unexpectedError, detail: "device \(device.index): sync while revoked failed: \(error)")
        }
        device.transport.disarm()
        if let late = device.transport.takeHook() { await late() }  // after the sync: learned at the next request
        if let problem = failure.withLock({ $0 }) {
            throw Violation(step: step, invariant: .unexpectedError, detail: "device \(device.index): revoking it failed: \(problem)")
        }
    }

    /// What a revoked device does on learning it: it is signed out (the client forgot the session, kept its notes).
    func learnedRevocation(_ device: SimDevice) {
        revoked.remove(device.index)
        device.lastCursor = nil
        note(device.index, .signOut, "signed out by the server (revoked)")
    }

    /// Revokes every session of the installation `origin` through `token`'s account; a problem, or nil.
    static func revokeSessions(of origin: FlakeID, token: String, transport: any SyncTransport) async -> String? {
        do {
            let listed = try await transport.send(WireRequest(.sessions, bearerToken: token))
            guard listed.status == 200 else { return "listing sessions answered \(listed.status)" }
            let sessions = try JSONDecoder().decode(SessionListResponse.self, from: listed.body).sessions
            for session in sessions where session.origin == origin && !session.current {
                let body = try WireJSON.encoder().encode(RevokeSessionRequest(sessionID: session.sessionID))
                let answer = try await transport.send(WireRequest(.revokeSession, bearerToken: token, body: body))
                // 404: a concurrent sign-out of the device revoked it first.
                guard answer.status == 204 || answer.status == 404 else { return "revoking answered \(answer.status)" }
            }
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// The first instant (Unix ms) at which both devices' next client ID, with a scheme other than MiniFlake, is
    /// above every client ID they minted with it: the next millisecond (timestamp), the next second (CDCounter).
    func collisionInstant(after pair: [SimDevice]) throws -> Int64 {
        let mark = try pair.map { try $0.client.status().clientIDHighWaterMark?.rawValue ?? 0 }.max() ?? 0
        switch idScheme {
        case .miniflake, .timestamp: return mark + 1
        case .cdcounter: return (mark / CDCounter<ManualFlakeClock>.idsPerSecond + 1) * 1000
        }
    }

    /// The device's live notes in a stable order, and the one an index names.
    ///
    /// The identities the checks read after the device's last step are still current (only the device's own steps
    /// change its store), so only the chosen note is read.
    func liveNote(_ d: Int, index: Int) throws -> LocalNote? {
        let live = devices[d].liveIDs
        guard !live.isEmpty else { return nil }
        return try devices[d].client.note(live[index % live.count])
    }

    /// The oracle follows the tags `device` put on notes that became new notes of it (``Oracle/rekeyed(from:to:on:holding:)``).
    func followRekeys(_ rekeyed: [RekeyedNote], on device: SimDevice) throws {
        guard !rekeyed.isEmpty else { return }
        let notes = try local(device.index) { try device.client.allNotes(includingSetAside: true) }
        for note in rekeyed {
            let new = NoteKeyValue(clientID: note.clientID, origin: note.origin)
            let tags = Set(notes.filter { $0.key == new }.flatMap(\.tags).map(Tags.key))
            for manifest in notes.filter({ $0.key == new }).flatMap(\.attachments) {
                oracle.attachedTo[manifest.sha256, default: []].insert(new)
            }
            oracle.rekeyed(
                from: NoteKeyValue(clientID: note.oldClientID, origin: note.oldOrigin), to: new, on: device.index, holding: tags)
        }
    }

    /// A live note devices `a` and `b` (signed in to the same account) both hold, the `index`-th of `a`'s synced ones:
    /// `a`'s and `b`'s copies of it; nil when there is none.
    func sharedNote(_ a: Int, _ b: Int, index: Int) throws -> (LocalNote, LocalNote)? {
        guard a != b, let first = devices[safe: a], let second = devices[safe: b],
            let account = try accountIndex(of: first), try accountIndex(of: second) == account
        else { return nil }
        let shared = try first.client.notes().filter { $0.serverID != nil }
        guard !shared.isEmpty else { return nil }
        let mine = shared[index % shared.count]
        guard let serverID = mine.serverID, let theirs = try second.client.note(serverID: serverID), !theirs.isDeleted
        else { return nil }
        return (mine, theirs)
    }

    /// A tag step on a device's note; the oracle learns the tags it adds and those it takes off (issue 31).
    func apply(_ op: TagOp, to target: LocalNote, on device: SimDevice) throws {
        let d = device.index
        switch op {
        case .add(let tag):
            guard target.tags.count < TagRules.maxTagsPerNote else { return }
            let tag = written(tag, owner: owner(of: target, on: device))
            _ = try local(d) { try device.client.tag(target.id, adding: [tag]) }
            oracle.addedTag(TagPair(note: target.key, tag: Tags.key(tag)), by: d)
        case .remove(let index):
            guard !target.tags.isEmpty else { return }
            let tag = target.tags[index % target.tags.count]
            _ = try local(d) { try device.client.tag(target.id, adding: [], removing: [tag]) }
            // Taken off a note with a base (synced), the removal must hold in its account; a note without one (never
            // synced, or of a deleted account) sends its tags with an empty base, so another device's copy keeps the tag.
            let account = target.serverID == nil ? nil : try device.client.account()?.accountID
            oracle.removedTag(TagPair(note: target.key, tag: Tags.key(tag)), by: d, in: account)
        case .pin(let on):
            _ = try local(d) { try device.client.pin(target.id, on) }
        case .archive(let on):
            _ = try local(d) { try device.client.archive(target.id, on) }
        }
        summary.tagChanges += 1
        note(d, .edit, "\(target.clientID.base32): \(op)")
    }

    func apply(_ op: EditOp, to target: LocalNote, on device: SimDevice) throws {
        var lines = Lines.split(target.text)
        let owner = owner(of: target, on: device)
        switch op {
        case .append(let token):
            let token = written(token, owner: owner)
            lines.append(token)
            oracle.added(token: token, by: device.index)
        case .insert(let at, let token):
            let token = written(token, owner: owner)
            lines.insert(token, at: at % (lines.count + 1))
            oracle.added(token: token, by: device.index)
        case .remove(let at):
            guard lines.count > 1 else { return }  // the client refuses empty notes: delete them instead
            oracle.removed(tokens: [lines.remove(at: at % lines.count)])
        case .replace(let at, let token):
            guard !lines.isEmpty else { return }
            let token = written(token, owner: owner)
            let index = at % lines.count
            oracle.removed(tokens: [lines[index]])
            lines[index] = token
            oracle.added(token: token, by: device.index)
        }
        _ = try local(device.index) { try device.client.edit(target.id, text: Lines.join(lines)) }
        note(device.index, .edit, "\(target.clientID.base32): \(op)")
    }

    /// Runs a local command, which must never fail.
    func local<T>(_ d: Int, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw Violation(step: step, invariant: .unexpectedError, detail: "device \(d): a local command failed: \(error)")
        }
    }

    func accountIndex(of device: SimDevice) throws -> Int? {
        guard let account = try device.client.account() else { return nil }
        return accounts.firstIndex { $0.accountID == account.accountID }
    }

    // MARK: - Network operations under faults

    /// Runs a network operation with the step's faults armed. A failure is expected only when a fault was injected.
    func withFaults<T>(
        _ device: SimDevice, _ faults: [FaultPlan], _ what: String, cut: TransferCut? = nil, _ body: () async throws -> T
    ) async throws -> T? {
        device.transport.arm(faults, cut: cut)
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        let (injected, replayMismatch) = device.transport.disarm()
        // A sync a fault cut short may have made conflict copies on the device (committed with a pull page) and
        // pushed them, with no report to say so.
        if accounts.contains(where: \.isEncrypted) { try permitDeviceConflictCopies(on: device) }
        summary.faults += injected.count
        for kind in injected { note(device.index, .fault, "\(what): \(kind.rawValue)") }
        if let replayMismatch { throw fail(.idempotentReplay, "device \(device.index): \(what): \(replayMismatch)") }
        switch outcome {
        case .success(let value):
            return value
        case .failure(let error as NotesError) where error.code == .signedOutByServer && revoked.contains(device.index):
            learnedRevocation(device)
            return nil
        case .failure(let error):
            if let error = error as? NotesError, error.code == .serverUnreachable, !injected.isEmpty {
                summary.failedOperations += 1
                note(device.index, .error, "\(what) failed: \(error.message)")
                return nil
            }
            throw Violation(
                step: step, invariant: .unexpectedError,
                detail: "device \(device.index): \(what) failed\(injected.isEmpty ? " with no fault injected" : ""): \(error)")
        }
    }

    func sync(_ device: SimDevice, faults: [FaultPlan]) async throws {
        summary.syncs += 1
        guard let report = try await withFaults(device, faults, "sync", { try await device.client.sync() }) else { return }
        device.wroteSinceSync = false
        try record(report, device: device)
    }

    func record(_ report: SyncReport, device: SimDevice) throws {
        summary.conflicts += report.conflicts + report.deviceConflicts.count
        summary.merges += report.merged
        summary.reconciled += report.reconciled + report.matched
        summary.replayed += report.replayed
        summary.staleAnswers += report.stale
        summary.deviceMerges += report.deviceMerged
        if !report.deviceConflicts.isEmpty { try permitDeviceConflictCopies(on: device) }
        for note in report.tampered {
            tampered.append("device \(device.index) refused note \(note.clientID)/\(note.origin) as tampered: \(note.reason)")
        }
        if report.conflicts > 0 { note(device.index, .conflict, "\(report.conflicts) conflict copies") }
        if report.merged > 0 { note(device.index, .merge, "\(report.merged) merged") }
        note(device.index, .sync, "pushed \(report.pushed), pulled \(report.pulled)")
        if !report.failures.isEmpty {
            note(device.index, .error, "rejected: \(report.failures.map(\.error.code))")
        }
    }

    func signOut(_ device: SimDevice, faults: [FaultPlan]) async throws {
        summary.signOuts += 1
        let report = try await withFaults(device, faults, "sign-out") { try await device.client.signOut() }
        device.lastCursor = nil
        note(device.index, .signOut, "pending \(report?.pending ?? -1)")
    }

    func signIn(_ device: SimDevice, to index: Int, target: SimAccount, faults: [FaultPlan], carry: Bool) async throws {
        summary.signIns += 1
        // Carrying the notes of no account into a plaintext account puts their words in the clear, as the user asked:
        // when one holds canary words (a deleted encrypted account's note), this sign-in keeps them aside instead.
        let carry = try carry && (target.isEncrypted || !holdsUnownedCanary(device))
        try disownDeletedAccounts(on: device, signingInTo: index)
        let report = try await withFaults(device, faults, "sign-in") {
            try await device.client.signIn(
                server: server.url, username: target.username, password: Self.password, unowned: carry ? .carry : .keepAside)
        }
        device.lastCursor = nil
        note(device.index, .signIn, "\(target.username)\(carry ? " --carry" : "")")
        guard let report else { return }
        revoked.remove(device.index)
        device.knownAccounts.insert(index)
        // Notes of a deleted account that became new notes of this device (their key was taken) are its notes of no
        // account, like the others.
        for note in report.owners.rekeyed {
            oracle.unowned[device.index, default: []].insert(NoteKeyValue(clientID: note.clientID, origin: note.origin))
        }
        summary.rekeyed += report.owners.rekeyed.count
        try followRekeys(report.owners.rekeyed, on: device)
        // Only the notes the device wrote while signed out (never synced) may join the account, and only when asked.
        if carry { oracle.carry(from: device.index, into: index) }
        summary.setAside += report.owners.setAside
        summary.restored += report.owners.restored
        summary.carried += report.owners.carried
        summary.keptAside += report.owners.keptAside
        switch report.sync {
        case .success(let sync): try record(sync, device: device)
        case .failure(let error):
            if error.code == .serverUnreachable && !faults.isEmpty {
                summary.failedOperations += 1
                note(device.index, .error, "sign-in sync failed: \(error.message)")
            } else {
                throw Violation(step: step, invariant: .unexpectedError, detail: "device \(device.index): sign-in sync failed: \(error)")
            }
        }
    }
}
