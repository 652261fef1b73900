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
    }

    private let base: any SyncTransport
    private let state = Mutex(State())

    public init(base: any SyncTransport) { self.base = base }

    /// Arms the faults of one step; request indices count from here.
    public func arm(_ plans: [FaultPlan]) {
        state.withLock { $0 = State(plans: plans) }
    }

    /// Disarms and returns the faults actually injected since ``arm(_:)``.
    @discardableResult
    public func disarm() -> [FaultKind] {
        state.withLock { state in
            let injected = state.injected
            state = State()
            return injected
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
            _ = try await base.send(request)
            return try await base.send(request)
        case .interrupt:
            throw TransportError("simulated fault: the connection is down")
        }
    }
}
