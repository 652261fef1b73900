import CoreMetrics
import Foundation
import Hummingbird
import Logging
import NIOCore
import NoteSyncProtocol
import Prometheus
import Synchronization

/// The daemon's Prometheus metrics (swift-metrics handles over a swift-prometheus registry of its own; nothing is
/// bootstrapped globally, so several daemons in one test process keep separate counts).
///
/// | metric | type | labels |
/// | --- | --- | --- |
/// | `notesyncd_http_requests_total` | counter | `route` (an endpoint name, or `unmatched`), `status` |
/// | `notesyncd_http_request_duration_seconds` | histogram | `route` |
/// | `notesyncd_push_changes_total` | counter | `status` (a change result's status: accepted, merged, ..., rejected) |
/// | `notesyncd_notes_pulled_total` | counter | |
/// | `notesyncd_sign_ins_total` | counter | `outcome`: success, failure, throttled, disabled, invalid |
/// | `notesyncd_sign_in_throttled_total` | counter | (sign-ins refused by the throttle) |
/// | `notesyncd_accounts`, `notesyncd_notes`, `notesyncd_sessions` | gauge | read from the store at each scrape |
/// | `notesyncd_database_bytes` | gauge | read from the store at each scrape |
/// | `notesyncd_waiting_pulls` | gauge | waiting pulls held by this daemon, read from its feed at each scrape |
///
/// Only built when the daemon has `--metrics-address`; without it ``SyncAPI`` holds nil and measures nothing.
public final class SyncMetrics: Sendable {
    /// What `GET /metrics` emits.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    /// Counters by name and labels, made once each (a registry lookup takes a lock and builds strings).
    private let counters = Mutex<[CounterKey: CoreMetrics.Counter]>([:])
    private let timers: [String: CoreMetrics.Timer]
    private let unmatchedTimer: CoreMetrics.Timer
    private let notesPulled: CoreMetrics.Counter
    private let throttled: CoreMetrics.Counter
    private let accounts: CoreMetrics.Gauge
    private let notes: CoreMetrics.Gauge
    private let sessions: CoreMetrics.Gauge
    private let databaseBytes: CoreMetrics.Gauge
    private let waitingPulls: CoreMetrics.Gauge

    private struct CounterKey: Hashable {
        var name: String
        var first: String
        var second: String
    }

    public init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
        ]
        self.registry = registry
        self.factory = factory
        var timers: [String: CoreMetrics.Timer] = [:]
        for endpoint in Endpoint.allCases {
            timers[endpoint.rawValue] = CoreMetrics.Timer(
                label: "notesyncd_http_request_duration_seconds", dimensions: [("route", endpoint.rawValue)], factory: factory)
        }
        self.timers = timers
        unmatchedTimer = CoreMetrics.Timer(
            label: "notesyncd_http_request_duration_seconds", dimensions: [("route", Self.unmatched)], factory: factory)
        notesPulled = CoreMetrics.Counter(label: "notesyncd_notes_pulled_total", factory: factory)
        throttled = CoreMetrics.Counter(label: "notesyncd_sign_in_throttled_total", factory: factory)
        accounts = CoreMetrics.Gauge(label: "notesyncd_accounts", factory: factory)
        notes = CoreMetrics.Gauge(label: "notesyncd_notes", factory: factory)
        sessions = CoreMetrics.Gauge(label: "notesyncd_sessions", factory: factory)
        databaseBytes = CoreMetrics.Gauge(label: "notesyncd_database_bytes", factory: factory)
        waitingPulls = CoreMetrics.Gauge(label: "notesyncd_waiting_pulls", factory: factory)
    }

    /// The route label of requests that matched no endpoint.
    public static let unmatched = "unmatched"

    private func counter(_ name: String, _ labels: (String, String), _ more: (String, String)? = nil) -> CoreMetrics.Counter {
        let key = CounterKey(name: name, first: labels.1, second: more?.1 ?? "")
        return counters.withLock { counters in
            if let counter = counters[key] { return counter }
            var dimensions = [labels]
            if let more { dimensions.append(more) }
            let counter = CoreMetrics.Counter(label: name, dimensions: dimensions, factory: factory)
            counters[key] = counter
            return counter
        }
    }

    /// One answered request: its route (an endpoint's name or ``unmatched``), status and duration.
    func request(route: String, status: Int, duration: Duration) {
        counter("notesyncd_http_requests_total", ("route", route), ("status", String(status))).increment()
        let nanoseconds = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        (timers[route] ?? unmatchedTimer).recordNanoseconds(nanoseconds)
    }

    /// A push's results, one count per change by status.
    func push(_ results: [ChangeResult]) {
        guard let first = results.first?.status else { return }
        // Most batches are all one status: one lookup for the run.
        var status = first
        var run = 0
        for result in results {
            if result.status == status {
                run += 1
            } else {
                counter("notesyncd_push_changes_total", ("status", status.rawValue)).increment(by: run)
                status = result.status
                run = 1
            }
        }
        counter("notesyncd_push_changes_total", ("status", status.rawValue)).increment(by: run)
    }

    func pulled(_ count: Int) {
        if count > 0 { notesPulled.increment(by: count) }
    }

    /// A sign-in's outcome: `success`, or the failure's code mapped to `failure`, `throttled`, `disabled`, `invalid`.
    func signIn(failure: APIErrorCode?) {
        let outcome: String
        switch failure {
        case nil: outcome = "success"
        case .invalidCredentials?: outcome = "failure"
        case .tooManyAttempts?:
            outcome = "throttled"
            throttled.increment()
        case .accountDisabled?: outcome = "disabled"
        default: outcome = "invalid"
        }
        counter("notesyncd_sign_ins_total", ("outcome", outcome)).increment()
    }

    /// Reads the store's counts and the feed's waiters into the gauges, then the exposition text. A store that fails
    /// to answer leaves its gauges as they were (the request counters still answer).
    func exposition(store: any NoteStore, feed: ChangeFeed?, logger: Logger) async -> [UInt8] {
        if let feed { waitingPulls.record(feed.count) }
        if let store = store as? any OperatorStore {
            do {
                let statistics = try await store.statistics()
                accounts.record(statistics.accounts)
                notes.record(statistics.notes)
                sessions.record(statistics.sessions)
                databaseBytes.record(statistics.databaseBytes)
            } catch {
                logger.warning("metrics: reading the store's counts failed", metadata: ["error": "\(error)"])
            }
        }
        return registry.emitToBuffer()
    }
}

/// The metrics listener: `GET /metrics` (Prometheus text format 0.0.4) on its own address, nothing else.
func buildMetricsApplication(
    metrics: SyncMetrics, store: any NoteStore, feed: ChangeFeed?, address: MetricsAddress, logger: Logger,
    onListening: @escaping @Sendable (String) -> Void
) -> some ApplicationProtocol {
    let router = Router()
    router.get("/metrics") { _, _ -> Response in
        let bytes = await metrics.exposition(store: store, feed: feed, logger: logger)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
    var quiet = logger
    quiet.logLevel = max(logger.logLevel, .warning)
    return Application(
        router: router,
        configuration: ApplicationConfiguration(address: .hostname(address.host, port: address.port), serverName: "notesyncd-metrics"),
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? address.port
            logger.info("metrics listening", metadata: ["host": "\(address.host)", "port": "\(port)"])
            onListening("notesyncd metrics on http://\(Listener.shown(host: address.host, port: port))/metrics")
        },
        logger: quiet
    )
}
