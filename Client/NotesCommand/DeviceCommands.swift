import ArgumentParser
import Foundation
import MiniFlake
import NotesClient

// The account's devices, its password and its deletion (issue 18). Each talks to the signed-in account's server; a
// revoked session or a deleted account signs this device out like a sync would (its notes stay).

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the devices signed in to this account, or sign one out.",
        discussion: """
            `notes devices` lists them (this one marked with *); `notes devices revoke ID` signs one out (its notes \
            stay on it; it learns at its next sync). To sign out every other device: `notes logout --everywhere` \
            signs out this one too, `notes devices revoke --others` keeps this one.
            """,
        subcommands: [DevicesList.self, DevicesRevoke.self], defaultSubcommand: DevicesList.self)
}

/// `--json` form of a device.
struct DeviceOutput: Encodable {
    var id: String
    var name: String?
    var origin: String?
    var signedInAt: String?
    var lastSeenAt: String?
    var thisDevice: Bool

    init(_ device: Device) {
        id = String(device.sessionID.rawValue)
        name = device.name
        origin = device.origin?.base32
        signedInAt = device.signedInAt.map { NotesTime.iso8601(unixMilliseconds: $0) }
        lastSeenAt = device.lastSeenAt.map { NotesTime.iso8601(unixMilliseconds: $0) }
        thisDevice = device.isThisDevice
    }
}

struct DevicesList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the devices signed in to this account.")

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try options.openClient()
        let devices = try await client.devices()
        if options.json {
            try Console.json(devices.map(DeviceOutput.init))
            return
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for device in devices {
            let mark = device.isThisDevice ? "*" : " "
            let name = device.name.flatMap { $0.isEmpty ? nil : $0 } ?? "(unnamed)"
            let signedIn = device.signedInAt.map { "signed in " + LocalTime.relative($0, now: now) } ?? "signed in at an unknown time"
            let seen = device.isThisDevice ? "this device" : device.lastSeenAt.map { "last seen " + LocalTime.relative($0, now: now) } ?? "not seen since"
            Console.out("\(mark) \(device.sessionID.rawValue)  \(name)  \(signedIn), \(seen)")
        }
        Console.out("\(plural(devices.count, "device")); * is this one. Sign one out with `notes devices revoke ID`.")
    }
}

struct DevicesRevoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "Sign another device out of this account (its notes stay on it).")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The device's ID as `notes devices` shows it, or a unique prefix of at least 4 digits.") var id: String?
    @Flag(name: .long, help: "Sign out every other device instead (this one stays signed in).") var others = false

    func validate() throws {
        if others == (id != nil) { throw ValidationError("Give a device ID or --others.") }
    }

    func run() async throws {
        let client = try options.openClient()
        if others {
            let count = try await client.signOutOtherDevices()
            if options.json {
                try Console.json(["revoked": count])
            } else {
                Console.out("Signed out \(plural(count, "other device")); this one stays signed in.")
            }
            return
        }
        let device = try await client.revokeDevice(id!)
        if options.json {
            try Console.json(DeviceOutput(device))
        } else {
            Console.out("Signed out \(device.sessionID.rawValue) (\(device.name ?? "unnamed")); its notes stay on it.")
        }
    }
}

struct Password: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change this account's password; every other device is signed out.",
        discussion: """
            Asks for the current password, then the new one twice, with echo off. With --password-stdin, reads the \
            current password from the first line of standard input and the new one from the second.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Read the current and the new password from the first two lines of standard input.")
    var passwordStdin = false

    func run() async throws {
        let client = try options.openClient()
        guard let account = try client.account() else {
            throw CommandFailure(message: "not signed in; sign in to the account first (`notes login`)", status: .authentication)
        }
        let current: String
        let new: String
        if passwordStdin {
            current = try Terminal.readPasswordFromStdin()
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw CommandFailure(message: "--password-stdin: no new password on the second line of standard input", status: .usage)
            }
            new = line.hasSuffix("\r") ? String(line.dropLast()) : line
        } else {
            current = try Terminal.readSecret(prompt: "Current password for \(account.username): ")
            new = try Terminal.readSecret(prompt: "New password: ")
            guard try Terminal.readSecret(prompt: "Repeat the new password: ") == new else {
                throw CommandFailure(message: "the new passwords differ; the password was not changed")
            }
        }
        let revoked = try await client.changePassword(current: current, new: new)
        if options.json {
            try Console.json(["revokedDevices": revoked])
        } else {
            Console.out("Password changed for \(account.username); \(plural(revoked, "other device")) signed out.")
        }
    }
}

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account", abstract: "Manage the account itself.", subcommands: [AccountDelete.self])
}

struct AccountDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete the signed-in account on its server, with all its notes there.",
        discussion: """
            Asks for the password, then for the username to be typed to confirm. Every device of the account is \
            signed out. The notes on this device stay, as notes of no account (like notes written while signed \
            out): signing in to an account later asks whether to add them to it. Other devices keep theirs too. \
            For scripts: --yes skips the typed username, and the password comes from the first line of standard \
            input with --password-stdin; without a terminal and without both, nothing is deleted.
            """)

    @OptionGroup var options: GlobalOptions
    @Flag(name: .long, help: "Read the password from the first line of standard input.") var passwordStdin = false
    @Flag(name: .shortAndLong, help: "Do not ask for the username to be typed (needs the password on a terminal or --password-stdin).")
    var yes = false

    struct Output: Encodable {
        var deleted: String
        var keptNotes: Int
    }

    func run() async throws {
        let client = try options.openClient()
        guard let account = try client.account() else {
            throw CommandFailure(message: "not signed in; sign in to the account to delete first (`notes login`)", status: .authentication)
        }
        if !Console.stdinIsTerminal && !(yes && passwordStdin) {
            throw CommandFailure(
                message: "refusing to delete \(account.username) without a terminal to confirm on; pass --yes and --password-stdin to do it from a script",
                status: .usage)
        }
        let password = try passwordStdin ? Terminal.readPasswordFromStdin() : Terminal.readSecret(prompt: "Password for \(account.username): ")
        if !yes {
            let notes = try client.status().notes
            Console.writeError(
                "This deletes the account \(account.username) on \(account.serverURL) and all its notes there, for every device. "
                    + "This device keeps its \(plural(notes, "note")) as notes of no account.\n")
            Console.writeError("Type the username (\(account.username)) to delete it: ")
            guard let typed = readLine(strippingNewline: true), typed.trimmingCharacters(in: .whitespaces) == account.username else {
                throw CommandFailure(message: "the username does not match; nothing was deleted")
            }
        }
        let report = try await client.deleteAccount(password: password)
        if options.json {
            try Console.json(Output(deleted: report.account.display, keptNotes: report.keptNotes))
        } else {
            Console.out("Deleted the account \(report.account.display) on \(account.serverURL); this device is signed out.")
            Console.out(
                "Kept \(plural(report.keptNotes, "note")) on this device as notes of no account; `notes login` to another account asks whether to add them.")
        }
    }
}
