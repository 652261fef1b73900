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

    /// Arms the faults of one step; request indices count from here.
    public func arm(_ plans: [FaultPlan]) {
        injected.withLock { $0 = [] }
        sent.withLock { $0 = 0 }
        _ = injector.takeDuplicates()
        let interrupted = Locked(false)
        injector.setPlan { [injected] _, index in
            if interrupted.withLock({ $0 }) { return .refuse }
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
        let response = try await injector.send(request)
        exchanges?.withLock { $0.append((request, response)) }
        return response
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
