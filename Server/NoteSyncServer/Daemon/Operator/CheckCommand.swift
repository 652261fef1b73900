import ArgumentParser
import Foundation

/// `notesyncd check`: the store's consistency (``OperatorStore/checkInvariants()``), safe while the daemon runs.
///
/// Prints `ok: ...` and exits 0 when consistent; else one line per problem on standard output, a summary line on
/// standard error, and exit status 2.
public struct CheckCommand: AsyncParsableCommand, OperatorCommand {
    public static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check the store: SQLite's integrity check and the store's own invariants.",
        discussion: """
            Checks one note per (account, client ID, origin), change sequences consistent with their account, every \
            row's IDs valid and every row's account existing, every kept version a version of a note of its account, \
            the accounts' running totals (and, with SQLite, PRAGMA integrity_check and foreign_key_check), and every \
            attachment chunk present with its size and hash (--chunks). Exit status 0 when clean, 2 when problems \
            were found (one line each), 1 on error.
            """ + " " + OperatorStoreOptions.help)
    @ParentCommand var daemon: NotesyncdCommand
    @Option(
        help: """
            How much of the attachment chunks to verify: 'sample' (every chunk present with its size, and the SHA-256 of \(ChunkVerification.sampleSize) chosen at random) or 'all' (every chunk's SHA-256: reads every byte).
            """)
    var chunks: ChunkVerification = .sample
    public init() {}

    public func run() async throws {
        let verification = chunks
        let (problems, statistics, chunkStatistics) = try await store.withStore { opened in
            var problems = try await opened.store.checkInvariants()
            var chunkStatistics: ChunkStatistics?
            if let chunkStore = opened.store as? any ChunkStore {
                problems += try await chunkStore.checkChunks(verification)
                chunkStatistics = try await chunkStore.chunkStatistics()
            }
            return (problems, try await opened.store.statistics(), chunkStatistics)
        }
        guard problems.isEmpty else {
            for problem in problems { OperatorOutput.line(problem) }
            FileHandle.standardError.write(Data("notesyncd: check found \(problems.count) problem(s)\n".utf8))
            throw ExitCode(2)
        }
        let chunkText = chunkStatistics.map {
            ", and \($0.chunks) chunks (\(verification == .all ? "all" : "at most \(ChunkVerification.sampleSize)") hashed)"
        } ?? ""
        OperatorOutput.line(
            "ok: \(statistics.accounts) accounts, \(statistics.notes + statistics.tombstones) notes, \(statistics.sessions) sessions checked\(chunkText)")
    }
}

extension ChunkVerification: ExpressibleByArgument {}
