import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Per-thread generators, like the original MiniFlake's `Thread.current.nextFlakeID()`.
///
/// Each thread that calls ``next()`` gets its own ``FlakeMaker`` on ``SystemFlakeClock/coarse`` with an instance
/// number leased from ``FlakeInstancePool/shared``, kept in a `pthread_key` slot (about 2 ns to reach, no lock).
/// The number goes back to the pool when the thread exits.
///
/// Use it from threads you own. In async code a task may resume on another thread after any `await`, so
/// "this thread's generator" means nothing there: share a ``FlakeGenerator`` instead. Calling ``next()`` from a
/// task is still correct (every thread's maker has its own instance), but leases a number for each pool thread
/// it lands on.
public enum ThreadFlake {
    @usableFromInline typealias Maker = FlakeMaker<SystemFlakeClock>

    /// The slot holding this thread's `UnsafeMutablePointer<Maker>`.
    @usableFromInline static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, releaseThreadMaker)
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// The next ID from this thread's generator, creating it on first use.
    ///
    /// - Throws: ``FlakeError/instancesExhausted`` when a new thread finds all 1024 numbers leased;
    ///   ``FlakeError/timeRangeExhausted`` past 2087.
    @inlinable
    public static func next() throws(FlakeError) -> FlakeID {
        if let slot = pthread_getspecific(key) {
            return try slot.assumingMemoryBound(to: Maker.self).pointee.next()
        }
        return try makeThreadMaker().pointee.next()
    }

    @usableFromInline
    static func makeThreadMaker() throws(FlakeError) -> UnsafeMutablePointer<Maker> {
        let pool = FlakeInstancePool.shared
        let instance = try pool.lease()
        let maker: Maker
        do {
            maker = try Maker(instance: instance, clock: .coarse)
        } catch {
            pool.release(instance)
            throw error
        }
        let slot = UnsafeMutablePointer<Maker>.allocate(capacity: 1)
        slot.initialize(to: maker)
        let status = pthread_setspecific(key, slot)
        precondition(status == 0, "pthread_setspecific failed: \(status)")
        return slot
    }
}

/// The key's destructor: runs as a thread exits, returns its instance number and frees its maker.
#if canImport(Darwin)
private func releaseThreadMaker(_ raw: UnsafeMutableRawPointer) {
    releaseThreadMaker(slot: raw)
}
#else
private func releaseThreadMaker(_ raw: UnsafeMutableRawPointer?) {
    guard let raw else { return }
    releaseThreadMaker(slot: raw)
}
#endif

private func releaseThreadMaker(slot raw: UnsafeMutableRawPointer) {
    let slot = raw.assumingMemoryBound(to: ThreadFlake.Maker.self)
    let instance = slot.pointee.instance
    slot.deinitialize(count: 1)
    slot.deallocate()
    FlakeInstancePool.shared.release(instance)
}

extension Thread {
    /// The next ID from this thread's generator (see ``ThreadFlake``), like the original MiniFlake.
    ///
    /// Call it on `Thread.current` only.
    ///
    /// - Throws: a ``FlakeError``, as ``ThreadFlake/next()``.
    public func nextFlakeID() throws -> FlakeID {
        precondition(self == Thread.current, "nextFlakeID() must be called on Thread.current")
        return try ThreadFlake.next()
    }
}
