import Foundation
import NotesClient
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Output for the command: stdout buffered and written at once, stderr unbuffered, one-line errors.
enum Console {
    private static let buffer = Mutex<[UInt8]>([])

    /// Queues `text` plus a newline for stdout (written by ``flush()`` or when the buffer grows).
    static func out(_ text: String = "") {
        let full = buffer.withLock { bytes -> Bool in
            bytes.append(contentsOf: text.utf8)
            bytes.append(UInt8(ascii: "\n"))
            return bytes.count > 1 << 16
        }
        if full { flush() }
    }

    /// Writes UTF-8 bytes plus a newline to stdout at once (after anything queued).
    static func out(bytes: [UInt8]) {
        flush()
        var line = bytes
        line.append(UInt8(ascii: "\n"))
        write(line, to: STDOUT_FILENO)
    }

    /// Writes what ``out(_:)`` queued.
    static func flush() {
        let bytes = buffer.withLock { bytes -> [UInt8] in
            defer { bytes.removeAll(keepingCapacity: true) }
            return bytes
        }
        write(bytes, to: STDOUT_FILENO)
    }

    /// `notes: <message>` on stderr.
    static func error(_ message: String) {
        writeError("notes: \(message)\n")
    }

    /// A warning for people: on stderr so that stdout stays the command's result.
    static func warn(_ message: String) {
        writeError("\(message)\n")
    }

    static func writeError(_ text: String) {
        write(Array(text.utf8), to: STDERR_FILENO)
    }

    private static func write(_ bytes: [UInt8], to fd: Int32) {
        var offset = 0
        bytes.withUnsafeBytes { raw in
            while offset < raw.count {
                let written = Foundation.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }

    static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// Prints a value as pretty JSON on stdout.
    static func json(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        out(String(decoding: data, as: UTF8.self))
    }
}

/// Human times in local time: `2026-11-22 10:15`.
enum LocalTime {
    static func format(_ unixMilliseconds: Int64) -> String {
        let parts = local(unixMilliseconds)
        return "\(parts.tm_year + 1900)-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday)) \(pad(parts.tm_hour)):\(pad(parts.tm_min))"
    }

    /// `10:15:30`: a time of day in local time, to the second.
    static func clock(_ unixMilliseconds: Int64) -> String {
        let parts = local(unixMilliseconds)
        return "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec))"
    }

    /// The calendar fields of a time in the local time zone.
    private static func local(_ unixMilliseconds: Int64) -> tm {
        var seconds = time_t(unixMilliseconds / 1000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        return parts
    }

    /// Two digits at least: `07`.
    private static func pad(_ value: Int32) -> String { value < 10 ? "0\(value)" : String(value) }

    /// Formats many times, computing each minute once.
    struct Cache {
        private var minute: Int64 = .min
        private var text = ""

        mutating func format(_ unixMilliseconds: Int64) -> String {
            let value = unixMilliseconds >= 0 ? unixMilliseconds / 60_000 : (unixMilliseconds - 59_999) / 60_000
            if value != minute {
                minute = value
                text = LocalTime.format(unixMilliseconds)
            }
            return text
        }
    }

    /// `just now`, `5 minutes ago`, `yesterday`, `3 days ago` for the last week; the date and time otherwise.
    static func relative(_ unixMilliseconds: Int64, now: Int64) -> String {
        let seconds = (now - unixMilliseconds) / 1000
        switch seconds {
        case ..<0: return format(unixMilliseconds)
        case ..<60: return "just now"
        case ..<3600: return plural(Int(seconds / 60), "minute") + " ago"
        case ..<86_400: return plural(Int(seconds / 3600), "hour") + " ago"
        case ..<172_800: return "yesterday"
        case ..<604_800: return "\(seconds / 86_400) days ago"
        default: return format(unixMilliseconds)
        }
    }
}

/// `1 note`, `2 notes`.
func plural(_ count: Int, _ noun: String, _ plural: String? = nil) -> String {
    "\(count) \(count == 1 ? noun : plural ?? noun + "s")"
}

/// Shows sync progress on stderr when it is a terminal and the sync takes longer than a moment.
final class ProgressLine: Sendable {
    private struct State {
        var shown = false
        var lastDraw: ContinuousClock.Instant?
        /// When the pull's first notes arrived, and how many: the rate counts from there.
        var pullStart: (at: ContinuousClock.Instant, done: Int)?
    }

    private let start = ContinuousClock.now
    private let enabled: Bool
    private let state = Mutex(State())
    /// How long a sync runs before the line appears.
    static let delay = Duration.milliseconds(400)

    init(enabled: Bool = Console.stderrIsTerminal) {
        self.enabled = enabled
    }

    func update(_ progress: SyncProgress) {
        guard enabled else { return }
        let now = ContinuousClock.now
        guard now - start >= Self.delay else { return }
        let drawn = state.withLock { state -> (draw: Bool, pullStart: (at: ContinuousClock.Instant, done: Int)?) in
            if progress.phase == .pulling, state.pullStart == nil, progress.done > 0 { state.pullStart = (now, progress.done) }
            if let last = state.lastDraw, now - last < .milliseconds(100) { return (false, nil) }
            state.lastDraw = now
            state.shown = true
            return (true, state.pullStart)
        }
        guard drawn.draw else { return }
        let text: String
        switch progress.phase {
        case .pushing: text = "Syncing: sending changes \(progress.done)/\(progress.total ?? progress.done)"
        case .pulling: text = Self.pullingText(progress, since: drawn.pullStart, now: now)
        }
        Console.writeError("\r\u{1B}[K\(text)")
    }

    /// `Receiving notes: 52,000 of 200,000 (26%), 13,500/s, about 11 s left`: the rate counts from when the first
    /// notes arrived (`since`), the time left from the rate and the total.
    static func pullingText(_ progress: SyncProgress, since start: (at: ContinuousClock.Instant, done: Int)?, now: ContinuousClock.Instant) -> String {
        let done = progress.done
        var text = "Receiving notes: \(done.formatted())"
        if let total = progress.total, total >= done, total > 0 {
            text += " of \(total.formatted()) (\(done * 100 / total)%)"
        }
        if let start, done > start.done {
            let seconds = Double((now - start.at).components.attoseconds) / 1e18 + Double((now - start.at).components.seconds)
            if seconds > 0.2 {
                let rate = Double(done - start.done) / seconds
                text += ", \(Int(rate).formatted())/s"
                if let total = progress.total, total > done, rate > 0 {
                    text += ", about \(Self.duration(Double(total - done) / rate)) left"
                }
            }
        }
        return text
    }

    /// `8 s`, `2 min 5 s`.
    static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.up))
        return whole < 60 ? "\(whole) s" : "\(whole / 60) min \(whole % 60) s"
    }

