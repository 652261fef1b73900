import Foundation
import GRDB
import NoteSyncProtocol
import Synchronization

/// Why a watch synced.
public enum WatchReason: String, Sendable, Codable, CaseIterable {
    /// The watch started.
    case start
    /// The server's feed said the account's cursor moved.
    case server
    /// A `notes` command (another process) changed the local store.
    case local
    /// The server is reachable again after a failure.
    case reconnect
    /// A sync failed; this one retries it.
    case retry
}

/// What a watch reports, one event per line of `notes watch`.
public enum WatchEvent: Sendable {
    /// A sync ran, for these reasons (several triggers that arrived together share one sync).
    case synced(SyncReport, reasons: [WatchReason])
    /// The server could not be reached, or refused; the watch tries again after `retryIn`.
    case disconnected(NotesError, retryIn: Duration)
}

/// How a watch waits.
public struct WatchOptions: Sendable, Equatable {
    /// Seconds each waiting pull asks the server to hold (clamped to the server's `live.maxWaitSeconds`; kept below
    /// the transport's 30-second timeout).
    public var waitSeconds: Int
    /// How often the local store is checked for commits by other processes (`PRAGMA data_version`: one statement,
    /// no read of any table).
    public var localPoll: Duration
    /// Between pulls when the server does not hold pulls open (no `live` in `GET /v1/info`).
    public var pollWithoutLive: Duration
    /// The longest wait between reconnection attempts (they start at 0.25 s and double, with jitter).
    public var maxBackoff: Duration

    public init(
        waitSeconds: Int = 20, localPoll: Duration = .milliseconds(100), pollWithoutLive: Duration = .seconds(5),
        maxBackoff: Duration = .seconds(30)
    ) {
        self.waitSeconds = waitSeconds
        self.localPoll = localPoll
        self.pollWithoutLive = pollWithoutLive
        self.maxBackoff = maxBackoff
    }
}

/// Keeps a device in sync until cancelled (``NotesClient/watch(_:onEvent:)``). Three tasks:
/// - the **feed** holds a waiting pull open (`wait=`, `limit=1`) from the stored cursor; when it answers with a
///   change, it asks for a sync and waits until one has run. Its page is never applied: every change reaches the
///   store through the ordinary sync (one path for data). When the server goes away it retries with backoff and
///   asks for a sync once it is back;
/// - the **local watcher** reads SQLite's `PRAGMA data_version` on the store's connection every
///   ``WatchOptions/localPoll``: it changes only when another connection (another `notes` process) commits, so
///   this process's own syncs never trigger it. When it changed and notes wait to be pushed, it asks for a sync;
/// - the **syncer** runs one ordinary sync (``SyncEngine/sync(progress:pullFirst:)``) per batch of requests
///   (requests that arrive during a sync share the next one) and reports it.
///
/// Cancelling (Ctrl-C) ends all three; a sync in flight stops at its next request, and every local write is a
/// transaction, so nothing is half-written. The watch ends with an error only when it cannot go on: signed out
/// (locally, or by the server), or a storage failure.
struct Watcher: Sendable {
    let engine: SyncEngine
    let store: LocalStore
    let options: WatchOptions
    let sleep: @Sendable (Duration) async -> Void
    let jitter: @Sendable () -> Double
    let onEvent: @Sendable (WatchEvent) -> Void

    /// Requests for a sync, coalesced: the reasons gathered, and a doorbell that holds at most one ring.
    final class Requests: Sendable {
        /// The reasons gathered, and how many syncs have taken reasons so far.
        private let state = Mutex<(reasons: [WatchReason], started: Int)>(([], 0))
        let bell: AsyncStream<Void>
        private let ring: AsyncStream<Void>.Continuation
        /// Syncs finished so far, and a doorbell rung after each.
        let finished = Atomic<Int>(0)
        let finishedBell: AsyncStream<Void>
        private let ringFinished: AsyncStream<Void>.Continuation

        init() {
            (bell, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
            (finishedBell, ringFinished) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        }

        /// Asks for a sync; returns the number of the sync that will serve it (the first to start after now).
        @discardableResult
        func request(_ reason: WatchReason) -> Int {
            let serving = state.withLock { state in
                if !state.reasons.contains(reason) { state.reasons.append(reason) }
                return state.started + 1
            }
            ring.yield()
            return serving
        }

        /// The reasons gathered (the sync about to start serves them all), or none.
        func take() -> [WatchReason] {
            state.withLock { state in
                let taken = state.reasons
                if !taken.isEmpty {
                    state.reasons = []
                    state.started += 1
                }
                return taken
            }
        }

        func didSync() {
            finished.add(1, ordering: .sequentiallyConsistent)
            ringFinished.yield()
        }

        func finish() {
            ring.finish()
            ringFinished.finish()
        }
    }

