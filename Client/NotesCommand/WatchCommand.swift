import ArgumentParser
import Foundation
import NotesClient

/// `notes watch`: keeps this device in sync until Ctrl-C (see ``NotesClient/watch(_:onEvent:)``).
struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Keep this device in sync until interrupted (Ctrl-C).",
        discussion: """
            Syncs at once, then whenever another device of the account changes a note (the server answers a \
            waiting request as soon as the change commits), and moments after a `notes` command on this device \
            changes a note. Reconnects with backoff when the server goes away or restarts. Prints a line when it \
            starts, one per sync that sent or received something (a sync that moved nothing prints nothing), and one \
            per failure to reach the server; with --json, one JSON object per line for every sync (those that moved \
            nothing included) and failure. Ctrl-C (or SIGTERM) stops it cleanly: nothing is half-written, and the \
            next sync resumes where it stopped. To keep it running, see README (a systemd user unit).
            """)

    @OptionGroup var options: GlobalOptions

    @Option(name: .long, help: ArgumentHelp("Seconds each waiting request asks the server to hold (1-25).", valueName: "seconds"))
    var wait: Int = 20

    func validate() throws {
        guard (1...25).contains(wait) else { throw ValidationError("--wait must be 1...25 seconds") }
    }

    func run() async throws {
        let client = try options.openClient()
        let json = options.json
        let stop = StopSignals()
        defer { stop.restore() }
        let options = WatchOptions(waitSeconds: wait)
        if !json, let account = try client.account() {
            Console.out("Watching \(account.username)'s notes on \(account.serverURL) (Ctrl-C stops).")
            Console.flush()
        }
        let watch = Task {
            try await client.watch(options) { event in Self.print(event, json: json) }
        }
        stop.onSignal { watch.cancel() }
        try await watch.value
        if json {
            Console.out(#"{"event":"stopped"}"#)
        } else {
            Console.out("Stopped.")
        }
    }

    static func print(_ event: WatchEvent, json: Bool) {
        let time = LocalTime.clock(Int64(Date().timeIntervalSince1970 * 1000))
        switch event {
        case .synced(let report, let reasons):
            if json {
                var line = JSONLine()
                line["event"] = "synced"
                line["reasons"] = reasons.map(\.rawValue)
                line["pushed"] = report.pushed
                line["pulled"] = report.pulled
                line["applied"] = report.applied
                line["conflicts"] = report.conflicts
                line["pending"] = report.pending
                line["refused"] = report.refused.count
                Console.out(line.text)
            } else if movedSomething(report) {
                let received = report.applied == 0 ? "nothing new" : plural(report.applied, "note") + " received"
                var text = "\(time) synced: \(pushSummary(report)); \(received)"
                if !report.refused.isEmpty { text += "; \(plural(report.refused.count, "note")) refused by the server (see `notes sync`)" }
                Console.out(text + ".")
            }
        case .disconnected(let error, let delay):
            let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
            if json {
                var line = JSONLine()
                line["event"] = "disconnected"
                line["code"] = error.code.rawValue
                line["message"] = error.message
                line["retryIn"] = (seconds * 1000).rounded() / 1000
                Console.out(line.text)
            } else {
                Console.out("\(time) \(error.message) Retrying in \(String(format: "%.1f", seconds)) s.")
            }
        }
        Console.flush()
    }

    /// Whether a sync sent or received something: a change the server took or refused, or a note added or changed
    /// here. Only those get a line on a terminal (its own pushes coming back, and wake-ups that find nothing, do not).
    static func movedSomething(_ report: SyncReport) -> Bool {
        report.pushed > 0 || !report.failures.isEmpty || report.applied > 0
    }
}

/// One JSON object on one line, keys sorted.
struct JSONLine {
    private var fields: [String: any Encodable & Sendable] = [:]

    subscript(key: String) -> (any Encodable & Sendable)? {
        get { fields[key] }
        set { fields[key] = newValue }
    }

    var text: String {
        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        struct Object: Encodable {
            let fields: [String: any Encodable & Sendable]
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Key.self)
                for (key, value) in fields { try container.encode(value, forKey: Key(stringValue: key)) }
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(Object(fields: fields))).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

/// SIGINT and SIGTERM, delivered to a handler instead of killing the process, until ``restore()``.
final class StopSignals: @unchecked Sendable {
    /// Touched only by the command's task (``onSignal(_:)``, then ``restore()``).
    private var sources: [any DispatchSourceSignal] = []

    init() {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
    }

    func onSignal(_ handler: @escaping @Sendable () -> Void) {
        for number in [SIGINT, SIGTERM] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: handler)
            source.resume()
            sources.append(source)
        }
    }

    func restore() {
        for source in sources { source.cancel() }
        sources = []
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}
