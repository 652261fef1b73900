import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient

/// What happened to a note at one point on one lane (a device or the server). A touch may carry several.
public struct TouchKinds: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Device: a local command wrote it (`notes add`, a forced collision).
    public static let created = TouchKinds(rawValue: 1 << 0)
    /// Device: a local command changed its text.
    public static let edited = TouchKinds(rawValue: 1 << 1)
    /// Deleted: by a local command, a pulled tombstone, or (server) a pushed delete.
    public static let deleted = TouchKinds(rawValue: 1 << 2)
    /// Device: its change was pushed and accepted (created, updated or unchanged on the server).
    public static let pushed = TouchKinds(rawValue: 1 << 3)
    /// Device: pushed without a server ID, the server found it by (client ID, origin): no duplicate.
    public static let reconciled = TouchKinds(rawValue: 1 << 4)
    /// Device: pushed over another device's edit, merged line by line.
    public static let merged = TouchKinds(rawValue: 1 << 5)
    /// Device: pushed over an overlapping edit: the note kept the server's text, the pushed text became a conflict copy.
    public static let conflicted = TouchKinds(rawValue: 1 << 6)
    /// A conflict copy, new on this lane.
    public static let conflictCopy = TouchKinds(rawValue: 1 << 7)
    /// Device: a pull brought it or changed it.
    public static let pulled = TouchKinds(rawValue: 1 << 8)
    /// Device: a sign-in to another account set it aside (kept, hidden).
    public static let setAside = TouchKinds(rawValue: 1 << 9)
    /// Device: its account signed in again and it is on show again.
    public static let restored = TouchKinds(rawValue: 1 << 10)
    /// Device: written while signed out, it joined the account signing in (`--carry`).
    public static let carried = TouchKinds(rawValue: 1 << 11)
    /// Device: its account was deleted; it is now a note of no account.
    public static let disowned = TouchKinds(rawValue: 1 << 12)
    /// Gone from the lane (wiped from a device; on the server, deleted with its account).
    public static let removed = TouchKinds(rawValue: 1 << 13)
    /// Device: the push was a replay the server had already applied (an earlier answer was lost).
    public static let replayed = TouchKinds(rawValue: 1 << 14)
    /// Device: its delete was refused because another device edited it meanwhile; it came back.
    public static let kept = TouchKinds(rawValue: 1 << 15)
    /// Device: the server refused its change.
    public static let rejected = TouchKinds(rawValue: 1 << 16)
    /// Server: a new note in the account.
    public static let stored = TouchKinds(rawValue: 1 << 17)
    /// Server: a new version of the note.
    public static let changed = TouchKinds(rawValue: 1 << 18)
    /// Device: it joined the device as a copy into another account (`notes copy`).
    public static let copied = TouchKinds(rawValue: 1 << 19)

    /// Each kind's name, in bit order (what the report's page shows).
    public static let names = [
        "created", "edited", "deleted", "pushed", "reconciled", "merged", "conflict (pushed text became a copy)",
        "conflict copy", "pulled", "set aside", "restored", "carried", "disowned (account deleted)", "removed",
        "replayed", "kept (delete refused)", "rejected", "stored", "changed", "copied",
    ]
}

/// A note's state on a lane after a touch, as bits.
public enum TouchState {
    public static let deleted = 1
    public static let setAside = 2
    /// Device: changes the server has not acknowledged.
    public static let pending = 4
    public static let conflictCopy = 8
    /// Not on the lane any more.
    public static let gone = 16
}

/// A run as its report shows it: recorded as the run goes (only with `--report`; see ``RunRecorder``).
public struct RunRecording: Sendable {
    /// A note as the report names it.
    public struct Note: Sendable, Equatable {
        /// The first line of its first text seen (the token it was created with), made unique.
        public var label: String
        /// The device whose installation created it (-1: not a device of the run).
        public var originDevice: Int
        public var clientID: FlakeID
        public var origin: FlakeID
        /// For a conflict copy: the note it was split from (-1: none or unknown).
        public var conflictOf: Int
    }

