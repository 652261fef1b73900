import NoteSyncProtocol
import NoteSyncServer
import NotesClient
import Synchronization

/// Hands requests straight to the server library's dispatcher (``SyncAPI/handle(_:)``), the code the HTTP router
/// calls, without sockets. The dispatcher can be swapped, as a restarted daemon would be.
public final class InProcessTransport: SyncTransport {
    private let api: Mutex<SyncAPI>

    public init(api: SyncAPI) { self.api = Mutex(api) }

    /// Replaces the dispatcher.
    public func replace(with api: SyncAPI) { self.api.withLock { $0 = api } }

    public func send(_ request: WireRequest) async throws -> WireResponse {
        let api = self.api.withLock { $0 }
        return await api.handle(request)
    }
}
