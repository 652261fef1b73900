import Foundation
import MiniFlake
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The seed for property tests: `MINIFLAKE_TEST_SEED` when set (to replay a failure), else a fresh one.
func propertySeed() -> UInt64 {
    if let text = ProcessInfo.processInfo.environment["MINIFLAKE_TEST_SEED"], let seed = UInt64(text) {
        return seed
    }
    return UInt64.random(in: .min ... .max)
}

/// The comment attached to every expectation of a property test: how to replay it.
func replay(_ seed: UInt64) -> Comment {
    "replay with MINIFLAKE_TEST_SEED=\(seed)"
}

/// Runs `body(index)` on `count` new POSIX threads and joins them all (so their thread-exit destructors have run).
func runOnNewThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    final class Work {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }
    #if canImport(Darwin)
    var threads: [pthread_t?] = []
    #else
    var threads: [pthread_t] = []
    #endif
    for index in 0..<count {
        let work = Unmanaged.passRetained(Work { body(index) }).toOpaque()
        #if canImport(Darwin)
        var thread: pthread_t?
        #else
        var thread = pthread_t()
        #endif
        let status = pthread_create(&thread, nil, { raw in
            #if canImport(Darwin)
            Unmanaged<Work>.fromOpaque(raw).takeRetainedValue().run()
            #else
            Unmanaged<Work>.fromOpaque(raw!).takeRetainedValue().run()
            #endif
            return nil
        }, work)
        precondition(status == 0, "pthread_create failed: \(status)")
        threads.append(thread)
    }
    for thread in threads {
        #if canImport(Darwin)
        pthread_join(thread!, nil)
        #else
        pthread_join(thread, nil)
        #endif
    }
}