    /// One note on one lane at one step: what happened (``TouchKinds``) and its state after.
    public struct Touch: Sendable, Equatable {
        public var step: Int
        /// A device, or -1 for the server.
        public var lane: Int
        public var note: Int
        public var kinds: TouchKinds
        /// Index into ``RunRecording/texts``.
        public var text: Int
        /// ``TouchState`` bits.
        public var state: Int
        /// The account the note belongs to there (device: its owner; server: the account holding it), -1 for none.
        public var account: Int
    }

    /// The requests one device exchanged with the server in one step.
    public struct Exchange: Sendable, Equatable {
        public var step: Int
        public var device: Int
        public var pushRequests: Int
        /// Changes accepted (every status but `rejected`).
        public var pushed: Int
        public var pullPages: Int
        public var pulled: Int
        /// The account the device was signed in to for them (-1: none).
        public var account: Int
    }

    /// From `step` on, `device` is signed in to `account` (-1: signed out) of that generation (0 for the account the
    /// run signed up first; each deletion signs the username up again as the next generation).
    public struct AccountChange: Sendable, Equatable {
        public var device: Int
        public var step: Int
        public var account: Int
        public var generation: Int
    }

    public var notes: [Note] = []
    public var texts: [String] = []
    public var touches: [Touch] = []
    public var exchanges: [Exchange] = []
    public var accountChanges: [AccountChange] = []
    /// Per step (index: step; the last one is quiescence): live notes on the server, every account.
    public var serverNotes: [Int] = []
    /// Per step: conflict copies so far.
    public var conflicts: [Int] = []
    /// Per step: faults injected so far.
    public var faults: [Int] = []
    /// Per device, per step: notes with changes waiting to be pushed (on show).
    public var pending: [[Int]] = []
    /// The step the recording ends at (the violation's, or quiescence).
    public var lastStep = 0
    /// The note each server ID is.
    public var noteByServerID: [FlakeID: Int] = [:]
}

/// Records a run for its report, reading only what does not change the run: each device's store after the steps
/// that acted on it (the other devices' stores did not change), what each device's transport exchanged, and the
/// server notes the invariant checks read anyway. A run that records is the same run as one that does not; a run
/// that does not has no recorder, and each hook in ``Simulation`` is one nil check.
final class RunRecorder {
    private(set) var recording = RunRecording()
    private var noteIndex: [NoteKeyValue: Int] = [:]
    private var textIndex: [String: Int] = [:]
    private var labels: Set<String> = []
    /// Per device: its notes by local ID as last read.
    private var deviceNotes: [[Int64: DeviceNote]]
    /// Per device: the account (index, generation) it was signed in to at the last read.
    private var deviceAccounts: [(account: Int, generation: Int)]
    /// Per device: its installation's origin.
    private var origins: [FlakeID: Int] = [:]
    /// Per account index: the account's ID as last read, and its notes by server ID.
    private var serverAccountIDs: [Int: FlakeID] = [:]
    private var serverNotes: [Int: [FlakeID: ServerNote]] = [:]
    /// Every account ID seen, with its index and generation.
    private var accountIDs: [FlakeID: (index: Int, generation: Int)] = [:]
    private var generations: [Int: Int] = [:]
    /// The note each server ID is (a second server note of one key in one account is a note of its own: a duplicate).
    private var noteByServerID: [FlakeID: Int] = [:]
    private var liveOnServer = 0

    struct DeviceNote: Equatable {
        var key: NoteKeyValue
        var note: Int
        var text: String
        var deleted: Bool
        var aside: Bool
        var pending: Bool
        var conflict: Bool
        var owner: FlakeID?
    }

    struct ServerNote: Equatable {
        var note: Int
        var version: Int64
        var deleted: Bool
    }

    init(devices: Int) {
        deviceNotes = Array(repeating: [:], count: devices)
        deviceAccounts = Array(repeating: (-1, 0), count: devices)
        recording.pending = Array(repeating: [], count: devices)
        for d in 0..<devices { recording.accountChanges.append(.init(device: d, step: 0, account: -1, generation: 0)) }
    }

