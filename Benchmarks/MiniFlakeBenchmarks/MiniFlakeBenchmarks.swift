import Benchmark
import Dispatch
import Foundation
import MiniFlake

/// IDs made per benchmark iteration. Each iteration starts a fresh generator, so 10,000 IDs borrow at most
/// 3 ms: far inside the 100 ms drift bound, so no iteration ever sleeps and the figures measure generation, not
/// the format's 4096-IDs-per-millisecond ceiling. Divide the per-iteration time by 10,000 for ns per ID
/// (µs per iteration / 10 = ns per ID).
let idsPerIteration = 10_000

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        timeUnits: .microseconds,
        warmupIterations: 20,
        maxDuration: .seconds(3),
        maxIterations: 5_000
    )

    Benchmark("UUID() baseline") { benchmark in
        for _ in 0..<idsPerIteration {
            blackHole(UUID())
        }
    }

    Benchmark("FlakeMaker coarse") { benchmark in
        var maker = try FlakeMaker(instance: 1, clock: SystemFlakeClock.coarse)
        for _ in 0..<idsPerIteration {
            blackHole(try maker.next())
        }
    }

    Benchmark("FlakeMaker precise") { benchmark in
        var maker = try FlakeMaker(instance: 1, clock: SystemFlakeClock.precise)
        for _ in 0..<idsPerIteration {
            blackHole(try maker.next())
        }
    }

    Benchmark("FlakeGenerator uncontended") { benchmark in
        let generator = try FlakeGenerator(instance: 1)
        for _ in 0..<idsPerIteration {
            blackHole(try generator.next())
        }
    }

    Benchmark("FlakeGenerator 2 threads") { benchmark in
        // Two dispatch workers share one generator, 5,000 IDs each: 10,000 in all.
        let generator = try FlakeGenerator(instance: 1)
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            for _ in 0..<(idsPerIteration / 2) {
                blackHole(try? generator.next())
            }
        }
    }

    Benchmark("ThreadFlake.next()") { benchmark in
        // The thread's maker lives on across iterations; the unmeasured pause lets the clock catch up with the
        // ~2.5 ms this iteration borrowed, so the drift bound never makes it sleep.
        benchmark.startMeasurement()
        for _ in 0..<idsPerIteration {
            blackHole(try ThreadFlake.next())
        }
        benchmark.stopMeasurement()
        usleep(3_000)
    }
}
