import Foundation
import Synchronization
import Testing

@testable import MiniFlake

@Suite("Uniqueness across threads")
struct SharedGeneratorTests {
    @Test("8 threads x 50k IDs from one FlakeGenerator on the system clock are unique and each thread's are increasing")
    func sharedGenerator() throws {
        let generator = try FlakeGenerator(instance: 321)
        let results = Mutex<[[FlakeID]]>([])
        let failures = Atomic<Int>(0)
        runOnNewThreads(8) { _ in
            var ids: [FlakeID] = []
            ids.reserveCapacity(50_000)
            for _ in 0..<50_000 {
                do {
                    ids.append(try generator.next())
                } catch {
                    failures.add(1, ordering: .relaxed)
                }
            }
            results.withLock { $0.append(ids) }
        }
        let perThread = results.withLock { $0 }
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(perThread.count == 8)
        for ids in perThread {
            #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 })
        }
        let all = perThread.flatMap { $0 }
        #expect(all.count == 400_000)
        #expect(Set(all).count == 400_000)
        #expect(all.allSatisfy { $0.instance == 321 })
        #expect(generator.lastIssued == all.max())
    }

    @Test("A fresh pool leases all 1024 numbers once each, then throws .instancesExhausted")
    func poolExhaustion() throws {
        let pool = FlakeInstancePool()
        var random = SplitMix64(seed: 42)
        var leased: [Int] = []
        for _ in 0...FlakeID.maxInstance {
            leased.append(try pool.lease(using: &random))
        }
        #expect(Set(leased) == Set(0...FlakeID.maxInstance))
        #expect(leased != Array(0...FlakeID.maxInstance))  // random order
        #expect(pool.leasedCount == 1024)
        #expect(throws: FlakeError.instancesExhausted) { try pool.lease() }
        pool.release(517)
        #expect(pool.leasedCount == 1023)
        #expect(try pool.lease() == 517)
        #expect(throws: FlakeError.instancesExhausted) { try pool.lease(using: &random) }
    }

    @Test("Pool leases are random but replayable from a seed")
    func poolSeeded() throws {
        var first = SplitMix64(seed: 7)
        var second = SplitMix64(seed: 7)
        let a = FlakeInstancePool()
        let b = FlakeInstancePool()
        let fromA = try (0..<20).map { _ in try a.lease(using: &first) }
        let fromB = try (0..<20).map { _ in try b.lease(using: &second) }
        #expect(fromA == fromB)
        #expect(Set(fromA).count == 20)
        for instance in fromA { a.release(instance) }
        #expect(a.leasedCount == 0)
    }
}

/// Tests that use the shared pool run one at a time, so `leasedCount` is theirs alone.
@Suite("ThreadFlake", .serialized)
struct ThreadFlakeTests {
    @Test("Per-thread generators on 8 threads give unique IDs and return their instances on exit")
    func perThread() throws {
        let pool = FlakeInstancePool.shared
        let before = pool.leasedCount
        let results = Mutex<[[FlakeID]]>([])
        let leasedWhileRunning = Atomic<Int>(0)
        let started = Atomic<Int>(0)
        runOnNewThreads(8) { _ in
            var ids: [FlakeID] = []
            for _ in 0..<50_000 {
                if let id = try? ThreadFlake.next() { ids.append(id) }
            }
            // Hold the thread until all 8 have leased, to see them all leased at once.
            started.add(1, ordering: .sequentiallyConsistent)
            while started.load(ordering: .sequentiallyConsistent) < 8 { sched_yield() }
            _ = leasedWhileRunning.max(pool.leasedCount, ordering: .sequentiallyConsistent)
            results.withLock { $0.append(ids) }
        }
        let perThread = results.withLock { $0 }
        let all = perThread.flatMap { $0 }
        #expect(all.count == 400_000)
        #expect(Set(all).count == 400_000)
        #expect(Set(all.map(\.instance)).count == 8)
        for ids in perThread {
            #expect(Set(ids.map(\.instance)).count == 1)
            #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 })
        }
        #expect(leasedWhileRunning.load(ordering: .sequentiallyConsistent) >= before + 8)
        #expect(pool.leasedCount == before)
    }

    @Test("Thread.current.nextFlakeID() uses the thread's generator")
    func threadExtension() throws {
        let before = FlakeInstancePool.shared.leasedCount
        let ids = Mutex<[FlakeID]>([])
        runOnNewThreads(1) { _ in
            let a = try? Thread.current.nextFlakeID()
            let b = try? ThreadFlake.next()
            if let a, let b { ids.withLock { $0 = [a, b] } }
        }
        let pair = ids.withLock { $0 }
        #expect(pair.count == 2)
        #expect(pair.first?.instance == pair.last?.instance)
        #expect(pair[0] < pair[1])
        #expect(FlakeInstancePool.shared.leasedCount == before)
    }
}