    /// The run's accounts as they are now (after set-up and after each deletion).
    func learn(accounts: [SimAccount]) {
        for (k, account) in accounts.enumerated() where accountIDs[account.accountID] == nil {
            let generation = generations[k].map { $0 + 1 } ?? 0
            generations[k] = generation
            accountIDs[account.accountID] = (k, generation)
        }
    }

    func learn(origin: FlakeID, of device: Int) { origins[origin] = device }

    // MARK: - Notes and texts

    private func text(_ text: String) -> Int {
        if let index = textIndex[text] { return index }
        textIndex[text] = recording.texts.count
        recording.texts.append(text)
        return recording.texts.count - 1
    }

    private func note(_ key: NoteKeyValue, firstText: String) -> Int {
        if let index = noteIndex[key] { return index }
        let index = newNote(key, firstText: firstText)
        noteIndex[key] = index
        return index
    }

    private func newNote(_ key: NoteKeyValue, firstText: String, suffix: String = "") -> Int {
        // Named by the schedule's token even when written as a canary word (`t12`, not `qzcanaryxvt12`).
        let first = Lines.split(firstText).first.map(Canary.unmarked) ?? key.clientID.base32
        var label = first + suffix
        var n = 2
        while labels.contains(label) {
            label = "\(first)\(suffix) (\(n))"
            n += 1
        }
        labels.insert(label)
        recording.notes.append(
            .init(label: label, originDevice: origins[key.origin] ?? -1, clientID: key.clientID, origin: key.origin, conflictOf: -1))
        return recording.notes.count - 1
    }

    private func accountIndex(_ id: FlakeID?) -> Int { id.flatMap { accountIDs[$0]?.index } ?? -1 }

    // MARK: - Devices

