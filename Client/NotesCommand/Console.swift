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
        var seconds = time_t(unixMilliseconds / 1000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        func pad(_ value: Int32) -> String { value < 10 ? "0\(value)" : String(value) }
        return "\(parts.tm_year + 1900)-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday)) \(pad(parts.tm_hour)):\(pad(parts.tm_min))"
    }

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

    /// `just now`, `5 minutes ago`, ... for recent times; the date otherwise.
    static func relative(_ unixMilliseconds: Int64, now: Int64) -> String {
        let seconds = (now - unixMilliseconds) / 1000
        switch seconds {
        case ..<0: return format(unixMilliseconds)
        case ..<60: return "just now"
        case ..<3600: return plural(Int(seconds / 60), "minute") + " ago"
        case ..<86_400: return plural(Int(seconds / 3600), "hour") + " ago"
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
        let draw = state.withLock { state -> Bool in
            if let last = state.lastDraw, now - last < .milliseconds(100) { return false }
            state.lastDraw = now
            state.shown = true
            return true
        }
        guard draw else { return }
        let text: String
        switch progress.phase {
        case .pushing: text = "Syncing: sending changes \(progress.done)/\(progress.total ?? progress.done)"
        case .pulling: text = "Syncing: receiving changes (\(progress.done))"
        }
        Console.writeError("\r\u{1B}[K\(text)")
    }

    func finish() {
        let shown = state.withLock { state -> Bool in
            defer { state.shown = false }
            return state.shown
        }
        if shown { Console.writeError("\r\u{1B}[K") }
    }

    var callback: @Sendable (SyncProgress) -> Void { { [self] in update($0) } }
}
