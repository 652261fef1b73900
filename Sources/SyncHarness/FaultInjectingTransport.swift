import NoteSyncProtocol
import NotesClient
import Synchronization

/// Wraps a transport and injects the faults a plan chooses per request; records every request.
///
/// The client tests script single failures with it; the simulation arms each step's planned faults through it.
public final class FaultInjectingTransport: SyncTransport {
    /// What happens to one request.
    public enum Fault: Sendable {
        /// Fail without sending: the request never reaches the server (connection refused, request lost).
        case refuse
        /// Send it, let the server commit, then lose the answer (connection reset).
        case dropAnswer
        /// Deliver it twice and answer the second answer; both answers are kept for ``takeDuplicates()``.
        case duplicate
        /// Answer this without asking the server.
        case answer(WireResponse)
        /// Ask the server, then answer this instead of its answer.
        case replace(WireResponse)
    }

    /// A request delivered twice and the server's two answers.
    public struct Duplicate: Sendable {
        public var request: WireRequest
        public var first: WireResponse
        public var second: WireResponse
    }

    /// `plan(request, index)`: the fault for a request, where `index` counts requests from the last ``setPlan(_:)``.
    public typealias Plan = @Sendable (WireRequest, Int) -> Fault?

    private struct State {
        var plan: Plan
        var sincePlan = 0
        var requests: [WireRequest] = []
        var duplicates: [Duplicate] = []
    }

    private let base: any SyncTransport
    private let recordsRequests: Bool
    private let state: Mutex<State>

    /// - Parameter recordsRequests: Keep every request for ``requests`` (off for long runs such as the simulation's).
    public init(_ base: any SyncTransport, recordsRequests: Bool = true, plan: @escaping Plan = { _, _ in nil }) {
        self.base = base
        self.recordsRequests = recordsRequests
        state = Mutex(State(plan: plan))
    }

    /// Replaces the plan; request indices count from here.
    public func setPlan(_ plan: @escaping Plan) {
        state.withLock {
            $0.plan = plan
            $0.sincePlan = 0
        }
    }

    /// Every request sent through this transport, in order (none when it does not record them).
    public var requests: [WireRequest] { state.withLock { $0.requests } }

    /// The requests delivered twice since the last call, with both answers.
    public func takeDuplicates() -> [Duplicate] {
        state.withLock { state in
            defer { state.duplicates = [] }
            return state.duplicates
        }
    }

    public func send(_ request: WireRequest) async throws -> WireResponse {
        let (plan, index) = state.withLock { state in
            if recordsRequests { state.requests.append(request) }
            defer { state.sincePlan += 1 }
            return (state.plan, state.sincePlan)
        }
        switch plan(request, index) {
        case nil:
            return try await base.send(request)
        case .refuse:
            throw TransportError("injected fault: the request was lost before the server")
        case .dropAnswer:
            _ = try await base.send(request)
            throw TransportError("injected fault: the answer was lost after the server answered")
        case .duplicate:
            let first = try await base.send(request)
            let second = try await base.send(request)
            state.withLock { $0.duplicates.append(Duplicate(request: request, first: first, second: second)) }
            return second
        case .answer(let response):
            return response
        case .replace(let response):
            _ = try await base.send(request)
            return response
        }
    }
}
