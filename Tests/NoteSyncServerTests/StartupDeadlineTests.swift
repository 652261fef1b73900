import Dispatch
import Foundation
import Synchronization
import Testing

@testable import NoteSyncServer

/// The deadline on the daemon's start on PostgreSQL (migrations, the instance lease): a start that does not finish in
/// time is an operator's error with a clear message, never a daemon that neither listens nor exits.
@Suite struct StartupDeadlineTests {
    struct Refused: Error, Equatable {}

    /// A PostgreSQL query does not end when its task is cancelled: the deadline must not wait for it. The body here
    /// blocks a thread of its own for up to 10 seconds whatever its task's cancellation; before the fix the deadline
    /// waited for it, so `ended` was true when the error came.
    @Test func aBodyThatIgnoresCancellationIsNotWaitedFor() async throws {
        let release = DispatchSemaphore(value: 0)
        let ended = Mutex(false)
        let error = await #expect(throws: ConfigurationError.self) {
            try await withStartupDeadline(.milliseconds(200), what: "in a test") {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    Thread.detachNewThread {
                        _ = release.wait(timeout: .now() + 10)
                        continuation.resume()
                    }
                }
                ended.withLock { $0 = true }
            }
        }
        #expect(!ended.withLock { $0 }, "the deadline waited for a body that ignores cancellation")
        #expect(error?.description.contains("timed out after") == true, "\(String(describing: error))")
        #expect(error?.description.contains("in a test") == true)
        release.signal()
    }

    @Test func aBodyThatFinishesInTimeIsItsOwnAnswer() async throws {
        let ran = Mutex(0)
        try await withStartupDeadline(.seconds(60), what: "in a test") { ran.withLock { $0 += 1 } }
        #expect(ran.withLock { $0 } == 1)
        #expect(try await withinDeadline(.seconds(60), timedOut: Refused()) { 42 } == 42)
        await #expect(throws: Refused.self) {
            try await withStartupDeadline(.seconds(60), what: "in a test") { throw Refused() }
        }
    }

    /// A cancelled start (the daemon told to stop while it starts) cancels the body.
    @Test func cancellingTheCallerCancelsTheBody() async throws {
        let outer = Task {
            try await withStartupDeadline(.seconds(60), what: "in a test") {
                try await Task.sleep(for: .seconds(120))
            }
        }
        outer.cancel()
        await #expect(throws: CancellationError.self) { try await outer.value }
    }
}
