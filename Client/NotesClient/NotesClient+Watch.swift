import Foundation
import Synchronization

extension NotesClient {
    /// Keeps this device in sync until the calling task is cancelled: syncs at once, then whenever the server's
    /// feed says the account changed (a waiting pull, `wait=`), and moments after another `notes` process changes
    /// the local store; reconnects with backoff when the server goes away. See ``Watcher`` for how.
    ///
    /// Cancelling it is clean: every local write is a transaction, and an interrupted sync resumes at the next one.
    ///
    /// - Parameter onEvent: Called after each sync and each failure to reach the server (from another task).
    /// - Throws: `not_signed_in`, `signed_out_by_server` (the session was revoked; the notes are kept), `storage`,
    ///   `data_directory`. Unreachable servers and server errors are reported through `onEvent` and retried.
    public func watch(_ options: WatchOptions = WatchOptions(), onEvent: @escaping @Sendable (WatchEvent) -> Void) async throws(NotesError) {
        let random = Mutex<any RandomNumberGenerator & Sendable>(environment.random)
        let watcher = Watcher(
            engine: engine, store: store, options: options, sleep: environment.sleep,
            jitter: { random.withLock { generator in Double.random(in: 0...1, using: &generator) } }, onEvent: onEvent
        )
        try await watcher.run()
    }
}
