import ArgumentParser

/// `notes encryption`: the signed-in account's end-to-end encryption. Each subcommand's body is in a file of its own
/// (EncryptionEnableCommand.swift, ...); this group only lists them.
struct Encryption: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "End-to-end encryption of the signed-in account.",
        subcommands: [EncryptionEnable.self])
}
