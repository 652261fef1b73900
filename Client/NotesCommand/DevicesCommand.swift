import ArgumentParser
import Foundation
import MiniFlake
import NotesClient

/// `notes devices` (`list`, `revoke`): the devices signed in to the account. Each talks to the signed-in account's
/// server; a revoked session signs this device out like a sync would (its notes stay).
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
    /// After `notes devices revoke` on an encrypted account: the account key's generation after the rotation.
    var keyGeneration: UInt32?

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
            let signedOut = try await client.signOutOtherDevices()
            if options.json {
                try Console.json(["revoked": Int64(signedOut.count), "keyGeneration": signedOut.keyGeneration.map(Int64.init)])
            } else {
                Console.out("Signed out \(plural(signedOut.count, "other device")); this one stays signed in.")
                if let generation = signedOut.keyGeneration { Console.out(rotatedLine(generation)) }
            }
            return
        }
        let revocation = try await client.revokeDevice(id!)
        let device = revocation.device
        if options.json {
            var output = DeviceOutput(device)
            output.keyGeneration = revocation.keyGeneration
            try Console.json(output)
        } else {
            Console.out("Signed out \(device.sessionID.rawValue) (\(device.name ?? "unnamed")); its notes stay on it.")
            if let generation = revocation.keyGeneration { Console.out(rotatedLine(generation)) }
        }
    }
}

/// What a command that signed devices out of an encrypted account says of the rotation that followed.
func rotatedLine(_ generation: UInt32) -> String {
    "The account key is now generation \(generation): what is written from now on is encrypted under a key the signed-out devices never get (older notes are re-encrypted by the next syncs)."
}
