import Foundation
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import Synchronization
import Testing
import TestSupport

@testable import NotesClient

/// Issue 19: `NotesClient.watch` against the in-process server. Each test waits for the watch's own events (no
/// sleeps in the tests); the watch itself really sleeps between local checks and polls.
@Suite("notes watch, in process")
struct WatchTests {
    /// A device whose environment really sleeps (the watch's local checks and polls are timed).
    func device(_ server: InProcessServer, seed: UInt64, home: URL? = nil) throws -> NotesClient {
        let environment = NotesEnvironment(
            clock: ManualFlakeClock(unixMilliseconds: testEpoch + Int64(seed)), random: SplitMix64(seed: seed),
            transport: NotesEnvironment.fixed(server.transport), sleep: { try? await Task.sleep(for: $0) },
            retry: RetryPolicy(maxAttempts: 2, initialDelay: .milliseconds(1), maxDelay: .milliseconds(5)), deviceName: "watch-\(seed)")
        if let home { return try NotesClient.open(home: home, environment: environment) }
        return try NotesClient.inMemory(environment: environment)
    }

    /// Runs `client.watch` in a task; its events arrive on the returned stream.
    func startWatch(_ client: NotesClient, _ options: WatchOptions) -> (Task<Void, any Error>, AsyncStream<WatchEvent>) {
        let (events, continuation) = AsyncStream.makeStream(of: WatchEvent.self)
        let task = Task {
            defer { continuation.finish() }
            try await client.watch(options) { continuation.yield($0) }
        }
        return (task, events)
    }

    /// The next sync that matches, skipping other events.
    func nextSync(
        _ events: inout AsyncStream<WatchEvent>.Iterator, where matches: (SyncReport, [WatchReason]) -> Bool
    ) async -> (SyncReport, [WatchReason])? {
        while let event = await events.next() {
            if case .synced(let report, let reasons) = event, matches(report, reasons) { return (report, reasons) }
        }
        return nil
    }

    @Test(arguments: [true, false])
    func aWatchingDeviceReceivesAnotherDevicesNote(serverHoldsPulls: Bool) async throws {
        let server = try InProcessServer(
            store: try SQLiteNoteStore.temporary(), instance: 1000, tokenSeed: 7, changeFeed: serverHoldsPulls ? ChangeFeed() : nil)
        let writer = try device(server, seed: 1)
        let watcher = try device(server, seed: 2)
        try await signUp(writer, "alice")
        try await signIn(watcher, "alice")
        // Without live sync the watch polls: every 20 ms here.
        let (task, events) = startWatch(watcher, WatchOptions(pollWithoutLive: .milliseconds(20)))
        var iterator = events.makeAsyncIterator()
        #expect(await nextSync(&iterator) { _, reasons in reasons.contains(.start) } != nil)

        _ = try writer.add("from the writer")
        try await writer.syncOK()
        let received = await nextSync(&iterator) { report, _ in report.applied > 0 }
        #expect(received?.1 == [.server])
        #expect(try watcher.texts() == ["from the writer"])

        task.cancel()
        try await task.value  // a cancelled watch ends without an error
    }

    /// Another connection to the same store (another `notes` process) adds a note: the watch notices the commit
    /// (`PRAGMA data_version`) and pushes it, for the local reason.
    @Test func aNoteWrittenThroughAnotherConnectionIsPushed() async throws {
        let server = try InProcessServer(store: try SQLiteNoteStore.temporary(), instance: 1000, tokenSeed: 7, changeFeed: ChangeFeed())
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("watch-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let watcher = try device(server, seed: 3, home: home)
        let other = try device(server, seed: 4)
        try await signUp(watcher, "alice")
        try await signIn(other, "alice")
        let (task, events) = startWatch(watcher, WatchOptions(localPoll: .milliseconds(20)))
        var iterator = events.makeAsyncIterator()
        _ = await nextSync(&iterator) { _, reasons in reasons.contains(.start) }

        let sameHome = try device(server, seed: 3, home: home)
        _ = try sameHome.add("written by another process")
        let pushed = await nextSync(&iterator) { report, _ in report.pushed > 0 }
        #expect(pushed?.1.contains(.local) == true)
        try await other.syncOK()
        #expect(try other.texts() == ["written by another process"])
        task.cancel()
        try await task.value
    }

    @Test func aSignedOutDeviceCannotWatch() async throws {
        let server = try InProcessServer(store: try SQLiteNoteStore.temporary(), instance: 1000, tokenSeed: 7, changeFeed: ChangeFeed())
        let client = try device(server, seed: 5)
        await #expect(throws: NotesError.self) {
            try await client.watch { _ in }
        }
        do {
            try await client.watch { _ in }
        } catch {
            #expect(error.code == .notSignedIn)
        }
    }
}
