import ArgumentParser
import Foundation

/// `notesyncd check`: the store's consistency (``OperatorStore/checkInvariants()``), safe while the daemon runs.
///
/// Prints `ok: ...` and exits 0 when consistent; else one line per problem on standard output, a summary line on
/// standard error, and exit status 2.
public struct CheckCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check the store: SQLite's integrity check and the store's own invariants.",
        discussion: """
            Checks one note per (account, client ID, origin), change sequences consistent with their account, every \
            row's IDs valid and every row's account existing, every kept version a version of a note of its account, \
            the accounts' running totals (and, with SQLite, PRAGMA integrity_check and foreign_key_check). Exit status 0 when clean, 2 when problems were found (one line each), 1 on error.
            """ + " " + OperatorStoreOptions.help)
    @ParentCommand var daemon: NotesyncdCommand
    var store: OperatorStoreOptions { OperatorStoreOptions(daemon) }
    public init() {}

    public func run() async throws {
        let (problems, statistics) = try await store.withStore { opened in
            (try await opened.store.checkInvariants(), try await opened.store.statistics())
        }
        guard problems.isEmpty else {
            for problem in problems { OperatorOutput.line(problem) }
            FileHandle.standardError.write(Data("notesyncd: check found \(problems.count) problem(s)\n".utf8))
            throw ExitCode(2)
        }
        OperatorOutput.line(
            "ok: \(statistics.accounts) accounts, \(statistics.notes + statistics.tombstones) notes, \(statistics.sessions) sessions checked")
    }
}
