import ArgumentParser
import Foundation
import MiniFlake
import NoteSyncProtocol

/// `notesyncd invites ...`: invite codes for the sign-up policy `invite` (`--sign-up invite`). A code is printed once,
/// when it is made; the store keeps only its SHA-256. Each sign-up with it takes one use.
public struct InvitesCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "invites",
        abstract: "Create, list and revoke invite codes (for --sign-up invite).",
        discussion: OperatorStoreOptions.help,
        subcommands: [Create.self, List.self, Revoke.self]
    )

    public init() {}

    /// An invite as `invites list --json` prints it (Docs/OPERATIONS.md, "Operator JSON": times in the wire's ISO
    /// 8601 form, an absent key for a missing value), never its code.
    struct Listed: Encodable, Equatable {
        var id: Int64
        var note: String?
        var usesLeft: Int
        var usesTotal: Int
        var expiresAt: String?
        var createdAt: String
        var revokedAt: String?
        /// `usable`, `used-up`, `expired` or `revoked`.
        var status: String

        init(_ invite: InviteRecord, now: Int64) {
            id = invite.id
            note = invite.note
            usesLeft = invite.usesLeft
            usesTotal = invite.usesTotal
            expiresAt = invite.expiresAt.map { WireTime.format(unixMilliseconds: $0) }
            createdAt = WireTime.format(unixMilliseconds: invite.createdAt)
            revokedAt = invite.revokedAt.map { WireTime.format(unixMilliseconds: $0) }
            status =
                if invite.revokedAt != nil { "revoked" } else if invite.usesLeft == 0 { "used-up" } else if let expiry = invite.expiresAt,
                    expiry <= now
                { "expired" } else { "usable" }
        }
    }

    /// A duration as `--expires-in` reads it: a positive whole number and a unit, `m` (minutes), `h` (hours), `d`
    /// (days) or `w` (weeks), at most ten years; milliseconds, or nil when the text is not one.
    static func milliseconds(duration text: String) -> Int64? {
        let text = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard let unit = text.last, let count = Int64(text.dropLast()), count > 0 else {
            return nil
        }
        let minute: Int64 = 60_000
        let unitMilliseconds: Int64
        switch unit {
        case "m": unitMilliseconds = minute
        case "h": unitMilliseconds = 60 * minute
        case "d": unitMilliseconds = 24 * 60 * minute
        case "w": unitMilliseconds = 7 * 24 * 60 * minute
        default: return nil
        }
        let (total, overflow) = count.multipliedReportingOverflow(by: unitMilliseconds)
        guard !overflow, total <= maxExpiry else { return nil }
        return total
    }

    /// The longest `--expires-in`: ten years (3650 days).
    static let maxExpiry: Int64 = 3650 * 24 * 3_600_000

    /// `invites create [--uses N] [--expires-in DURATION] [--note TEXT] [--json]`.
    public struct Create: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Make an invite code and print it (once: only its hash is kept).",
            discussion: """
                Give the code to the person; they sign up with `notes signup --invite CODE` while the daemon runs with \
                --sign-up invite. Each sign-up takes one use. \(OperatorStoreOptions.help)
                """)
        @ParentCommand var daemon: NotesyncdCommand
        @Option(help: "How many accounts the code may create (1-\(InviteCodes.maxUses); default 1).") var uses = 1
        @Option(
            name: .customLong("expires-in"),
            help: ArgumentHelp("How long the code works: e.g. 30m, 12h, 7d, 2w (at most 3650d; default: until used or revoked).", valueName: "duration"))
        var expiresIn: String?
        @Option(help: "Who the code is for, shown by `invites list` (at most \(InviteCodes.maxNoteLength) characters).") var note: String?
        @Flag(help: "One JSON object, for scripts.") var json = false
        public init() {}

        public func validate() throws {
            guard (1...InviteCodes.maxUses).contains(uses) else {
                throw ValidationError("--uses must be 1...\(InviteCodes.maxUses), got \(uses).")
            }
            if let expiresIn, InvitesCommand.milliseconds(duration: expiresIn) == nil {
                throw ValidationError("--expires-in must be a positive number with m, h, d or w (e.g. 7d), at most 3650d; got '\(expiresIn)'.")
            }
            if let note {
                guard note.count <= InviteCodes.maxNoteLength, !note.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
                else {
                    throw ValidationError("--note must be at most \(InviteCodes.maxNoteLength) characters, without control characters.")
                }
            }
        }

        /// What `invites create --json` prints (Docs/OPERATIONS.md, "Operator JSON").
        struct Created: Encodable {
            var id: Int64
            var code: String
            var uses: Int
            var expiresAt: String?
            var note: String?
        }

        public func run() async throws {
            let code = InviteCodes.make(randomBytes: .system)
            let now = SystemFlakeClock.coarse.unixMilliseconds()
            let expiresAt = expiresIn.flatMap(InvitesCommand.milliseconds(duration:)).map { now + $0 }
            let note = self.note.flatMap { $0.isEmpty ? nil : $0 }
            let invite = try await store.withStore { opened in
                try await opened.store.createInvite(
                    codeHash: InviteCodes.hash(code), note: note, uses: uses, expiresAt: expiresAt, createdAt: now)
            }
            let shown = InviteCode.display(code)
            let expiry = invite.expiresAt.map { WireTime.format(unixMilliseconds: $0) }
            if json {
                try OperatorOutput.json(Created(id: invite.id, code: shown, uses: invite.usesTotal, expiresAt: expiry, note: invite.note))
                return
            }
            OperatorOutput.line(
                "created invite \(invite.id): \(invite.usesTotal) use\(invite.usesTotal == 1 ? "" : "s"), "
                    + (expiry.map { "expires \($0)" } ?? "never expires") + (invite.note.map { ", note: \($0)" } ?? ""))
            OperatorOutput.line("code: \(shown)")
            OperatorOutput.line("The code is shown only now. Sign up with: notes signup --server URL --username NAME --invite \(shown)")
        }
    }

    /// `invites list [--json]`.
    public struct List: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "List the invites: ID, status, uses left/total, expiry, created, revoked, note (never the codes).",
            discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        @Flag(help: "One JSON array, for scripts.") var json = false
        public init() {}

        public func run() async throws {
            let invites = try await store.withStore { try await $0.store.invites() }
            let now = SystemFlakeClock.coarse.unixMilliseconds()
            let listed = invites.map { Listed($0, now: now) }
            try OperatorOutput.print(listed, json: json) {
                [["ID", "STATUS", "USES LEFT", "EXPIRES", "CREATED", "REVOKED", "NOTE"]]
                    + listed.map { invite in
                        [
                            "\(invite.id)", invite.status, "\(invite.usesLeft)/\(invite.usesTotal)", invite.expiresAt ?? "never",
                            invite.createdAt, invite.revokedAt ?? "-", invite.note ?? "-",
                        ]
                    }
            }
        }
    }

    /// `invites revoke ID`.
    public struct Revoke: AsyncParsableCommand, OperatorCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Revoke an invite: its code stops working at once (accounts made with it stay).",
            discussion: OperatorStoreOptions.help)
        @ParentCommand var daemon: NotesyncdCommand
        @Argument(help: "The invite's ID, as `invites list` shows it.") var id: String
        public init() {}

        public func validate() throws {
            guard let value = Int64(id), value > 0 else { throw ValidationError("'\(id)' is not an invite ID.") }
        }

        public func run() async throws {
            let id = Int64(self.id)!
            let now = SystemFlakeClock.coarse.unixMilliseconds()
            let found = try await store.withStore { opened in try await opened.store.revokeInvite(id: id, revokedAt: now) }
            guard found else { throw OperatorError("no invite \(id)") }
            OperatorOutput.line("revoked invite \(id); its code no longer works")
        }
    }
}
