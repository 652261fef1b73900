import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient

/// The invariants the simulation checks.
public enum Invariant: String, Codable, Sendable, CaseIterable {
    /// No account holds two notes for one (client ID, origin); no device holds two local notes for one server note.
    case noDuplicates = "no-duplicates"
    /// Every note in an account was created there by a device signed in to it, or carried there by a sign-in.
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
}

/// An invariant broken at a step.
public struct Violation: Error, Sendable, Equatable, CustomStringConvertible {
    public var step: Int
    public var invariant: Invariant
    public var detail: String
    public var description: String { "step \(step): \(invariant.rawValue): \(detail)" }
}

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

    public init() {}

    public mutating func add(_ other: SimSummary) {
        steps += other.steps; syncs += other.syncs; signIns += other.signIns; signOuts += other.signOuts
        faults += other.faults; failedOperations += other.failedOperations; notes += other.notes
        conflicts += other.conflicts; repeatedCopies += other.repeatedCopies; merges += other.merges; reconciled += other.reconciled
        replayed += other.replayed; restarts += other.restarts; collisions += other.collisions
        clockJumps += other.clockJumps
    }

    public var fields: [(String, String)] {
        [
            ("steps", "\(steps)"), ("syncs", "\(syncs)"), ("sign-ins", "\(signIns)"), ("sign-outs", "\(signOuts)"),
            ("faults injected", "\(faults)"), ("operations failed by faults", "\(failedOperations)"),
            ("server restarts", "\(restarts)"), ("clock jumps", "\(clockJumps)"), ("forced ID collisions", "\(collisions)"),
            ("notes on the server", "\(notes)"), ("conflict copies", "\(conflicts)"),
            ("conflict copies repeating another copy's text", "\(repeatedCopies)"), ("merges", "\(merges)"),
            ("duplicates avoided by reconciliation", "\(reconciled)"), ("replays answered idempotently", "\(replayed)"),
        ]
    }
}

/// The result of one run.
public struct SimOutcome: Sendable {
    public var summary: SimSummary
    public var violation: Violation?
    public var events: [SimEvent]
}

/// Where the server runs.
public enum SimTarget: Sendable, Equatable {
    /// The server library in this process, over an in-memory store: deterministic, no sockets, no sleeps.
    case inProcess
    /// A running `notesyncd`; `restartCommand` (a shell command) restarts it for `restartServer` steps.
    case http(url: String, restartCommand: String?)
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
    var step = 0
    /// The simulated wall time: every step advances it by one second. Device clocks are this plus their skew.
    var now: Int64 = 1_767_225_600_000  // 2026-01-01T00:00:00Z
    var serverClock: ManualFlakeClock!

    static let password = "simulated-password"

    init(parameters: SimParameters, target: SimTarget, recordEvents: Bool, runTag: String) {
        self.parameters = parameters
        self.target = target
        self.recordEvents = recordEvents
        self.runTag = runTag
    }

    /// Runs a schedule and returns what happened. Never throws for a violation: it is in the outcome.
    public static func run(
        _ steps: [SimAction], parameters: SimParameters, target: SimTarget = .inProcess, recordEvents: Bool = false,
        runTag: String = ""
    ) async throws -> SimOutcome {
        let simulation = Simulation(parameters: parameters, target: target, recordEvents: recordEvents, runTag: runTag)
        try await simulation.setUp()
        var violation: Violation?
        do {
            for (index, action) in steps.enumerated() {
                simulation.step = index
                try await simulation.execute(action)
                try await simulation.checkAfterStep(action)
            }
            simulation.step = steps.count
            try await simulation.quiesceAndCheck()
        } catch let found as Violation {
            violation = found
            simulation.note(nil, .violation, found.description)
        } catch {
            await simulation.server.shutdown()
            throw error
        }
        await simulation.server.shutdown()
        simulation.summary.steps = steps.count
        return SimOutcome(summary: simulation.summary, violation: violation, events: simulation.events)
    }

    // MARK: - Setup

