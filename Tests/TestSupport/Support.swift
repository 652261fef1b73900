import Foundation
import Logging
import Synchronization

/// 2026-11-22T00:00:00Z, where test clocks start.
public let testEpoch: Int64 = 1_795_305_600_000

extension Logger {
    /// A logger that shows errors only.
    public static func quiet(_ label: String, level: Logger.Level = .error) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

/// Seeds for property tests: `NOTESYNC_SEED=<n>` replays one seed, else `count` seeds from a fixed base.
public func propertySeeds(_ count: Int, base: UInt64 = 0x5EED) -> [UInt64] {
    if let text = ProcessInfo.processInfo.environment["NOTESYNC_SEED"], let seed = UInt64(text) { return [seed] }
    return (0..<UInt64(count)).map { base &+ $0 }
}

/// A fresh directory under the system's temporary directory, named after `label`.
public func makeTemporaryDirectory(_ label: String) throws -> URL {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flakenotes-\(label)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

/// A fresh temporary directory, removed when `body` returns.
public func withTemporaryDirectory<T>(_ label: String = "test", _ body: (URL) async throws -> T) async throws -> T {
    let directory = try makeTemporaryDirectory(label)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// A value behind a mutex, in a class so concurrent closures can share it.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    public init(_ value: Value) { mutex = Mutex(value) }
    public func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T { try mutex.withLock { try body(&$0) } }
}
