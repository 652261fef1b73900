import ArgumentParser
import Foundation
import NoteSyncProtocol

/// What the operator commands print: lines, tables, and the `--json` form of each listing.
enum OperatorOutput {
    /// One line on standard output.
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// Rows as left-aligned columns separated by two spaces.
    static func table(_ rows: [[String]]) {
        let widths = (0..<(rows.first?.count ?? 0)).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let padded = row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }
            line(padded.joined(separator: "  "))
        }
    }

    /// `value` as one line of JSON, keys sorted (the `--json` outputs Docs/OPERATIONS.md documents under "Operator
    /// JSON": IDs as decimal strings, times in the wire's ISO 8601 form, an absent key for a missing value).
    static func json(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        line(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// `value` as JSON when `json` is set, else the table `rows` makes: what every listing prints.
    static func print(_ value: some Encodable, json: Bool, rows: () -> [[String]]) throws {
        if json {
            try self.json(value)
        } else {
            table(rows())
        }
    }

    /// Runs `body`, turning the service's request errors into one operator line (`invalid_field: ...` →
    /// the message).
    static func mapped<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as SyncError {
            throw OperatorError(error.body.message)
        }
    }
}

/// `--password-stdin`, for the commands that set a password (`users add`, `users reset-password`): the password is
/// standard input's first line, or a new random one printed once.
struct PasswordOptions: ParsableArguments {
    @Flag(name: .customLong("password-stdin"), help: "Read the password from the first line of standard input.")
    var passwordStdin = false

    /// What the commands' help says about it.
    static let discussion = "Without --password-stdin a random password is made and printed once."

    init() {}

    /// A password to set.
    struct Password {
        var text: String
        /// Made here rather than read: printed once, after the command succeeded.
        var generated: Bool

        /// Prints `password: ...` when the password was made here.
        func printIfGenerated() {
            if generated { OperatorOutput.line("password: \(text)") }
        }
    }

    /// Standard input's first line, or a new random password (20 characters from a 56-letter alphabet without
    /// look-alikes: about 116 bits).
    ///
    /// - Throws: ``OperatorError`` when standard input has no line, or the password breaks
    ///   ``CredentialRules/passwordRule``.
    func read() throws -> Password {
        guard passwordStdin else {
            let alphabet = Array("abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
            var generator = SystemRandomNumberGenerator()
            return Password(text: String((0..<20).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }), generated: true)
        }
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw OperatorError("--password-stdin: standard input has no password line")
        }
        guard CredentialRules.isAcceptablePassword(line) else { throw OperatorError("A password is \(CredentialRules.passwordRule).") }
        return Password(text: line, generated: false)
    }
}
