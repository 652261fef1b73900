import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One of the daemon's listening sockets: the sync port, or the metrics endpoint.
enum Listener: Int, Sendable, Comparable {
    /// The sync port (`--host`, `--port`).
    case sync = 0
    /// The Prometheus endpoint (`--metrics-address`).
    case metrics = 1

    /// How a message names it: `address` for the sync port, `metrics address` for the other.
    var name: String {
        switch self {
        case .sync: "address"
        case .metrics: "metrics address"
        }
    }

    static func < (lhs: Listener, rhs: Listener) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `HOST:PORT`, or `[HOST]:PORT` for an IPv6 host.
    static func shown(host: String, port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// A listener that could not be bound: one human sentence naming the listener and its address
/// (`metrics address 127.0.0.1:9464 is in use`), which `notesyncd` prints as its one stderr line before exiting 1.
public struct ListenerError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }

    /// The error to report when starting `listener` at `address` threw `error` before it was bound: a bind's
    /// failure (the address in use, not this machine's, or a privileged port) or an unknown host becomes a sentence
    /// naming both; anything else (a database that cannot be reached first) is returned unchanged.
    static func naming(_ error: any Error, listener: Listener, address: String) -> any Error {
        if let error = error as? IOError {
            switch error.errnoCode {
            case EADDRINUSE: return ListenerError("\(listener.name) \(address) is in use")
            case EADDRNOTAVAIL: return ListenerError("cannot listen on \(listener.name) \(address): not an address of this machine")
            case EACCES: return ListenerError("cannot listen on \(listener.name) \(address): permission denied")
            default: return error
            }
        }
        if error is SocketAddressError || error is SocketAddressError.UnknownHost {
            return ListenerError("cannot listen on \(listener.name) \(address): unknown host")
        }
        return error
    }
}

/// Holds back the daemon's ready lines until every listener is bound, then hands them on in listener order (the
/// sync port's `notesyncd listening on ...` first). A supervisor that waits for the ready line never takes a
/// daemon whose second listener failed for a running one.
final class ReadinessGate: Sendable {
    private struct State {
        var lines: [Listener: String] = [:]
        var announced = false
    }

    private let expected: Set<Listener>
    private let state = Mutex(State())
    private let onReady: @Sendable (String) -> Void

    /// - Parameters:
    ///   - expected: The listeners the daemon opens.
    ///   - onReady: Called once per listener, in listener order, after the last one is bound.
    init(expected: Set<Listener>, onReady: @escaping @Sendable (String) -> Void) {
        self.expected = expected
        self.onReady = onReady
    }

    /// `listener` is bound; `line` is what to print for it. The last one to arrive releases every line.
    func bound(_ listener: Listener, line: String) {
        let ready: [String]? = state.withLock { state in
            state.lines[listener] = line
            guard !state.announced, Set(state.lines.keys) == expected else { return nil }
            state.announced = true
            return state.lines.sorted { $0.key < $1.key }.map(\.value)
        }
        for line in ready ?? [] { onReady(line) }
    }

    /// Whether `listener` has been bound.
    func isBound(_ listener: Listener) -> Bool {
        state.withLock { $0.lines[listener] != nil }
    }
}

/// Runs an application serving one listener, naming the listener and its address when it cannot be bound
/// (``ListenerError``): the metrics endpoint, a service of the daemon's application.
struct ListenerService<App: ApplicationProtocol>: Service {
    let app: App
    let listener: Listener
    let address: String
    let gate: ReadinessGate

    func run() async throws {
        do {
            try await app.run()
        } catch {
            throw gate.isBound(listener) ? error : ListenerError.naming(error, listener: listener, address: address)
        }
    }
}

/// The `notesyncd` application: Hummingbird's, with the sync port's bind failure named (``ListenerError``) when it
/// runs. Every other requirement is the wrapped application's, so `app.test(.router)` and `.live` see it unchanged.
public struct NotesyncdApplication<Base: ApplicationProtocol>: ApplicationProtocol {
    public typealias Responder = Base.Responder
    let base: Base
    let address: String
    let gate: ReadinessGate

    public var responder: Responder { get async throws { try await base.responder } }
    public var server: HTTPServerBuilder { base.server }
    public var eventLoopGroup: any EventLoopGroup { base.eventLoopGroup }
    public var configuration: ApplicationConfiguration { base.configuration }
    public var logger: Logger { base.logger }
    public var services: [any Service] { base.services }
    public var processesRunBeforeServerStart: [@Sendable () async throws -> Void] { base.processesRunBeforeServerStart }
    @Sendable public func onServerRunning(_ channel: any Channel) async { await base.onServerRunning(channel) }

    public func run() async throws {
        do {
            try await base.run()
        } catch {
            throw gate.isBound(.sync) ? error : ListenerError.naming(error, listener: .sync, address: address)
        }
    }
}