    func setUp() async throws {
        serverClock = ManualFlakeClock(unixMilliseconds: now)
        switch target {
        case .inProcess:
            server = try await InProcessSimServer(clock: serverClock)
        case .http(let url, let restartCommand):
            server = try HTTPSimServer(url: url, restartCommand: restartCommand)
        }
        for k in 0..<max(1, parameters.accounts) {
            let username = runTag.isEmpty ? "sim-a\(k)" : "sim-\(runTag)-a\(k)"
            accounts.append(try await SimAccount.create(username: username, password: Self.password, on: server))
        }
        var seeds = SplitMix64(seed: parameters.seed ^ 0xD1CE_5EED)
        for d in 0..<max(1, parameters.devices) {
            devices.append(try SimDevice(index: d, now: now, server: server, seed: seeds.next()))
        }
        views = Array(repeating: AccountView(), count: accounts.count)
        for device in devices { device.liveIDs = try device.client.identities().notes.filter { !$0.isDeleted }.map(\.id) }
    }

    // MARK: - Steps

    func note(_ device: Int?, _ kind: SimEvent.Kind, _ detail: String) {
        if recordEvents { events.append(SimEvent(step: step, device: device, kind: kind, detail: detail)) }
    }

    func execute(_ action: SimAction) async throws {
        now += 1000
        serverClock.set(unixMilliseconds: now)
        for device in devices { device.clock.set(unixMilliseconds: now + device.skew) }
        switch action {
        case .create(let d, let token):
            guard let device = devices[safe: d] else { return }
            let note = try local(d) { try device.client.add(token + "\n") }
            oracle.added(token: token, by: d)
            if let account = try accountIndex(of: device) { oracle.permit(note.key, in: account) }
            self.note(d, .create, "\(token) \(note.clientID.base32)")

        case .edit(let d, let index, let op):
            guard let device = devices[safe: d], let target = try liveNote(d, index: index) else { return }
            try apply(op, to: target, on: device)

        case .delete(let d, let index):
            guard let device = devices[safe: d], let target = try liveNote(d, index: index) else { return }
            oracle.removed(tokens: Lines.tokens(target.text))
            _ = try local(d) { try device.client.delete(target.id) }
            note(d, .delete, target.clientID.base32)

        case .sync(let d, let faults):
            guard let device = devices[safe: d], try device.client.account() != nil else { return }
            try await sync(device, faults: faults)

        case .signOut(let d, let faults):
            guard let device = devices[safe: d], try device.client.account() != nil else { return }
            try await signOut(device, faults: faults)

        case .signIn(let d, let account, let faults):
            guard let device = devices[safe: d], let target = accounts[safe: account] else { return }
            if let current = try accountIndex(of: device), current == account {
                try await sync(device, faults: faults)
                return
            }
            if try device.client.account() != nil { try await signOut(device, faults: []) }
            try await signIn(device, to: account, target: target, faults: faults)

        case .clockJump(let d, let milliseconds):
            guard let device = devices[safe: d] else { return }
            device.skew += milliseconds
            device.clock.set(unixMilliseconds: now + device.skew)
            summary.clockJumps += 1
            note(d, .clockJump, "\(milliseconds > 0 ? "+" : "")\(milliseconds / 1000) s")

        case .concurrentEdit(let a, let b, let index, let firstOp, let secondOp):
            guard a != b, let first = devices[safe: a], let second = devices[safe: b],
                let account = try accountIndex(of: first), try accountIndex(of: second) == account
            else { return }
            let shared = try first.client.notes().filter { $0.serverID != nil }
            guard !shared.isEmpty else { return }
            let mine = shared[index % shared.count]
            guard let serverID = mine.serverID, let theirs = try second.client.note(serverID: serverID), !theirs.isDeleted
            else { return }
            try apply(firstOp, to: mine, on: first)
            try apply(secondOp, to: theirs, on: second)

        case .collide(let a, let b, let firstToken, let secondToken):
            guard a != b, let first = devices[safe: a], let second = devices[safe: b] else { return }
            // Both devices share one flake instance (see SimDevice); set both clocks to one fresh millisecond past
            // either generator's high-water mark, so both mint the same client ID.
            let marks = try [first, second].map { try $0.client.status().highWaterMark?.unixMilliseconds ?? 0 }
            let instant = max(marks.max() ?? 0, first.clock.unixMilliseconds(), second.clock.unixMilliseconds()) + 1000
            for device in [first, second] {
                device.skew = instant - now
                device.clock.set(unixMilliseconds: instant)
            }
            let one = try local(a) { try first.client.add(firstToken + "\n") }
            let two = try local(b) { try second.client.add(secondToken + "\n") }
            oracle.added(token: firstToken, by: a)
            oracle.added(token: secondToken, by: b)
            if let account = try accountIndex(of: first) { oracle.permit(one.key, in: account) }
            if let account = try accountIndex(of: second) { oracle.permit(two.key, in: account) }
            if one.clientID == two.clientID { summary.collisions += 1 }
            note(a, .collide, "\(firstToken) \(one.clientID.base32)")
            note(b, .collide, "\(secondToken) \(two.clientID.base32)")

        case .restartServer:
            try await server.restart()
            summary.restarts += 1
            note(nil, .restart, "server restarted")
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

    func apply(_ op: EditOp, to target: LocalNote, on device: SimDevice) throws {
        var lines = Lines.split(target.text)
        switch op {
        case .append(let token):
            lines.append(token)
            oracle.added(token: token, by: device.index)
        case .insert(let at, let token):
            lines.insert(token, at: at % (lines.count + 1))
            oracle.added(token: token, by: device.index)
        case .remove(let at):
            guard lines.count > 1 else { return }  // the client refuses empty notes: delete them instead
            oracle.removed(tokens: [lines.remove(at: at % lines.count)])
        case .replace(let at, let token):
            guard !lines.isEmpty else { return }
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
    func withFaults<T>(_ device: SimDevice, _ faults: [FaultPlan], _ what: String, _ body: () async throws -> T) async throws -> T? {
        device.transport.arm(faults)
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        let (injected, replayMismatch) = device.transport.disarm()
        summary.faults += injected.count
        for kind in injected { note(device.index, .fault, "\(what): \(kind.rawValue)") }
        if let replayMismatch { throw fail(.idempotentReplay, "device \(device.index): \(what): \(replayMismatch)") }
        switch outcome {
        case .success(let value):
            return value
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
        record(report, device: device)
    }

    func record(_ report: SyncReport, device: SimDevice) {
        summary.conflicts += report.conflicts
        summary.merges += report.merged
        summary.reconciled += report.reconciled + report.matched
        summary.replayed += report.replayed
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

    func signIn(_ device: SimDevice, to index: Int, target: SimAccount, faults: [FaultPlan]) async throws {
        summary.signIns += 1
        // Everything this device holds may now be carried into the account.
        for note in try device.client.identities().notes { oracle.permit(NoteKeyValue(clientID: note.clientID, origin: note.origin), in: index) }
        let report = try await withFaults(device, faults, "sign-in") {
            try await device.client.signIn(server: server.url, username: target.username, password: Self.password)
        }
        device.lastCursor = nil
        note(device.index, .signIn, target.username)
        guard let report else { return }
        switch report.sync {
        case .success(let sync): record(sync, device: device)
        case .failure(let error):
            if error.code == .serverUnreachable && !faults.isEmpty {
                summary.failedOperations += 1
                note(device.index, .error, "sign-in sync failed: \(error.message)")
            } else {
                throw Violation(step: step, invariant: .unexpectedError, detail: "device \(device.index): sign-in sync failed: \(error)")
            }
        }
    }

    // MARK: - Invariants

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
        let (records, cursor) = try await server.changes(accountID: account.accountID, token: account.auditToken, after: views[k].cursor)
        views[k].cursor = cursor
        if !records.isEmpty { try checkServer(account: k, changed: records) }
        return records
    }

    /// Reads account `k` whole, after pulling what changed since the last read: both must agree. Then checks every
    /// note of the account as if first seen.
    func rereadAndCompare(account k: Int) async throws {
        _ = try await readChanges(account: k)
        let account = accounts[k]
        let (all, cursor) = try await server.changes(accountID: account.accountID, token: account.auditToken, after: .start)
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
                throw fail(.noCrossAccount, "account \(k) holds note \(note.clientID)/\(note.origin) that no device signed in to it created or carried")
            }
            if !note.deleted { oracle.seen(tokens: Lines.tokens(note.text), in: k) }
        }
    }

    /// Reads a device's note identities, account and cursor, and checks them all.
    func checkDevice(_ device: SimDevice) throws {
        let snapshot = try local(device.index) { try device.client.identities() }
        device.liveIDs = snapshot.notes.filter { !$0.isDeleted }.map(\.id)
        device.account = snapshot.account.flatMap { info in accounts.firstIndex { $0.accountID == info.accountID } }
        var serverIDs: [FlakeID: NoteKeyValue] = [:]
        var keys = Set<NoteKeyValue>()
        for note in snapshot.notes {
            let key = NoteKeyValue(clientID: note.clientID, origin: note.origin)
            guard keys.insert(key).inserted else {
                throw fail(.noDuplicates, "device \(device.index) holds two local notes for client ID \(note.clientID) origin \(note.origin)")
            }
            if let serverID = note.serverID {
                guard serverIDs.updateValue(key, forKey: serverID) == nil else {
                    throw fail(.noDuplicates, "device \(device.index) holds two local notes for server note \(serverID)")
                }
            }
        }
        device.serverKeys = serverIDs
        guard let account = device.account else { return }
        let view = views[account]
        for note in snapshot.notes {
            guard let serverID = note.serverID else { continue }
            let key = NoteKeyValue(clientID: note.clientID, origin: note.origin)
            guard let stored = view.byServerID[serverID] else {
                throw fail(.noCrossAccount, "device \(device.index), signed in to account \(account), holds server ID \(serverID), which is not a note of that account")
            }
            guard stored.key == key else {
                throw fail(.serverIDStable, "device \(device.index): server ID \(serverID) is note \(stored.clientID)/\(stored.origin) on the server but \(key.clientID)/\(key.origin) locally")
            }
        }
        // Cursors only move forward within one sign-in.
        if let text = snapshot.cursor, let cursor = SyncCursor(text: text) {
            if let last = device.lastCursor, last.account == account, cursor < last.cursor {
                throw fail(.cursorMonotonic, "device \(device.index): cursor moved back from \(last.cursor) to \(cursor)")
            }
            device.lastCursor = (account, cursor)
        }
    }

    /// A device the step did not act on: its store is as the checks last read it, so only the account's changed
    /// notes can break what held (a server note that now names another note than the device's).
    func checkUnchangedDevice(_ device: SimDevice, account: Int, against changed: [NoteRecord]) throws {
        for stored in changed {
            guard let key = device.serverKeys[stored.serverID], key != stored.key else { continue }
            throw fail(.serverIDStable, "device \(device.index): server ID \(stored.serverID) is note \(stored.clientID)/\(stored.origin) on the server but \(key.clientID)/\(key.origin) locally")
        }
    }

    /// Every signed-in device syncs twice with no faults; then convergence and lost edits are checked.
    func quiesceAndCheck() async throws {
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
        for notes in finalTexts.values {
            // Not an invariant: a measure of conflict copies that repeat one another (see Docs/PERFORMANCE.md).
            var copies = Set<String>()
            for note in notes where !note.deleted {
                guard let original = note.conflictOf else { continue }
                if !copies.insert("\(original)\u{0}\(note.text)").inserted { summary.repeatedCopies += 1 }
            }
        }
        // Convergence.
        for device in devices {
            guard let account = try accountIndex(of: device), let serverNotes = finalTexts[account] else { continue }
            let expected = Dictionary(
                serverNotes.filter { !$0.deleted }.map { (NoteKeyValue(clientID: $0.clientID, origin: $0.origin), $0.text) },
                uniquingKeysWith: { a, _ in a })
            let local = try device.client.notes()
            let actual = Dictionary(local.map { ($0.key, $0.text) }, uniquingKeysWith: { a, _ in a })
            if actual != expected {
                let missing = expected.keys.filter { actual[$0] == nil }.count
                let extra = actual.keys.filter { expected[$0] == nil }.count
                let differ = expected.keys.filter { actual[$0] != nil && actual[$0] != expected[$0] }.count
                throw fail(.convergence, "device \(device.index) differs from account \(account): \(missing) missing, \(extra) extra, \(differ) with other text")
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
            var present = Set(try device.client.notes().flatMap { Lines.tokens($0.text) })
            if let account = try accountIndex(of: device) {
                present.formUnion((finalTexts[account] ?? []).filter { !$0.deleted }.flatMap { Lines.tokens($0.text) })
            }
            for (token, author) in oracle.author where author == device.index && !present.contains(token) && !oracle.legitimatelyRemoved.contains(token) {
                throw fail(.noLostEdit, "device \(device.index) lost its own edit \(token); nobody who saw it removed it")
            }
        }
    }
}

/// An account of the simulation, with an auditor session used only to read the server's view.
struct SimAccount {
    var username: String
    var accountID: FlakeID
    var auditToken: String

    static func create(username: String, password: String, on server: any SimServer) async throws -> SimAccount {
        let encoder = WireJSON.encoder()
        let signUp = try await server.transport.send(
            WireRequest(.signUp, body: try encoder.encode(SignUpRequest(username: username, password: password))))
        guard signUp.status == 201 || signUp.status == 409 else {
            throw SimSetupError("sign-up of \(username) answered \(signUp.status): \(String(decoding: signUp.body, as: UTF8.self))")
        }
        let signIn = try await server.transport.send(
            WireRequest(.signIn, body: try encoder.encode(SignInRequest(username: username, password: password, deviceName: "notes-sim auditor"))))
        guard signIn.status == 200 else {
            throw SimSetupError("auditor sign-in of \(username) answered \(signIn.status)")
        }
        let session = try JSONDecoder().decode(SignInResponse.self, from: signIn.body)
        return SimAccount(username: username, accountID: session.accountID, auditToken: session.token)
    }
}

/// One simulated device: a real client library instance with its own in-memory store, clock and faulty link.
final class SimDevice {
    let index: Int
    let clock: ManualFlakeClock
    let transport: FaultyTransport
    let client: NotesClient
    /// This device's clock offset from the simulated wall time, changed by clock jumps.
    var skew: Int64 = 0
    var lastCursor: (account: Int, cursor: SyncCursor)?
    /// The local IDs of its live notes, ascending, as the checks read them after the device's last step (its store
    /// changes only in its own steps).
    var liveIDs: [Int64] = []
    /// The account index the device was signed in to at that read.
    var account: Int?
    /// Its notes' keys by server ID at that read.
    var serverKeys: [FlakeID: NoteKeyValue] = [:]

    init(index: Int, now: Int64, server: any SimServer, seed: UInt64) throws {
        self.index = index
        clock = ManualFlakeClock(unixMilliseconds: now)
        transport = FaultyTransport(base: server.transport(forDevice: index))
        let environment = NotesEnvironment(
            clock: clock, random: SplitMix64(seed: seed), transport: NotesEnvironment.fixed(transport),
            sleep: { _ in }, retry: RetryPolicy(maxAttempts: 3, initialDelay: .zero, maxDelay: .zero),
            deviceName: "sim-device-\(index)", flakeInstance: 7)
        client = try NotesClient.inMemory(environment: environment)
    }
}

/// The simulation's own record of what happened, against which the server and devices are checked.
struct Oracle {
    /// Per account: the notes devices created while signed in to it or carried into it by a sign-in.
    var permitted: [Int: Set<NoteKeyValue>] = [:]
    /// Per account: the server ID each note got, which must never change.
    var serverIDs: [Int: [NoteKeyValue: FlakeID]] = [:]
    /// The device that wrote each token.
    var author: [String: Int] = [:]
    /// Tokens removed by a device that saw them (a line edit or a delete): they may vanish.
    var legitimatelyRemoved: Set<String> = []
    /// Per account: every token the server was ever seen holding.
    var seenOnServer: [Int: Set<String>] = [:]

    mutating func permit(_ key: NoteKeyValue, in account: Int) { permitted[account, default: []].insert(key) }
    mutating func added(token: String, by device: Int) { author[token] = device }
    mutating func removed(tokens: [String]) { legitimatelyRemoved.formUnion(tokens) }
    mutating func seen(tokens: [String], in account: Int) { seenOnServer[account, default: []].formUnion(tokens) }
}

/// A note's identity in an account.
struct NoteKeyValue: Hashable {
    var clientID: FlakeID
    var origin: FlakeID
}

/// An account's notes as the checks have pulled them, change by change.
struct AccountView {
    /// Where the next read continues.
    var cursor = SyncCursor.start
    /// Every note pulled so far, at its latest pulled version.
    var byServerID: [FlakeID: NoteRecord] = [:]
    /// The server ID holding each key in `byServerID`.
    var serverIDByKey: [NoteKeyValue: FlakeID] = [:]
}

extension NoteRecord {
    var key: NoteKeyValue { NoteKeyValue(clientID: clientID, origin: origin) }
}



extension LocalNote {
    var key: NoteKeyValue { NoteKeyValue(clientID: clientID, origin: origin) }
}

/// Simulated note texts: one unique token per line, each line ending in a newline.
enum Lines {
    static func split(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }
    static func join(_ lines: [String]) -> String { lines.map { $0 + "\n" }.joined() }
    static func tokens(_ text: String) -> [String] { split(text) }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}