    /// Reads `device`'s store and what its transport exchanged at `step`, and records every note that changed.
    /// `local`: the step ran local commands on it (else what changed came from the network or a sign-in).
    func capture(_ device: SimDevice, step: Int, local: Bool, copy: Bool) {
        let d = device.index
        let exchanged = device.transport.takeExchanges()
        guard let identities = try? device.client.identities(), let notes = try? device.client.allNotes(includingSetAside: true)
        else { return }
        let account: (account: Int, generation: Int) = identities.account.map { accountIDs[$0.accountID] ?? (-1, 0) } ?? (-1, 0)
        var pushes: [NoteKeyValue: ChangeResult] = [:]
        var pulled: Set<NoteKeyValue> = []
        var exchange = RunRecording.Exchange(
            step: step, device: d, pushRequests: 0, pushed: 0, pullPages: 0, pulled: 0, account: account.account)
        for (request, response) in exchanged where response.status == 200 {
            if request.method == Endpoint.push.method, request.path == Endpoint.push.path, let body = request.body,
                let sent = try? JSONDecoder().decode(PushRequest.self, from: body),
                let answer = try? JSONDecoder().decode(PushResponse.self, from: response.body)
            {
                exchange.pushRequests += 1
                for (change, result) in zip(sent.changes, answer.results) {
                    pushes[NoteKeyValue(clientID: change.clientID, origin: change.origin)] = result
                    if result.status != .rejected { exchange.pushed += 1 }
                }
            } else if request.method == Endpoint.pull.method, request.path == Endpoint.pull.path,
                let page = try? JSONDecoder().decode(PullResponse.self, from: response.body)
            {
                exchange.pullPages += 1
                exchange.pulled += page.changes.count
                for record in page.changes { pulled.insert(record.key) }
            }
        }
        if exchange.pushRequests + exchange.pullPages > 0 { recording.exchanges.append(exchange) }

        let owners = Dictionary(identities.notes.map { ($0.id, ($0.owner, $0.isSetAside)) }, uniquingKeysWith: { a, _ in a })
        var now: [Int64: DeviceNote] = [:]
        now.reserveCapacity(notes.count)
        let before = deviceNotes[d]
        var pendingCount = 0
        for stored in notes {
            let key = stored.key
            let old = before[stored.id].flatMap { $0.key == key ? $0 : nil }  // a rekeyed note is another note
            let index = old?.note ?? note(key, firstText: stored.text)
            let (owner, aside) = owners[stored.id] ?? (nil, false)
            let state = DeviceNote(
                key: key, note: index, text: stored.text, deleted: stored.isDeleted, aside: aside, pending: stored.isDirty,
                conflict: stored.isConflict, owner: owner)
            now[stored.id] = state
            if state.pending && !aside { pendingCount += 1 }
            let result = pushes[key]
            guard old != state || result != nil else { continue }
            var kinds = TouchKinds()
            if let result { kinds.formUnion(Self.kinds(of: result)) }
            if let old {
                if old.text != state.text && !state.deleted {
                    // Not local: from a pull, unless the push's answer carried it (a merge, a conflict, a kept note).
                    if local {
                        kinds.insert(.edited)
                    } else if kinds.isDisjoint(with: [.merged, .conflicted, .kept]) {
                        kinds.insert(.pulled)
                    }
                }
                if !old.deleted && state.deleted { kinds.insert(!local && pulled.contains(key) ? [.deleted, .pulled] : .deleted) }
                if !old.aside && aside { kinds.insert(.setAside) }
                if old.aside && !aside { kinds.insert(.restored) }
                if old.owner == nil, owner != nil { kinds.insert(.carried) }
                if old.owner != nil, owner == nil { kinds.insert(.disowned) }
            } else {
                kinds.insert(local ? (copy ? .copied : .created) : (pulled.contains(key) ? .pulled : .created))
                if state.conflict { kinds.insert(.conflictCopy) }
            }
            touch(step: step, lane: d, note: index, kinds: kinds, text: state.text, state: state, account: accountIndex(owner))
        }
        for (id, old) in before where now[id]?.key != old.key {
            recording.touches.append(
                .init(step: step, lane: d, note: old.note, kinds: .removed, text: text(""), state: TouchState.gone, account: accountIndex(old.owner)))
        }
        deviceNotes[d] = now
        sample(&recording.pending[d], pendingCount, at: step)
        if account != deviceAccounts[d] {
            deviceAccounts[d] = account
            recording.accountChanges.append(.init(device: d, step: step, account: account.account, generation: account.generation))
        }
    }

    private func touch(step: Int, lane: Int, note: Int, kinds: TouchKinds, text content: String, state: DeviceNote, account: Int) {
        var bits = 0
        if state.deleted { bits |= TouchState.deleted }
        if state.aside { bits |= TouchState.setAside }
        if state.pending { bits |= TouchState.pending }
        if state.conflict { bits |= TouchState.conflictCopy }
        recording.touches.append(
            .init(step: step, lane: lane, note: note, kinds: kinds, text: text(content), state: bits, account: account))
    }

    static func kinds(of result: ChangeResult) -> TouchKinds {
        var kinds: TouchKinds = result.replayed ? [.pushed, .replayed] : .pushed
        switch result.status {
        case .created, .updated, .unchanged: break
        case .reconciled: kinds.insert(.reconciled)
        case .merged: kinds.insert(.merged)
        case .conflict: kinds.insert(.conflicted)
        case .deleted: kinds.insert(.deleted)
        case .kept: kinds.insert(.kept)
        case .rejected, .stale: kinds = .rejected
        }
        return kinds
    }

    // MARK: - Server