    func run() async throws(NotesError) {
        let requests = Requests()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await watchLocalStore(requests) }
                group.addTask { await followFeed(requests) }
                requests.request(.start)
                defer { group.cancelAll() }
                try await syncOnRequest(requests, group: &group)
            }
        } catch let error as NotesError {
            if Task.isCancelled { return }
            throw error
        } catch {
            if Task.isCancelled { return }
            throw NotesError(.storage, "The watch failed.", cause: String(describing: error))
        }
    }

    /// The syncer: one sync per ring of the doorbell, until cancelled or a failure the watch cannot go on from.
    private func syncOnRequest(_ requests: Requests, group: inout ThrowingTaskGroup<Void, any Error>) async throws {
        var failures = 0
        for await _ in requests.bell {
            if Task.isCancelled { return }
            let reasons = requests.take()
            if reasons.isEmpty { continue }
            do throws(NotesError) {
                let report = try await engine.sync(progress: nil, pullFirst: false)
                failures = 0
                onEvent(.synced(report, reasons: reasons))
            } catch {
                if Task.isCancelled { return }
                switch error.code {
                case .notSignedIn, .signedOutByServer, .storage, .dataDirectory:
                    throw error
                default:
                    failures += 1
                    let delay = backoff(after: failures, error: error)
                    onEvent(.disconnected(error, retryIn: delay))
                    group.addTask { [sleep] in
                        await sleep(delay)
                        requests.request(.retry)
                    }
                }
            }
            requests.didSync()
        }
    }

    /// The local watcher (see the type's notes).
    private func watchLocalStore(_ requests: Requests) async {
        var seen = try? store.dataVersion()
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: options.localPoll)
            } catch {
                return
            }
            guard let version = try? store.dataVersion(), version != seen else { continue }
            seen = version
            if let pending = try? store.read({ tx in try tx.pendingCount() }), pending > 0 {
                requests.request(.local)
            }
        }
    }

    /// The feed (see the type's notes).
    private func followFeed(_ requests: Requests) async {
        var failures = 0
        var live: LiveLimits?
        var knowsInfo = false
        while !Task.isCancelled {
            do throws(NotesError) {
                let connection = try engine.signedInConnection()
                if !knowsInfo {
                    live = try await connection.call(.info, ServerInfo.self, attempts: 1).live
                    knowsInfo = true
                }
                let cursor = try store.read { tx in try tx.cursor() } ?? SyncCursor.start.text
                var query = [(PullQuery.since, cursor), (PullQuery.limit, "1")]
                if let live {
                    query.append((PullQuery.wait, String(min(options.waitSeconds, live.maxWaitSeconds))))
                } else {
                    await sleep(options.pollWithoutLive)
                }
                let page = try await connection.call(.pull, PullResponse.self, query: query, attempts: 1)
                // Wait until the sync that serves the request has finished: the next waiting pull starts from its
                // cursor (a sync already running when the request came does not serve it).
                if failures > 0 {
                    failures = 0
                    await awaitSync(requests.request(.reconnect), requests)
                } else if !page.changes.isEmpty {
                    await awaitSync(requests.request(.server), requests)
                }
            } catch {
                if Task.isCancelled { return }
                switch error.code {
                case .notSignedIn, .signedOutByServer:
                    // The syncer finds the same and ends the watch (and forgets a revoked session).
                    requests.request(.server)
                    return
                default:
                    failures += 1
                    knowsInfo = false
                    let delay = backoff(after: failures, error: error)
                    onEvent(.disconnected(error, retryIn: delay))
                    await sleep(delay)
                }
            }
        }
    }

    /// Waits until sync number `serving` (counted from 1) has finished. Syncs run one at a time, in order.
    private func awaitSync(_ serving: Int, _ requests: Requests) async {
        if requests.finished.load(ordering: .sequentiallyConsistent) >= serving { return }
        for await _ in requests.finishedBell {
            if requests.finished.load(ordering: .sequentiallyConsistent) >= serving { return }
        }
    }

    /// The wait before the next attempt: 5 to 10 s after a 429, else 0.25 s doubling per failure up to
    /// ``WatchOptions/maxBackoff``, with jitter (half to all of it).
    private func backoff(after failures: Int, error: NotesError) -> Duration {
        // 429 too_many_waiters: the server's Retry-After is 5 s.
        if error.httpStatus == 429 { return .seconds(5) * (1 + jitter()) }
        var delay: Duration = .milliseconds(250)
        for _ in 1..<max(1, failures) where delay < options.maxBackoff { delay *= 2 }
        delay = min(delay, options.maxBackoff)
        return delay * (0.5 + 0.5 * jitter())
    }
}

extension SyncEngine {
    /// A conversation with the signed-in account's server.
    ///
    /// - Throws: `not_signed_in`.
    func signedInConnection() throws(NotesError) -> ServerConnection {
        let settings = try store.read { tx in try tx.settings() }
        guard let settings, settings.account != nil, let token = settings.token, let server = settings.serverURL,
            let url = URL(string: server)
        else {
            throw NotesError(.notSignedIn, "Not signed in; sign in with `notes login` first.")
        }
        return connection(to: url, server: server, token: token)
    }
}

extension LocalStore {
    /// SQLite's `PRAGMA data_version` on the store's connection: it changes when another connection (another
    /// process) commits to the database, never for this connection's own commits.
    func dataVersion() throws(NotesError) -> Int64 {
        try read { tx in try Int64.fetchOne(tx.db, sql: "PRAGMA data_version") ?? 0 }
    }
}
