import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reading from people: passwords without echo, confirmations, the editor, piped text.
enum Terminal {
    /// Reads a line from the terminal with echo off, after printing `prompt` on stderr.
    ///
    /// - Throws: a usage failure when stdin is not a terminal (use `--password-stdin`).
    static func readSecret(prompt: String) throws -> String {
        guard Console.stdinIsTerminal else {
            throw CommandFailure(message: "no terminal to read the password from; pass it with --password-stdin", status: .usage)
        }
        Console.writeError(prompt)
        var original = termios()
        let haveTermios = tcgetattr(STDIN_FILENO, &original) == 0
        if haveTermios {
            var silent = original
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ECHONL)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        }
        defer {
            if haveTermios {
                var restore = original
                tcsetattr(STDIN_FILENO, TCSAFLUSH, &restore)
            }
        }
        guard let line = readLine(strippingNewline: true) else {
            throw CommandFailure(message: "no password given")
        }
        return line
    }

    /// The first line of stdin (for `--password-stdin`).
    static func readPasswordFromStdin() throws -> String {
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw CommandFailure(message: "--password-stdin: no password on standard input", status: .usage)
        }
        return line.hasSuffix("\r") ? String(line.dropLast()) : line
    }

    /// Asks a question on the terminal; true only for `yes` (or `y`).
    static func confirm(_ question: String) -> Bool {
        Console.writeError(question)
        guard let answer = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces).lowercased() else {
            return false
        }
        return answer == "yes" || answer == "y"
    }

    /// All of stdin as text.
    static func readAllStdin() -> String {
        let data = FileHandle.standardInput.readDataToEndOfFile()
        return String(decoding: data, as: UTF8.self)
    }

    /// Opens `$VISUAL`/`$EDITOR` (default `vi`) on `initial` and returns what was saved.
    static func edit(_ initial: String) throws -> String {
        let environment = ProcessInfo.processInfo.environment
        let editor = [environment["VISUAL"], environment["EDITOR"]].compactMap { $0 }.first { !$0.isEmpty } ?? "vi"
        let directory = FileManager.default.temporaryDirectory
        let file = directory.appendingPathComponent("notes-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).txt")
        guard FileManager.default.createFile(atPath: file.path, contents: Data(initial.utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw CommandFailure(message: "cannot create a temporary file in \(directory.path)")
        }
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // The editor may carry arguments ("code --wait"): let the shell split it; the file is passed as $1.
        process.arguments = ["-c", "\(editor) \"$1\"", "sh", file.path]
        do {
            try process.run()
        } catch {
            throw CommandFailure(message: "cannot start the editor '\(editor)': \(error.localizedDescription)")
        }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CommandFailure(message: "the editor '\(editor)' failed (status \(process.terminationStatus)); nothing saved")
        }
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw CommandFailure(message: "cannot read back the edited file")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Text from a file or a pipe, without the trailing newlines editors and `echo` add.
    static func trimmingTrailingNewlines(_ text: String) -> String {
        var text = Substring(text)
        while let last = text.last, last == "\n" || last == "\r\n" || last == "\r" { text.removeLast() }
        return String(text)
    }
}
