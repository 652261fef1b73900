// The cost of notesyncd's metrics (--metrics-address) on the push path, measured in process so that neither the
// disk's fsync latency nor another build on the machine decides the result. Build in release:
//   swift run -c release --scratch-path .build-bench MetricsCost [pushes-per-block] [blocks]
//
// Two `SyncAPI`s over two in-memory SQLite stores, one counting into a `SyncMetrics`, one with none (the daemon
// without --metrics-address). Blocks of single-note pushes alternate between them (off, on, off, on, ...), and the
// best block of each is compared: the cost of counting a request, its status, its latency and its push results,
// against everything else an in-process push costs (decoding, the planner, the SQLite transaction). A real daemon
// also pays HTTP and an fsync per push, so its relative cost is lower still.
import Dispatch
import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer

let pushesPerBlock = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 2000 : 2000
let blocks = CommandLine.arguments.count > 2 ? Int(CommandLine.arguments[2]) ?? 15 : 15
let logger = Logger(label: "metrics-cost", factory: { _ in SwiftLogNoOpLogHandler() })

struct Side {
    let api: SyncAPI
    let token: String
    let origin: FlakeID
    var next: Int64 = 1

    static func make(metrics: SyncMetrics?, instance: Int) async throws -> Side {
        let store = try SQLiteNoteStore.inMemory()
        let generator = try FlakeGenerator(instance: instance, clock: SystemFlakeClock.coarse)
        let services = ServerServices(
            ServiceContext(store: store, clock: SystemFlakeClock.coarse, mintID: { try generator.next() }, logger: logger),
            configuration: ServiceConfiguration(passwords: PasswordHashing(hash: { $0 }, verify: { $0 == $1 }, isSlow: false), signUpPolicy: .open))
        let api = SyncAPI(services: services, logger: logger, metrics: metrics)
        let encoder = WireJSON.encoder()
        _ = await api.handle(WireRequest(.signUp, body: try encoder.encode(SignUpRequest(username: "bench", password: "bench-password"))))
        let origin = try FlakeID(validating: 77)
        let answer = await api.handle(
            WireRequest(.signIn, body: try encoder.encode(SignInRequest(username: "bench", password: "bench-password", deviceName: nil, origin: origin))))
        let token = try WireJSON.decoder().decode(SignInResponse.self, from: answer.body).token
        return Side(api: api, token: token, origin: origin)
    }

    /// Nanoseconds for `count` single-note pushes.
    mutating func block(_ count: Int) async throws -> UInt64 {
        var bodies: [Data] = []
        for _ in 0..<count {
            let id = try FlakeID(validating: 1_000_000 + next)
            next += 1
            let change = NoteChange(clientID: id, origin: origin, serverID: nil, editID: id, text: String(repeating: "x", count: 200), deleted: false)
            bodies.append(try WireJSON.encoder().encode(PushRequest(changes: [change])))
        }
        let start = DispatchTime.now().uptimeNanoseconds
        for body in bodies {
            let answer = await api.handle(WireRequest(.push, bearerToken: token, body: body))
            precondition(answer.status == 200, "push answered \(answer.status)")
        }
        return DispatchTime.now().uptimeNanoseconds - start
    }
}

func measure() async throws {
    let metrics = SyncMetrics()
    var off = try await Side.make(metrics: nil, instance: 1)
    // METRICS_COST_AA=1: both sides without metrics, to see the difference two identical sides show (a control).
    let control = ProcessInfo.processInfo.environment["METRICS_COST_AA"] == "1"
    var on = try await Side.make(metrics: control ? nil : metrics, instance: 2)
    var offTimes: [Double] = []
    var onTimes: [Double] = []
    _ = try await off.block(200)  // warm-up
    _ = try await on.block(200)
    for index in 0..<blocks {
        // Alternate which side goes first, so a slow moment on the machine falls on both.
        if index % 2 == 0 {
            offTimes.append(Double(try await off.block(pushesPerBlock)) / Double(pushesPerBlock))
            onTimes.append(Double(try await on.block(pushesPerBlock)) / Double(pushesPerBlock))
        } else {
            onTimes.append(Double(try await on.block(pushesPerBlock)) / Double(pushesPerBlock))
            offTimes.append(Double(try await off.block(pushesPerBlock)) / Double(pushesPerBlock))
        }
    }
    let bestOff = offTimes.min()!, bestOn = onTimes.min()!
    let medianOff = offTimes.sorted()[offTimes.count / 2], medianOn = onTimes.sorted()[onTimes.count / 2]
    print("in-process single-note push, \(blocks) alternated blocks of \(pushesPerBlock):")
    print(String(format: "  metrics off: best %.2f µs, median %.2f µs", bestOff / 1000, medianOff / 1000))
    print(String(format: "  metrics on:  best %.2f µs, median %.2f µs", bestOn / 1000, medianOn / 1000))
    print(String(format: "  on / off: best %.3f, median %.3f; cost per push %.2f µs (best)", bestOn / bestOff, medianOn / medianOff, (bestOn - bestOff) / 1000))
    let exposition = metrics.registry.emitToString()
    print(exposition.split(separator: "\n").filter { $0.hasPrefix("notesyncd_http_requests_total") || $0.hasPrefix("notesyncd_push_changes_total") }.joined(separator: "\n"))
}

try await measure()
