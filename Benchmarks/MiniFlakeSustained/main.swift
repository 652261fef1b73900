// Sustained generation and a plain-loop cross-check of the burst figures. Build in release:
//   swift run -c release --scratch-path .build-bench MiniFlakeSustained [count]
import Dispatch
import Foundation
import MiniFlake

@inline(never)
func consume(_ id: FlakeID) {
    sink &+= id.rawValue
}
nonisolated(unsafe) var sink: Int64 = 0

func nanoseconds(_ body: () throws -> Void) rethrows -> UInt64 {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return DispatchTime.now().uptimeNanoseconds - start
}

/// Best of `rounds` bursts of `burst` IDs from a fresh maker, in ns per ID.
func burst<Clock: FlakeClock>(_ clock: Clock, rounds: Int = 200, burst: Int = 10_000) throws -> Double {
    var best = UInt64.max
    for _ in 0..<rounds {
        var maker = try FlakeMaker(instance: 1, clock: clock)
        let elapsed = try nanoseconds {
            for _ in 0..<burst { consume(try maker.next()) }
        }
        best = min(best, elapsed)
    }
    return Double(best) / Double(burst)
}

func uuidBurst(rounds: Int = 200, burst: Int = 10_000) -> Double {
    var best = UInt64.max
    for _ in 0..<rounds {
        let elapsed = nanoseconds {
            for _ in 0..<burst { sink &+= Int64(UUID().uuid.0) }
        }
        best = min(best, elapsed)
    }
    return Double(best) / Double(burst)
}

let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 20_000_000
let uuid = uuidBurst()
let coarse = try burst(SystemFlakeClock.coarse)
let precise = try burst(SystemFlakeClock.precise)
print("Bursts of 10,000 (best of 200): UUID() \(String(format: "%.1f", uuid)) ns, "
    + "FlakeMaker coarse \(String(format: "%.1f", coarse)) ns (\(String(format: "%.1f", uuid / coarse))x faster), "
    + "precise \(String(format: "%.1f", precise)) ns (\(String(format: "%.1f", uuid / precise))x faster)")

// Sustained: one maker, `count` IDs. The format allows 4096 per millisecond, so this takes about
// count / 4,096,000 s, plus the 100 ms head start the drift bound allows.
var maker = try FlakeMaker(instance: 1, clock: SystemFlakeClock.coarse)
var maxAhead: Int64 = .min
var last: FlakeID?
let elapsed = try nanoseconds {
    for index in 0..<count {
        let id = try maker.next()
        consume(id)
        if index & 0xFFFF == 0 || index == count - 1 {
            // How far the ID's time is ahead of the precise clock, read right after it.
            let ahead = id.unixMilliseconds - SystemFlakeClock.precise.unixMilliseconds()
            maxAhead = max(maxAhead, ahead)
            last = id
        }
    }
}
let seconds = Double(elapsed) / 1e9
let floor = Double(count) / 4_096_000
print("Sustained: \(count) IDs in \(String(format: "%.3f", seconds)) s "
    + "(format floor \(String(format: "%.3f", floor)) s; \(String(format: "%.1f", Double(elapsed) / Double(count))) ns/ID; "
    + "\(String(format: "%.2f", Double(count) / seconds / 1e6)) M IDs/s)")
print("Most borrowed time ahead of the clock (sampled every 65,536 IDs and at the last): \(maxAhead) ms "
    + "(bound \(FlakeMaker<SystemFlakeClock>.defaultMaxDriftMilliseconds) ms); last ID \(last.map { "\($0) at \($0.timestamp)" } ?? "-")")
if maxAhead > FlakeMaker<SystemFlakeClock>.defaultMaxDriftMilliseconds {
    print("FAIL: borrowed time ran past the drift bound")
    exit(1)
}
