import Foundation
import NotesClient

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the person's editor on a temporary file, the way git does.
///
/// - The editor is started with `posix_spawn` in this process's process group, which is the terminal's foreground
///   group when `notes` runs in the foreground: it can read the keyboard and draw. (Foundation's `Process` puts the
///   child in a group of its own, where a terminal editor is stopped by `SIGTTIN`/`SIGTTOU` and the screen stays
///   blank.) It gets the default disposition of every signal and an empty signal mask.
/// - While it runs, `notes` ignores `SIGINT` and `SIGQUIT` (Ctrl-C and Ctrl-\ go to the editor, which decides), and a
///   `SIGTERM` or `SIGHUP` (the terminal closed) removes the temporary file before `notes` dies of it.
/// - The file (`notes-*.txt` in `$TMPDIR`, mode 0600, made with `mkstemps`) is removed on every way out, except when
///   the text was written but refused (not UTF-8, too large for the server): then it is kept and the error names it,
///   so nothing typed is lost.
enum Editor {
    /// The editor command: `$VISUAL`, else `$EDITOR`, else nil (the caller falls back to `vi`).
    static func configured(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        [environment["VISUAL"], environment["EDITOR"]].compactMap { $0 }.first { !$0.allSatisfy(\.isWhitespace) }
    }

    /// Opens the editor on `initial` and hands what was saved to `accept` (which stores it).
    ///
    /// - Throws: a failure when the editor cannot start or exits unsuccessfully (nothing saved, file removed); what
    ///   `accept` or the text check throws, with the kept file's path added to the message (except for an empty
    ///   note, which has nothing to keep).
    static func edit<T>(_ initial: String, accept: (String) throws -> T) throws -> T {
        let editor = configured() ?? "vi"
        let file = try TemporaryFile(contents: Array(initial.utf8))
        var keep = false
        defer { if !keep { file.remove() } }
        try run(editor, on: file)
        guard let bytes = file.read() else {
            throw CommandFailure(message: "cannot read back the edited file \(file.path)")
        }
        do {
            let text = try TextInput.decode(bytes, source: "the edited text")
            return try accept(Terminal.trimmingTrailingNewlines(text))
        } catch let error as NotesError where error.code != .emptyNote {
            keep = true
            throw NotesError(error.code, error.description + " Your text is kept in \(file.path).", api: error.api)
        } catch let error as CommandFailure {
            keep = true
            throw CommandFailure(message: error.message + "; your text is kept in \(file.path)", status: error.status)
        }
    }

    /// Runs `editor` (split by the shell, so `code --wait` works; the file is passed as `$1`) and waits for it.
    private static func run(_ editor: String, on file: TemporaryFile) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for number in [SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU] { sigaddset(&defaults, number) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let arguments = ["sh", "-c", "\(editor) \"$1\"", "sh", file.path]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }

        // From here until the editor is reaped: Ctrl-C and Ctrl-\ are the editor's; a fatal signal removes the file.
        let guards = SignalGuard(removing: file)
        defer { guards.restore() }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/sh", nil, &attributes, &argv, environ)
        guard spawned == 0 else {
            throw CommandFailure(message: "cannot start the editor '\(editor)': \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw CommandFailure(message: "lost track of the editor '\(editor)'") }
        }
        let exited = status & 0x7f == 0
        if exited {
            let code = (status >> 8) & 0xff
            if code == 0 { return }
            let hint = code == 127 ? " (not found? set $VISUAL or $EDITOR)" : ""
            throw CommandFailure(message: "the editor '\(editor)' failed (status \(code))\(hint); nothing saved")
        }
        throw CommandFailure(message: "the editor '\(editor)' was stopped by signal \(status & 0x7f); nothing saved")
    }
}

/// A `notes-XXXXXX.txt` file in the temporary directory, created exclusively with mode 0600.
final class TemporaryFile: Sendable {
    let path: String

    init(contents: [UInt8]) throws {
        var directory = FileManager.default.temporaryDirectory.path
        while directory.count > 1 && directory.hasSuffix("/") { directory.removeLast() }
        var template = Array("\(directory)/notes-XXXXXX.txt".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemps($0.baseAddress!, 4) }
        guard fd >= 0 else {
            throw CommandFailure(message: "cannot create a temporary file in \(directory): \(String(cString: strerror(errno)))")
        }
        path = String(cString: template)
        defer { close(fd) }
        var offset = 0
        while offset < contents.count {
            let written = contents[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                unlink(path)
                throw CommandFailure(message: "cannot write the temporary file \(path)")
            }
            offset += written
        }
    }

    func read() -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { Array($0) }
    }

    func remove() { unlink(path) }
}

/// The path a fatal signal removes; set only while the editor runs (a C string, read by the signal handler).
nonisolated(unsafe) private var signalCleanupPath: UnsafeMutablePointer<CChar>?

/// Removes the editor's file, then dies of the signal as if no handler were there.
private func removeFileAndDie(_ number: Int32) {
    if let path = signalCleanupPath { unlink(path) }
    signal(number, SIG_DFL)
    raise(number)
}

/// Ignores SIGINT and SIGQUIT and makes SIGTERM and SIGHUP remove the file, until ``restore()``.
private struct SignalGuard {
    private var previous: [(Int32, (@convention(c) (Int32) -> Void)?)] = []

    init(removing file: TemporaryFile) {
        signalCleanupPath = strdup(file.path)
        for number in [SIGINT, SIGQUIT] { previous.append((number, signal(number, SIG_IGN))) }
        for number in [SIGTERM, SIGHUP] { previous.append((number, signal(number, removeFileAndDie))) }
    }

    func restore() {
        for (number, handler) in previous { signal(number, handler) }
        let path = signalCleanupPath
        signalCleanupPath = nil
        free(path)
    }
}