    func finish() {
        let shown = state.withLock { state -> Bool in
            defer { state.shown = false }
            return state.shown
        }
        if shown { Console.writeError("\r\u{1B}[K") }
    }

    var callback: @Sendable (SyncProgress) -> Void { { [self] in update($0) } }

    /// Runs `body` (a sync, or a sign-in and its sync) with a progress line's callback, and clears the line before
    /// returning or throwing, so what is printed next starts on a clean line.
    static func around<T>(_ body: (@escaping @Sendable (SyncProgress) -> Void) async throws -> T) async throws -> T {
        let line = ProgressLine()
        defer { line.finish() }
        return try await body(line.callback)
    }
}

/// What the terminal on stdout can show: its size, and whether to colour.
enum Screen {
    /// Whether stdout is a terminal.
    static var isTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// Rows and columns of the terminal on stdout (nil when it is not one or does not say).
    static var size: (rows: Int, columns: Int)? {
        guard isTerminal else { return nil }
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0 else { return nil }
        return (Int(size.ws_row), Int(size.ws_col))
    }

    /// Whether to colour and highlight: a terminal, not `TERM=dumb`, and no `NO_COLOR` (no-color.org).
    static var colors: Bool {
        let environment = ProcessInfo.processInfo.environment
        return isTerminal && environment["NO_COLOR"] == nil && environment["TERM"] != "dumb"
    }

    static let bold = "\u{1B}[1m"
    static let highlight = "\u{1B}[1;33m"
    static let red = "\u{1B}[31m"
    static let green = "\u{1B}[32m"
    static let dim = "\u{1B}[2m"
    static let reset = "\u{1B}[0m"

    /// `text` in `style` when colouring, else as it is.
    static func styled(_ text: String, _ style: String) -> String {
        colors ? style + text + reset : text
    }
}

/// Shows long output through `$PAGER` (default `less -FRX`) when stdout is a terminal and the output is taller
/// than the screen; prints it directly otherwise, or when no pager can start.
enum Pager {
    static func show(_ bytes: [UInt8]) {
        var output = bytes
        if output.last != UInt8(ascii: "\n") { output.append(UInt8(ascii: "\n")) }
        let lines = output.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
        guard let size = Screen.size, lines >= size.rows, page(output) else {
            Console.out(bytes: Array(output.dropLast()))
            return
        }
    }

    /// Pipes `output` into the pager and waits for it; false when it could not start.
    private static func page(_ output: [UInt8]) -> Bool {
        Console.flush()
        let environment = ProcessInfo.processInfo.environment
        let pager = environment["PAGER"].flatMap { $0.allSatisfy(\.isWhitespace) ? nil : $0 } ?? "less -FRX"
        if pager == "cat" { return false }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return false }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[0], STDIN_FILENO)
        posix_spawn_file_actions_addclose(&actions, ends[0])
        posix_spawn_file_actions_addclose(&actions, ends[1])
        let words: [String] = ["sh", "-c", pager]
        var argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // `less` reads LESS; -F quits when one screen holds everything, -R keeps colours, -X leaves the text shown.
        var pid: pid_t = 0
        let started = posix_spawn(&pid, "/bin/sh", &actions, nil, &argv, environ)
        close(ends[0])
        guard started == 0 else {
            close(ends[1])
            return false
        }
        // The person may quit the pager early: writing then fails (EPIPE) instead of killing `notes`.
        let previousPipe = signal(SIGPIPE, SIG_IGN)
        let previousInterrupt = signal(SIGINT, SIG_IGN)
        defer {
            signal(SIGPIPE, previousPipe)
            signal(SIGINT, previousInterrupt)
        }
        var offset = 0
        output.withUnsafeBytes { raw in
            while offset < raw.count {
                let written = write(ends[1], raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    break
                }
                offset += written
            }
        }
        close(ends[1])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return true
    }
}
