import ArgumentParser

/// `notes encryption`: the end-to-end encryption of the signed-in account. Each subcommand's body lives in its own
/// file (EncryptionRecoveryCommands.swift).
struct EncryptionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encryption",
        abstract: "End-to-end encryption: recover an account with its recovery key, or make a new recovery key.",
        subcommands: [EncryptionRecover.self, EncryptionRecoveryKey.self])
}
