import Logging
import Synchronization

/// 2026-11-22T00:00:00Z, where test and simulation clocks start.
public let testEpoch: Int64 = 1_795_305_600_000

extension Logger {
    /// A logger that shows errors only.
    public static func quiet(_ label: String, level: Logger.Level = .error) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

/// A value behind a mutex, in a class so concurrent closures can share it.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    public init(_ value: Value) { mutex = Mutex(value) }
    public func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T { try mutex.withLock { try body(&$0) } }
}
