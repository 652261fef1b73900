import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol

/// Sync: push (`POST /v1/notes/push`), pull (`GET /v1/notes/changes`, ``PullDriver``), a note's history
/// (`GET /v1/notes/{serverID}/versions`), and what the server says of itself (`GET /v1/info`, `GET /healthz`). The
/// rules are in `Sync/` (``PushPlanner``, ``PullPlanner``, ``HistoryPlanner``); this carries them out with the store
/// and the change feed.
public final class SyncService: Sendable {
    public let store: any NoteStore
    /// The limits the server enforces and `GET /v1/info` serves.
    public let limits: SyncLimits
    /// The per-account limits pushes enforce.
    public let quota: AccountQuota
    /// The history's retention and pages, served by `GET /v1/info` as `history`.
    public let history: HistoryLimits
    /// The server's version string, served by `GET /v1/info`.
    public let serverVersion: String
    /// The waiting pulls; nil when pulls are never held open (`wait` is then accepted and ignored).
    public let changeFeed: ChangeFeed?
    /// Runs pulls, waiting ones included.
    public let pulls: PullDriver
    let clock: any FlakeClock
    let mintID: @Sendable () throws -> FlakeID

    public init(_ context: ServiceContext, configuration: ServiceConfiguration) {
        store = context.store
        clock = context.clock
        mintID = context.mintID
        changeFeed = context.changeFeed
        limits = configuration.limits
        quota = configuration.quota
        history = configuration.history
        serverVersion = configuration.serverVersion
        pulls = PullDriver(store: context.store, limits: configuration.limits, feed: context.changeFeed, logger: context.logger)
    }

    /// Applies a batch of changes (`POST /v1/notes/push`): one transaction, one result per change, in order.
    ///
    /// - Throws: `batch_too_large` when the batch has more than `maxBatchChanges` changes (nothing is applied).
    public func push(_ request: PushRequest, session: SessionRecord) async throws -> PushResponse {
        guard request.changes.count <= limits.maxBatchChanges else {
            throw SyncError(
                .batchTooLarge, "A push has at most \(limits.maxBatchChanges) changes; this one has \(request.changes.count)."
            )
        }
        let context = PushContext(
            limits: limits, now: clock.unixMilliseconds(), pusher: session.origin ?? session.id, quota: quota,
            device: session.deviceName, mintID: mintID)
        do {
            let results = try await store.push(accountID: session.accountID, changes: request.changes, context: context)
            // The push is durable now: wake the account's waiting pulls on this daemon (other daemons on PostgreSQL
            // hear the store's NOTIFY).
            if let changeFeed, results.contains(where: Self.wroteNote) { changeFeed.signal(account: session.accountID) }
            return PushResponse(results: results)
        } catch NoteStoreError.accountNotFound {
            throw SyncError(.unauthorized, "The session's account no longer exists.")
        }
    }

    /// Whether a change's result means the push wrote a note (and moved the account's change sequence). Erring
    /// towards true costs a waiter one re-read, never a missed change.
    static func wroteNote(_ result: ChangeResult) -> Bool {
        guard !result.replayed else { return false }
        switch result.status {
        case .unchanged, .rejected: return false
        default: return true
        }
    }

    /// One page of a note's history (`GET /v1/notes/{serverID}/versions`), parsed by ``HistoryPlanner``.
    ///
    /// - Throws: `note_not_found` when the account has no such note (tombstones are notes).
    public func versions(_ query: HistoryPlanner.Query, session: SessionRecord) async throws -> NoteVersionsResponse {
        guard let page = try await store.versions(accountID: session.accountID, query: query) else {
            throw SyncError(.noteNotFound, "No note \(query.serverID) in this account.", field: "serverID")
        }
        return HistoryPlanner.response(page)
    }

    /// `GET /v1/info`.
    public var info: ServerInfo {
        ServerInfo(version: serverVersion, limits: limits, live: changeFeed?.limits, history: history)
    }

    /// `GET /healthz`: pings the store.
    ///
    /// - Throws: `unavailable` when the store does not answer.
    public func health() async throws -> HealthResponse {
        do {
            try await store.ping()
        } catch {
            throw SyncError(.unavailable, "The database does not answer.", underlying: error)
        }
        return HealthResponse(database: store.backendName)
    }
}
