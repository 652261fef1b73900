import Foundation
import NotesClient

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reading from people: passwords without echo, confirmations, piped text (the editor: ``Editor``).
enum Terminal {
    /// Reads a line from the terminal with echo off, after printing `prompt` on stderr.
    ///
    /// - Throws: a usage failure when stdin is not a terminal (use `--password-stdin`).
    static func readSecret(prompt: String) throws -> String {
        guard Console.stdinIsTerminal else {
            throw CommandFailure(message: "no terminal to read the password from; pass it with --password-stdin", status: .usage)
        }
        var original = termios()
        let haveTermios = tcgetattr(STDIN_FILENO, &original) == 0
        if haveTermios {
            var silent = original
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ECHONL)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        }
        // The prompt only once echo is off (as getpass does): TCSAFLUSH discards what was typed before it, so a
        // password typed after a prompt shown earlier could be echoed and then lost, leaving the read waiting.
        Console.writeError(prompt)
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

    /// The new password: the second line of standard input with `stdin` (the first was read already), else asked twice
    /// on the terminal; `unchanged` says what the differing passwords left as it was.
    static func readNewPassword(stdin: Bool, unchanged: String = "nothing changed") throws -> String {
        if stdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw CommandFailure(message: "--password-stdin: no new password on the second line of standard input", status: .usage)
            }
            return line.hasSuffix("\r") ? String(line.dropLast()) : line
        }
        let new = try Terminal.readSecret(prompt: "New password: ")
        guard try Terminal.readSecret(prompt: "Repeat the new password: ") == new else {
            throw CommandFailure(message: "the new passwords differ; \(unchanged)")
        }
        return new
    }

    /// Asks a question on the terminal; true only for `yes` (or `y`).
    static func confirm(_ question: String) -> Bool {
        Console.writeError(question)
        guard let answer = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces).lowercased() else {
            return false
        }
        return answer == "yes" || answer == "y"
    }

    /// All of stdin as text, byte-exact (a NUL is kept).
    ///
    /// - Throws: `invalid_text` with the byte offset when it is not UTF-8.
    static func readAllStdin() throws(NotesError) -> String {
        let data = FileHandle.standardInput.readDataToEndOfFile()
        return try TextInput.decode(Array(data), source: "Standard input")
    }

    /// Whether stdin is a pipe or a file (what `notes add` reads without being asked), not a terminal or a device
    /// such as `/dev/null`.
    static var stdinIsPipeOrFile: Bool {
        var info = stat()
        guard fstat(STDIN_FILENO, &info) == 0 else { return false }
        let kind = info.st_mode & S_IFMT
        return kind == S_IFIFO || kind == S_IFREG || kind == S_IFSOCK
    }

    /// Refuses to start the default editor with no terminal to run it on (a configured `$VISUAL`/`$EDITOR` is
    /// trusted: it may be a script).
    static func requireEditor() throws {
        guard Editor.configured() == nil else { return }
        guard isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1 else {
            throw CommandFailure(
                message: "no terminal to run the editor on; give the text as arguments or with --stdin, or set $EDITOR",
                status: .usage)
        }
    }

    /// Text from a file or a pipe, without the trailing newlines editors and `echo` add.
    static func trimmingTrailingNewlines(_ text: String) -> String {
        var text = Substring(text)
        while let last = text.last, last == "\n" || last == "\r\n" || last == "\r" { text.removeLast() }
        return String(text)
    }
}
