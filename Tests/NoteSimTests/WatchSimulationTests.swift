import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient
import Testing
import TestSupport

@testable import NoteSim

/// Issue 19: devices in watch mode in notes-sim, faults on their feed, and the `watch-converges` invariant.
@Suite struct WatchSimulationTests {
    @Test func aSweepWithWatchingDevicesFindsNoViolation() async throws {
        var total = SimSummary()
        for seed: UInt64 in 1...12 {
            let parameters = SimParameters(seed: seed, accounts: 2, devices: 3, steps: 300, faultRate: 0.05, watchers: 2)
            let outcome = try await Simulation.run(ScheduleGenerator.generate(parameters), parameters: parameters)
            #expect(outcome.violation == nil, "seed \(seed): \(outcome.violation.map(String.init(describing:)) ?? "")")
            total.add(outcome.summary)
        }
        // The schedules really watch: iterations ran, feeds woke devices into syncs, and faults hit the feed.
        #expect(total.watchWakes > 0 && total.watchSyncs > 0 && total.feedFaults > 0)
    }

    @Test func withoutWatchersTheScheduleIsTheOldOne() {
        for seed: UInt64 in 1...20 {
            let old = ScheduleGenerator.generate(SimParameters(seed: seed))
            #expect(old == ScheduleGenerator.generate(SimParameters(seed: seed, watchers: 0)))
            #expect(!old.contains { if case .watchWake = $0 { true } else { false } })
            // With watchers, the other steps are the old schedule's, in order (a prefix: the step budget is shared).
            let watched = ScheduleGenerator.generate(SimParameters(seed: seed, watchers: 2))
            let others = watched.filter { if case .watchWake = $0 { false } else { true } }
            #expect(others.count < old.count && Array(old.prefix(others.count)) == others)
            #expect(watched.contains { if case .watchWake(let d, _) = $0 { d < 2 } else { false } })
        }
    }

    /// Device 1 writes and syncs; device 0 watches and never runs a `sync` step. Each feed fault hits device 0's
    /// wait once, then the feed is fault-free: device 0 must still end with device 1's notes (checked by the
    /// `watch-converges` quiescence, which runs no explicit sync for watchers).
    @Test(arguments: [FeedFault?.none] + FeedFault.allCases.map(Optional.some))
    func aWatchingDeviceConvergesAfterEachFeedFault(_ fault: FeedFault?) async throws {
        let steps: [SimAction] = [
            .signIn(device: 0, account: 0, faults: []), .signIn(device: 1, account: 0, faults: []),
            .watchWake(device: 0, fault: nil),  // the watch starts: sync, then hold a waiting pull
            .create(device: 1, token: "first"), .sync(device: 1, faults: []),
            .watchWake(device: 0, fault: fault),
            .create(device: 1, token: "second"), .sync(device: 1, faults: []),
            .watchWake(device: 0, fault: nil),
        ]
        let parameters = SimParameters(seed: 3, accounts: 1, devices: 2, steps: steps.count)
        let outcome = try await Simulation.run(steps, parameters: parameters, recordEvents: true)
        #expect(outcome.violation == nil, "\(outcome.violation.map(String.init(describing:)) ?? "")")
        #expect(outcome.summary.watchSyncs >= 2)
        #expect(outcome.summary.feedFaults == (fault == nil ? 0 : 1))
        if fault == .restartWhileWaiting { #expect(outcome.summary.restarts == 1) }
    }

    /// The in-step check: a waiting pull that is never answered although its account moved is a `watch-converges`
    /// violation (what a server that forgets to signal after a push gives; scripts/planted-bugs/7 plants that).
    @Test func aWaitingPullNeverAnsweredIsAViolation() async throws {
        let parameters = SimParameters(seed: 5, accounts: 1, devices: 2, steps: 0)
        let simulation = Simulation(parameters: parameters, target: .inProcess, recordEvents: false, runTag: "")
        try await simulation.setUp()
        defer { simulation.dropHeldPulls() }
        for action: SimAction in [
            .signIn(device: 0, account: 0, faults: []), .signIn(device: 1, account: 0, faults: []),
            .watchWake(device: 0, fault: nil), .create(device: 1, token: "lonely"), .sync(device: 1, faults: []),
        ] {
            try await simulation.execute(action)
            try await simulation.checkAfterStep(action)
        }
        // Replace the real waiting pull by one that never answers (a feed that missed the signal).
        let watcher = simulation.devices[0]
        let held = try #require(watcher.held)
        held.task.cancel()
        watcher.held = HeldPull(
            accountID: held.accountID, since: held.since,
            task: Task {
                try await Task.sleep(for: .seconds(60))
                throw CancellationError()
            })
        await #expect(throws: Violation.self) {
            do {
                try await simulation.execute(.watchWake(device: 0, fault: nil))
            } catch let violation as Violation {
                #expect(violation.invariant == .watchConverges)
                throw violation
            }
        }
        await simulation.server.shutdown()
    }

    /// Quiescence: a watching device whose feed answered but was never given a watch iteration afterwards still
    /// converges, through the quiescence's watch iterations alone (no sync step for it).
    @Test func quiescenceConvergesWatchersWithoutASync() async throws {
        let steps: [SimAction] = [
            .signIn(device: 0, account: 0, faults: []), .signIn(device: 1, account: 0, faults: []),
            .watchWake(device: 0, fault: nil),
            .create(device: 1, token: "a"), .create(device: 0, token: "b"), .sync(device: 1, faults: []),
        ]
        let parameters = SimParameters(seed: 9, accounts: 1, devices: 2, steps: steps.count)
        let outcome = try await Simulation.run(steps, parameters: parameters)
        #expect(outcome.violation == nil, "\(outcome.violation.map(String.init(describing:)) ?? "")")
        #expect(outcome.summary.watchSyncs >= 2)
        #expect(outcome.summary.notes == 2)
    }
}