    /// The server notes of account `k` the checks read at `step` (changed ones, or the whole account).
    func serverRead(account k: Int, accountID: FlakeID, records: [NoteRecord], step: Int) {
        if let previous = serverAccountIDs[k], previous != accountID {
            // The account was deleted (and signed up again): its notes went with it.
            for (_, old) in serverNotes[k] ?? [:] where !old.deleted {
                liveOnServer -= 1
                recording.touches.append(
                    .init(step: step, lane: -1, note: old.note, kinds: .removed, text: text(""), state: TouchState.gone, account: k))
            }
            serverNotes[k] = [:]
        }
        serverAccountIDs[k] = accountID
        for record in records {
            let old = serverNotes[k]?[record.serverID]
            if let old, old.version == record.version, old.deleted == record.deleted { continue }
            let index: Int
            if let old {
                index = old.note
            } else if let known = noteByServerID[record.serverID] {
                index = known
            } else {
                let key = record.key
                let taken = serverNotes[k]?.values.contains { $0.note == noteIndex[key] && !$0.deleted } ?? false
                index = taken ? newNote(key, firstText: record.text, suffix: " duplicate") : note(key, firstText: record.text)
                noteByServerID[record.serverID] = index
                if let original = record.conflictOf.flatMap({ noteByServerID[$0] }), recording.notes[index].conflictOf < 0 {
                    recording.notes[index].conflictOf = original
                }
            }
            var kinds: TouchKinds = old == nil ? .stored : .changed
            if record.conflictOf != nil && old == nil { kinds.insert(.conflictCopy) }
            if record.deleted && old?.deleted != true { kinds.insert(.deleted) }
            if (old == nil || old!.deleted) && !record.deleted { liveOnServer += 1 }
            if let old, !old.deleted, record.deleted { liveOnServer -= 1 }
            serverNotes[k, default: [:]][record.serverID] = ServerNote(note: index, version: record.version, deleted: record.deleted)
            var bits = record.deleted ? TouchState.deleted : 0
            if record.conflictOf != nil { bits |= TouchState.conflictCopy }
            recording.touches.append(.init(step: step, lane: -1, note: index, kinds: kinds, text: text(record.text), state: bits, account: k))
        }
    }

    // MARK: - Series

    /// The run's counters after `step`.
    func sample(step: Int, summary: SimSummary) {
        sample(&recording.serverNotes, liveOnServer, at: step)
        sample(&recording.conflicts, summary.conflicts, at: step)
        sample(&recording.faults, summary.faults, at: step)
        recording.lastStep = max(recording.lastStep, step)
    }

    /// Sets `series[step]`, carrying the last value over the steps in between.
    private func sample(_ series: inout [Int], _ value: Int, at step: Int) {
        while series.count < step { series.append(series.last ?? 0) }
        if series.count == step { series.append(value) } else { series[step] = value }
    }

    /// The recording, with every series carried to its last step.
    func finish() -> RunRecording {
        var result = recording
        result.noteByServerID = noteByServerID
        let count = result.lastStep + 1
        func pad(_ series: inout [Int]) { while series.count < count { series.append(series.last ?? 0) } }
        pad(&result.serverNotes)
        pad(&result.conflicts)
        pad(&result.faults)
        for d in result.pending.indices { pad(&result.pending[d]) }
        return result
    }
}

extension Simulation {
    /// After a step and its checks: what it changed on the devices it acted on (nothing unless recording).
    func recordStep(_ action: SimAction) {
        guard let recorder else { return }
        recorder.learn(accounts: accounts)
        var copy = false
        if case .copy = action { copy = true }
        for d in Set(action.devicesWhoseStoresChange).sorted() {
            guard let device = devices[safe: d] else { continue }
            recorder.capture(device, step: step, local: action.writesLocally, copy: copy)
        }
        recorder.sample(step: step, summary: summary)
    }

    /// At quiescence or a violation: every device, and every account read whole (a violation may have stopped the
    /// checks before they read it).
    func recordEverything() async {
        guard let recorder else { return }
        recorder.learn(accounts: accounts)
        for device in devices { recorder.capture(device, step: step, local: false, copy: false) }
        for (k, account) in accounts.enumerated() {
            if let (records, _) = try? await server.changes(accountID: account.accountID, token: account.auditToken, after: .start) {
                recorder.serverRead(account: k, accountID: account.accountID, records: records, step: step)
            }
        }
        recorder.sample(step: step, summary: summary)
    }
}
