import ArgumentParser

/// `notes encryption`: the end-to-end encryption of the signed-in account. Each subcommand's body lives in a file of its
/// own (EncryptionEnableCommand.swift, EncryptionRecoveryCommands.swift); this group only lists them.
struct EncryptionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encryption",
        abstract: "End-to-end encryption: convert the account, recover it with its recovery key, or make a new recovery key.",
        subcommands: [EncryptionEnable.self, EncryptionRecover.self, EncryptionRecoveryKey.self])
}
