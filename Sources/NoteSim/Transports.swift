import Foundation
import NoteSyncProtocol
import NoteSyncServer
import NotesClient
import Synchronization

/// Hands requests straight to the server library's dispatcher: the same code the HTTP router calls, without
/// sockets. The dispatcher can be swapped (a server restart builds a new one over the same store).
public final class InProcessTransport: SyncTransport {
    private let api: Mutex<SyncAPI>

    public init(api: SyncAPI) { self.api = Mutex(api) }

    /// Replaces the dispatcher, as a restarted daemon would.
    public func replace(with api: SyncAPI) { self.api.withLock { $0 = api } }

    public func send(_ request: WireRequest) async throws -> WireResponse {
        let api = self.api.withLock { $0 }
        return await api.handle(request)
    }
}

/// Injects a step's planned faults into a device's requests: a request lost before the server, a response lost
/// after the server committed, a request delivered twice, or the connection going down for the rest of the step.
public final class FaultyTransport: SyncTransport {
    struct State {
        var plans: [FaultPlan] = []
        var nextRequest = 0
        var interrupted = false
        var injected: [FaultKind] = []
        /// How a push delivered twice was answered differently the second time, if it was.
        var replayMismatch: String?
    }

    private let base: any SyncTransport
    private let state = Mutex(State())

    public init(base: any SyncTransport) { self.base = base }

    /// Arms the faults of one step; request indices count from here.
    public func arm(_ plans: [FaultPlan]) {
        state.withLock { $0 = State(plans: plans) }
    }

    /// Disarms and returns the faults actually injected since ``arm(_:)``, and how a push delivered twice was
    /// answered differently the second time (nil: it was not, or no push was delivered twice).
    @discardableResult
    public func disarm() -> (injected: [FaultKind], replayMismatch: String?) {
        state.withLock { state in
            let disarmed = (state.injected, state.replayMismatch)
            state = State()
            return disarmed
        }
    }

    public func send(_ request: WireRequest) async throws -> WireResponse {
        let fault: FaultKind? = state.withLock { state in
            defer { state.nextRequest += 1 }
            if state.interrupted { return .interrupt }
            guard let plan = state.plans.first(where: { $0.request == state.nextRequest }) else { return nil }
            state.injected.append(plan.kind)
            if plan.kind == .interrupt { state.interrupted = true }
            return plan.kind
        }
        switch fault {
        case nil:
            return try await base.send(request)
        case .dropRequest:
            throw TransportError("simulated fault: the request was lost before the server")
        case .dropResponse:
            _ = try await base.send(request)
            throw TransportError("simulated fault: the response was lost after the server answered")
        case .duplicate:
            let first = try await base.send(request)
            let second = try await base.send(request)
            if let mismatch = Self.replayMismatch(request, first, second) {
                state.withLock { $0.replayMismatch = $0.replayMismatch ?? mismatch }
            }
            return second
        case .interrupt:
            throw TransportError("simulated fault: the connection is down")
        }
    }

    /// A push delivered twice must be answered the same both times: the second delivery replays the stored outcome
    /// of every change and writes nothing. Only the `replayed` flag and the echoed text may differ.
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
            let outcome = { (r: ChangeResult) in "\(r.editID) \(r.status.rawValue) \(r.serverID.map(String.init(describing:)) ?? "-") v\(r.version.map(String.init) ?? "-") conflict \(r.conflict.map { "\($0.serverID)" } ?? "-")" }
            if outcome(a) != outcome(b) {
                return "edit \(a.editID) of note \(a.clientID) was answered '\(outcome(a))', then on replay '\(outcome(b))'"
            }
        }
        return nil
    }
}
