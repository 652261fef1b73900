import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient

/// A watching device's waiting pull (`GET /v1/notes/changes?wait=`), held open between its watch iterations.
///
/// It goes through the server's own transport, not the device's ``FaultyTransport``: it is sent between steps, and
/// the device's transport numbers a step's requests for its faults. It carries the account's auditor token (the feed
/// is per account, so it wakes alike); the sync it leads to is the device's own.
struct HeldPull {
    var accountID: FlakeID
    /// The device's cursor when the pull was sent: the pull must answer once the account has changes after it.
    var since: SyncCursor
    var task: Task<WireResponse, any Error>
}

extension Simulation {
    /// How long a waiting pull asks the server to hold (clamped by the server's `live.maxWaitSeconds`).
    static let watchWaitSeconds = 25
    /// How long an answer that must come may take before the feed counts as having missed the change (in process
    /// 5 s, over HTTP 10 s). Only a broken feed ever waits this long: a correct one answers as soon as the commit is
    /// durable, so this is not a timing assumption of a passing run, only the bound on how long a failing one waits.
    var watchAnswerLimit: Duration { target == .inProcess ? .seconds(5) : .seconds(10) }

    /// One iteration of `device`'s watch loop (``SimAction/watchWake(device:fault:)``). Deterministic per seed:
    /// whether the held pull must have answered is decided from the account's changes as the checks read them,
    /// never from timing, and a pull whose account did not move stays held.
    func watchIteration(_ device: SimDevice, fault: FeedFault?) async throws {
        summary.watchWakes += 1
        guard let k = try accountIndex(of: device), !revoked.contains(device.index) else {
            // Signed out (or revoked and not yet told): the watch has ended; it is started again after a sign-in.
            device.held?.task.cancel()
            device.held = nil
            return
        }
        let accountID = accounts[k].accountID
        if let held = device.held, held.accountID != accountID {
            held.task.cancel()
            device.held = nil
        }
        // A device that wrote notes of its own since it last synced syncs for them (the watch's local-store trigger:
        // a `notes` command committed), feed or not.
        let pending = device.wroteSinceSync
        guard var held = device.held else {
            // The watch starts (or restarts after a fault): it syncs, then holds a waiting pull.
            note(device.index, .watch, "watch starts: sync, then wait")
            try await watchSync(device)
            return
        }
        if let fault {
            summary.feedFaults += 1
            note(device.index, .fault, "feed: \(fault.rawValue)")
            switch fault {
            case .dropped:
                held.task.cancel()
                device.held = nil
                return
            case .restartWhileWaiting:
                dropHeldPulls()
                try await server.restart()
                summary.restarts += 1
                note(nil, .restart, "server restarted while device \(device.index) waited")
                try scanStore("after the restart")
                return
            case .answerLost, .wakeLost:
                break
            }
        }
        let behind = views[k].cursor > held.since
        guard behind || pending else { return }  // nothing to answer: the pull stays held
        if behind {
            if fault == .wakeLost {
                // The wake-up never came: the wait runs out and the device pulls again at once, from the same cursor.
                held.task.cancel()
                held = startPull(device, accountID: accountID, token: accounts[k].auditToken, since: held.since)
            }
            let changes = try await answer(of: held, device: device, account: k)
            device.held = nil
            if fault == .answerLost {
                // The device sends its waiting pull again from the same cursor: the next iteration finds it answered
                // by the re-read alone (the commit that would have signalled it is already past).
                device.held = startPull(device, accountID: accountID, token: accounts[k].auditToken, since: held.since)
                note(device.index, .watch, "the answer (\(changes) changes) was lost; pulls again from \(held.since)")
                return
            }
            note(device.index, .watch, "woken: \(changes) changes after \(held.since)")
        } else {
            held.task.cancel()
            device.held = nil
            note(device.index, .watch, "local notes written: sync")
        }
        try await watchSync(device)
    }

    /// The sync a wake-up asks for (no faults: the feed's own are the iteration's), then a new waiting pull from the
    /// cursor it left.
    func watchSync(_ device: SimDevice) async throws {
        summary.watchSyncs += 1
        try await sync(device, faults: [])
        guard let k = try accountIndex(of: device), !revoked.contains(device.index) else { return }
        let cursor = try local(device.index) { try device.client.status().cursor }.flatMap(SyncCursor.init(text:)) ?? .start
        device.held = startPull(device, accountID: accounts[k].accountID, token: accounts[k].auditToken, since: cursor)
    }

