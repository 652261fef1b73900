import Foundation
import NoteSyncProtocol
import NotesClient
import SyncHarness

/// Injects a step's planned faults into a device's requests: a request lost before the server, a response lost
/// after the server committed, a request delivered twice, or the connection going down for the rest of the step.
/// The faults themselves are ``FaultInjectingTransport``'s; this arms them per step and checks duplicated pushes.
public final class FaultyTransport: SyncTransport {
    private let injector: FaultInjectingTransport
    /// The faults injected since ``arm(_:)``.
    private let injected = Locked<[FaultKind]>([])
    /// Requests sent since ``arm(_:)``.
    private let sent = Locked(0)
    /// What runs just before the request of that index (since ``arm(_:)``), once.
    private let hook = Locked<(index: Int, action: @Sendable () async -> Void)?>(nil)
    /// The requests answered since the last ``takeExchanges()``, with the answers the client saw, when recording for
    /// a report; nil otherwise.
    private let exchanges: Locked<[(request: WireRequest, response: WireResponse)]>?

    /// Runs `action` just before the `index`-th request sent after the next ``arm(_:)`` (0: the first), once.
    public func before(request index: Int, run action: @escaping @Sendable () async -> Void) {
        hook.withLock { $0 = (index, action) }
    }

    /// The hook that has not run yet, removed.
    public func takeHook() -> (@Sendable () async -> Void)? {
        hook.withLock { hook in
            defer { hook = nil }
            return hook?.action
        }
    }

    /// - Parameter recordsExchanges: keep every answered request and its answer for ``takeExchanges()`` (the
    ///   report's sync arrows and per-note push outcomes).
    public init(base: any SyncTransport, recordsExchanges: Bool = false) {
        injector = FaultInjectingTransport(base, recordsRequests: false)
        exchanges = recordsExchanges ? Locked([]) : nil
    }

    /// The requests answered since the last call, oldest first, with the answers the client saw (a request lost to a
    /// fault is not among them); empty unless recording.
    public func takeExchanges() -> [(request: WireRequest, response: WireResponse)] {
        exchanges?.withLock { taken in
            defer { taken = [] }
            return taken
        } ?? []
    }

    /// Arms the faults of one step; request indices count from here. With `cut`, the connection also goes down
    /// (an ``FaultKind/interrupt``) at the chunk transfer of that direction after `cut.after` of them (issue 33).
    public func arm(_ plans: [FaultPlan], cut: TransferCut? = nil) {
        injected.withLock { $0 = [] }
        sent.withLock { $0 = 0 }
        _ = injector.takeDuplicates()
        let interrupted = Locked(false)
        let transfers = Locked(0)
        injector.setPlan { [injected] request, index in
            if interrupted.withLock({ $0 }) { return .refuse }
            if let cut, ChunkLedger.transfer(request) == cut.direction {
                if transfers.withLock({ count in
                    defer { count += 1 }
                    return count >= cut.after
                }) {
                    interrupted.withLock { $0 = true }
                    injected.withLock { $0.append(.interrupt) }
                    return .refuse
                }
            }
            guard let plan = plans.first(where: { $0.request == index }) else { return nil }
            injected.withLock { $0.append(plan.kind) }
            switch plan.kind {
            case .dropRequest: return .refuse
            case .dropResponse: return .dropAnswer
            case .duplicate: return .duplicate
            case .interrupt:
                interrupted.withLock { $0 = true }
                return .refuse
            }
        }
    }

    /// Disarms and returns the faults actually injected since ``arm(_:)``, and how a push delivered twice was
    /// answered differently the second time (nil: it was not, or no push was delivered twice).
    @discardableResult
    public func disarm() -> (injected: [FaultKind], replayMismatch: String?) {
        injector.setPlan { _, _ in nil }
        let mismatch = injector.takeDuplicates().lazy.compactMap { Self.replayMismatch($0.request, $0.first, $0.second) }.first
        return (injected.withLock { $0 }, mismatch)
    }

    public func send(_ request: WireRequest) async throws -> WireResponse {
        let index = sent.withLock { count in
            defer { count += 1 }
            return count
        }
        let due = hook.withLock { hook -> (@Sendable () async -> Void)? in
            guard let pending = hook, pending.index == index else { return nil }
            hook = nil
            return pending.action
        }
        if let due { await due() }
        ledger.withLock { $0.sending(request) }
        let response = try await injector.send(request)
        ledger.withLock { $0.answered(request, response) }
        exchanges?.withLock { $0.append((request, response)) }
        return response
    }

    /// What the device sent of chunks, and what it was told the server has (issue 33).
    private let ledger = Locked(ChunkLedger())

    /// The chunks the device transferred again since the last call although it knew the other side had them
    /// (``ChunkLedger/again``), removed, with the chunks it uploaded and downloaded in that time.
    public func takeChunkTransfers() -> (again: [String], uploaded: Int, downloaded: Int) {
        ledger.withLock { ledger in
            defer {
                ledger.again = []
                ledger.uploaded = 0
                ledger.downloaded = 0
            }
            return (ledger.again, ledger.uploaded, ledger.downloaded)
        }
    }

