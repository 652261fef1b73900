import ArgumentParser
import Foundation
import NoteSyncProtocol

/// `notesyncd stats [--json]`: the store's counts and size (``StoreStatistics``).
public struct StatsCommand: AsyncParsableCommand, OperatorCommand {
    public static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show counts (accounts, devices, notes, applied edits, history, attachment chunks) and the database's size.",
        discussion: OperatorStoreOptions.help)
    @ParentCommand var daemon: NotesyncdCommand
    @Flag(help: "One JSON object, for scripts.") var json = false
    public init() {}

    public func run() async throws {
        let statistics = try await store.withStore { opened in
            var statistics = try await opened.store.statistics()
            if let chunks = try await (opened.store as? any ChunkStore)?.chunkStatistics() {
                statistics.chunks = chunks.chunks
                statistics.chunkBytes = chunks.bytes
            }
            return statistics
        }
        try OperatorOutput.print(statistics, json: json) {
            [
                ["accounts", "\(statistics.accounts) (\(statistics.disabledAccounts) disabled)"],
                ["encryption", Self.encryptionLine(statistics.encryption ?? [:], plaintextNotes: statistics.plaintextNotes ?? 0)],
                ["devices", "\(statistics.sessions)"],
                ["notes", "\(statistics.notes) (+ \(statistics.tombstones) deleted)"],
                ["text", "\(statistics.textBytes) bytes"],
                ["applied edits", "\(statistics.appliedEdits) (\(statistics.replayTextBytes) bytes of text kept for replays)"],
                ["history", "\(statistics.noteVersions) versions (\(statistics.historyBytes) bytes of text)"],
                ["attachment chunks", "\(statistics.chunks) (\(statistics.chunkBytes) bytes)"],
                ["database", "\(statistics.databaseBytes) bytes"],
            ]
        }
    }

    /// `3 plaintext, 1 converting (12 notes left), 2 encrypted, 1 reset`: accounts by encryption state, in
    /// ``EncryptionState`` order, states with none left out (`0 accounts` when there are none); the converting ones
    /// with the notes they still hold in the clear.
    static func encryptionLine(_ counts: [String: Int], plaintextNotes: Int = 0) -> String {
        let parts = EncryptionState.allCases.compactMap { state in
            counts[state.rawValue].map { "\($0) \(state.rawValue)" + (state == .converting ? " (\(plaintextNotes) notes left)" : "") }
        }
        return parts.isEmpty ? "0 accounts" : parts.joined(separator: ", ")
    }
}