    func startPull(_ device: SimDevice, accountID: FlakeID, token: String, since: SyncCursor) -> HeldPull {
        let transport = server.transport(forDevice: device.index)
        let request = WireRequest(
            .pull, query: [(PullQuery.since, since.text), (PullQuery.limit, "1"), (PullQuery.wait, String(Self.watchWaitSeconds))],
            bearerToken: token)
        return HeldPull(accountID: accountID, since: since, task: Task { try await transport.send(request) })
    }

    /// The held pull's answer, which must come (the account moved past its cursor): how many changes it carried. An
    /// empty page (the wait ran out on a real daemon) is followed by one pull again, which must find the changes.
    func answer(of held: HeldPull, device: SimDevice, account k: Int) async throws -> Int {
        var held = held
        for attempt in 0..<2 {
            guard let response = await Self.awaitAnswer(held.task, limit: watchAnswerLimit) else {
                held.task.cancel()
                throw fail(
                    .watchConverges,
                    "device \(device.index): its waiting pull from \(held.since) was not answered within \(watchAnswerLimit) although account \(k) moved to \(views[k].cursor)")
            }
            guard case .success(let wire) = response, wire.status == 200 else {
                throw fail(.unexpectedError, "device \(device.index): its waiting pull failed with no fault injected: \(response)")
            }
            let page = try JSONDecoder().decode(PullResponse.self, from: wire.body)
            if !page.changes.isEmpty { return page.changes.count }
            if attempt == 0 {
                held = startPull(device, accountID: held.accountID, token: accounts[k].auditToken, since: held.since)
            }
        }
        throw fail(.watchConverges, "device \(device.index): pulls from \(held.since) answered no change although account \(k) moved to \(views[k].cursor)")
    }

    /// The task's outcome, or nil when it takes longer than `limit`.
    static func awaitAnswer(_ task: Task<WireResponse, any Error>, limit: Duration) async -> Result<WireResponse, any Error>? {
        await withTaskGroup(of: Result<WireResponse, any Error>?.self) { group in
            group.addTask { await task.result }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            // The group waits for both children: a pull that timed out is cancelled, so that the first ends too.
            if first == nil { task.cancel() }
            group.cancelAll()
            return first
        }
    }

    /// Ends every held waiting pull (a server restart cuts them; the run ends).
    func dropHeldPulls() {
        for device in devices {
            device.held?.task.cancel()
            device.held = nil
        }
    }

    /// Quiescence for watching devices (issue 19): faults stop, and only watch iterations run, round after round,
    /// until a round syncs nothing. Then each watching device signed in to an account must hold exactly its notes,
    /// without a single explicit sync. Devices not watching sync first (once), as their users would.
    func quiesceWatchers() async throws {
        let watchers = devices.filter { watching.contains($0.index) }
        guard !watchers.isEmpty else { return }
        note(nil, .watch, "quiescence: no faults; other devices sync once, then watching devices run watch iterations only")
        for device in devices where try !watching.contains(device.index) && device.client.account() != nil {
            try await sync(device, faults: [])
        }
        let rounds = 2 * devices.count + 4
        var settled = false
        for _ in 0..<rounds {
            for k in accounts.indices { _ = try await readChanges(account: k) }
            let before = summary.watchSyncs
            for device in watchers { try await watchIteration(device, fault: nil) }
            for k in accounts.indices { _ = try await readChanges(account: k) }
            for device in watchers { try checkDevice(device) }
            if summary.watchSyncs == before {
                settled = true
                break
            }
        }
        for k in accounts.indices { _ = try await readChanges(account: k) }
        for device in watchers {
            guard let k = try accountIndex(of: device), !revoked.contains(device.index) else { continue }
            let expected = Dictionary(
                views[k].byServerID.values.filter { !$0.deleted }.map { ($0.key, $0.text) }, uniquingKeysWith: { a, _ in a })
            let actual = Dictionary(try device.client.notes().map { ($0.key, $0.text) }, uniquingKeysWith: { a, _ in a })
            if actual != expected || !settled {
                let missing = expected.keys.filter { actual[$0] == nil }.count
                let extra = actual.keys.filter { expected[$0] == nil }.count
                let differ = expected.keys.filter { actual[$0] != nil && actual[$0] != expected[$0] }.count
                throw fail(
                    .watchConverges,
                    "watching device \(device.index) differs from account \(k) after \(settled ? "its watch settled" : "\(rounds) rounds of watch iterations"): \(missing) missing, \(extra) extra, \(differ) with other text")
            }
        }
    }
}