    /// A push delivered twice must be answered the same both times: the second delivery replays the stored outcome
    /// of every change (status, server ID, version, text, conflict copy) and writes nothing. Only the `replayed`
    /// flag may differ.
    static func replayMismatch(_ request: WireRequest, _ first: WireResponse, _ second: WireResponse) -> String? {
        guard request.method == Endpoint.push.method, request.path == Endpoint.push.path else { return nil }
        guard first.status == 200 else { return nil }
        guard second.status == 200 else { return "the push was answered \(first.status), then \(second.status)" }
        guard let one = try? JSONDecoder().decode(PushResponse.self, from: first.body),
            let two = try? JSONDecoder().decode(PushResponse.self, from: second.body)
        else { return "a push answer is not a PushResponse" }
        guard one.results.count == two.results.count else {
            return "the push was answered with \(one.results.count) results, then \(two.results.count)"
        }
        for (a, b) in zip(one.results, two.results) {
            let outcome = { (r: ChangeResult) in
                "\(r.editID) \(r.status.rawValue) \(r.serverID.map(String.init(describing:)) ?? "-") v\(r.version.map(String.init) ?? "-") conflict \(r.conflict.map { "\($0.serverID)/\($0.clientID)" } ?? "-") text \(r.text.map { "\($0.debugDescription)" } ?? "-")"
            }
            if outcome(a) != outcome(b) {
                return "edit \(a.editID) of note \(a.clientID) was answered '\(outcome(a))', then on replay '\(outcome(b))'"
            }
        }
        return nil
    }
}

/// A cut connection in the middle of a file's chunks: before the chunk transfer in `direction` after `after` of them.
public struct TransferCut: Sendable, Equatable {
    public var direction: ChunkLedger.Direction
    public var after: Int

    public init(_ direction: ChunkLedger.Direction, after: Int) {
        self.direction = direction
        self.after = after
    }
}

/// One device's chunk transfers as it saw them (issue 33), for `no-chunk-resent`: an upload (`PUT /v1/chunks/{hash}`)
/// of a chunk the server told it it has, in a `PUT`'s success or a `missing` answer that left it out, within the same
/// session (a session of another account is another chunk store), is a chunk sent twice; so is a download (`GET`) of
/// a chunk it fetched before (its cache keeps it: the run's transfers stay far below the cache's limit). A request
/// whose answer was lost taught the device nothing: its chunk may be sent again.
public struct ChunkLedger: Sendable {
    public enum Direction: Sendable, Equatable {
        case upload, download
    }

    /// Per session (bearer token): the chunks the server told the device it has.
    var onServer: [String: Set<String>] = [:]
    /// The chunks the device downloaded.
    var fetched: Set<String> = []
    /// The transfers made again, described.
    var again: [String] = []
    var uploaded = 0
    var downloaded = 0

    static let chunkPath = Endpoint.getChunk.path(parameter: "")

    /// Whether `request` moves a chunk's bytes, and which way.
    static func transfer(_ request: WireRequest) -> Direction? {
        guard request.path.hasPrefix(chunkPath), request.path != Endpoint.missingChunks.path else { return nil }
        if request.method == Endpoint.putChunk.method { return .upload }
        if request.method == Endpoint.getChunk.method { return .download }
        return nil
    }

    mutating func sending(_ request: WireRequest) {
        let hash = String(request.path.dropFirst(Self.chunkPath.count))
        switch Self.transfer(request) {
        case .upload where onServer[request.bearerToken ?? "", default: []].contains(hash):
            again.append("uploaded chunk \(hash.prefix(12)) the server had told it it has")
        case .download where fetched.contains(hash):
            again.append("downloaded chunk \(hash.prefix(12)) it had downloaded before")
        default: break
        }
    }

    mutating func answered(_ request: WireRequest, _ response: WireResponse) {
        guard response.isSuccess else { return }
        let hash = String(request.path.dropFirst(Self.chunkPath.count))
        switch Self.transfer(request) {
        case .upload:
            uploaded += 1
            onServer[request.bearerToken ?? "", default: []].insert(hash)
        case .download:
            downloaded += 1
            fetched.insert(hash)
        case nil:
            guard request.method == Endpoint.missingChunks.method, request.path == Endpoint.missingChunks.path,
                let body = request.body, let asked = try? JSONDecoder().decode(MissingChunksRequest.self, from: body),
                let answer = try? JSONDecoder().decode(MissingChunksResponse.self, from: response.body)
            else { return }
            let missing = Set(answer.missing.map(\.hex))
            onServer[request.bearerToken ?? "", default: []].formUnion(asked.hashes.map(\.hex).filter { !missing.contains($0) })
        }
    }
}
