import Foundation
import NoteSyncProtocol
import Testing
import TestSupport

/// Issue 18's third sign-up policy with the real binaries: a daemon with `--sign-up invite`, the operator's
/// `notesyncd invites create/list/revoke` on its store, and `notes signup --invite` over HTTP; on SQLite and, when the
/// suite has a server, PostgreSQL.
@Suite("invites, end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct InvitesEndToEndTests {
    typealias Operators = OperatorsEndToEndTests

    /// `notes signup` on a fresh device, with `invite` when given.
    static func signUp(_ server: String, _ username: String, invite: String?) async throws -> NotesRun {
        let device = try NotesDevice("invitee-\(username)")
        defer { try? FileManager.default.removeItem(at: device.home.deletingLastPathComponent()) }
        let invite = invite.map { ["--invite", $0] } ?? []
        return try await device.run(
            ["signup", "--no-encryption", "--server", server, "--username", username, "--password-stdin"] + invite, stdin: NotesE2E.password + "\n")
    }

    static func lines(_ text: String) -> [Substring] { text.split(separator: "\n") }

    @Test(arguments: Operators.backends)
    func anInviteCodeLetsOnePersonSignUpUntilUsedUpOrRevoked(_ backend: String) async throws {
        let directory = try NotesE2E.temporaryDirectory("invites-\(backend)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try await Operators.storeArguments(backend, directory: directory) + ["--bcrypt-cost", "4"]
        let daemon = try await Operators.start(store + ["--sign-up", "invite"], directory: directory)
        defer { daemon.child.stopBlocking() }

        // The operator makes a one-use code; it is printed once, and only there.
        let created = try await Operators.notesyncd(
            ["invites", "create", "--uses", "1", "--expires-in", "7d", "--note", "for grandma", "--json"] + store)
        #expect(created.status == 0, "\(created.output)")
        let invite = try #require(try JSONSerialization.jsonObject(with: Data(created.output.utf8)) as? [String: Any], "\(created.output)")
        let code = try #require(invite["code"] as? String)
        let inviteID = try #require(invite["id"] as? Int)
        #expect(code.count == 34 && code.split(separator: "-").count == 7, "\(code)")
        #expect(invite["uses"] as? Int == 1)
        #expect((invite["expiresAt"] as? String)?.hasPrefix("20") == true)

        // Without a code, and with a code that is not one: one line on stderr, non-zero, nothing created.
        let without = try await Self.signUp(daemon.url, "stranger", invite: nil)
        #expect(without.status == 1, "\(without)")
        #expect(Self.lines(without.stderr).count == 1 && without.stderr.contains("only with an invite code"), "\(without)")
        let malformed = try await Self.signUp(daemon.url, "stranger", invite: "let-me-in")
        #expect(malformed.status == 2, "\(malformed)")
        #expect(Self.lines(malformed.stderr).count == 1 && malformed.stderr.contains("invite code"), "\(malformed)")

        // The invited person signs up with the code as it was printed, and is signed in.
        let grandma = try await Self.signUp(daemon.url, "grandma", invite: code.lowercased())
        #expect(grandma.status == 0, "\(grandma)")
        let api = try Operators.client(daemon.url)
        #expect(try await api.signIn("grandma", NotesE2E.password).username == "grandma")

        // Used up: the same code again is refused with one line.
        let again = try await Self.signUp(daemon.url, "cousin", invite: code)
        #expect(again.status == 1, "\(again)")
        #expect(Self.lines(again.stderr).count == 1 && again.stderr.contains("invite code is not valid"), "\(again)")

        // The list shows it used up, with its note, never the code.
        let listed = try await Operators.notesyncd(["invites", "list", "--json"] + store)
        #expect(listed.status == 0, "\(listed.output)")
        #expect(!listed.output.contains(String(code.prefix(9))), "the list shows the code: \(listed.output)")
        let invites = try #require(try JSONSerialization.jsonObject(with: Data(listed.output.utf8)) as? [[String: Any]])
        #expect(invites.count == 1)
        #expect(invites.first?["id"] as? Int == inviteID)
        #expect(invites.first?["usesLeft"] as? Int == 0 && invites.first?["usesTotal"] as? Int == 1)
        #expect(invites.first?["status"] as? String == "used-up")
        #expect(invites.first?["note"] as? String == "for grandma")

        // A code for the family (three uses), revoked after one: the next sign-up with it is refused.
        let family = try await Operators.notesyncd(["invites", "create", "--uses", "3"] + store)
        #expect(family.status == 0, "\(family.output)")
        #expect(family.output.hasPrefix("created invite "), "\(family.output)")
        let familyCode = try #require(Self.lines(family.output).first { $0.hasPrefix("code: ") }?.dropFirst(6))
        let familyID = try #require(family.output.dropFirst("created invite ".count).split(separator: ":").first.map(String.init))
        #expect(try await Self.signUp(daemon.url, "alice", invite: String(familyCode)).status == 0)
        let revoked = try await Operators.notesyncd(["invites", "revoke", familyID] + store)
        #expect(revoked.status == 0 && revoked.output == "revoked invite \(familyID); its code no longer works\n", "\(revoked.output)")
        let afterRevoke = try await Self.signUp(daemon.url, "bob", invite: String(familyCode))
        #expect(afterRevoke.status == 1 && afterRevoke.stderr.contains("invite code is not valid"), "\(afterRevoke)")
        let table = try await Operators.notesyncd(["invites", "list"] + store)
        #expect(Self.lines(table.output).count == 3, "\(table.output)")
        #expect(table.output.contains("revoked") && table.output.contains("2/3") && table.output.contains("used-up"), "\(table.output)")
        let unknown = try await Operators.notesyncd(["invites", "revoke", "999"] + store)
        #expect(unknown.status == 1 && unknown.output == "notesyncd: no invite 999\n", "\(unknown.output)")

        // Accounts made with invites are ordinary accounts; the store is consistent.
        let users = try await Operators.notesyncd(["users", "list", "--json"] + store)
        let accounts = try #require(try JSONSerialization.jsonObject(with: Data(users.output.utf8)) as? [[String: Any]])
        #expect(accounts.compactMap { $0["username"] as? String } == ["alice", "grandma"])
        let check = try await Operators.notesyncd(["check"] + store)
        #expect(check.status == 0, "\(check.output)")
    }

    @Test func anOpenDaemonIgnoresTheCodeAndAClosedOneRefusesIt() async throws {
        let directory = try NotesE2E.temporaryDirectory("invites-policies")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = ["--data-dir", directory.appendingPathComponent("data").path, "--bcrypt-cost", "4"]
        let closed = try await Operators.start(store + ["--sign-up", "closed"], directory: directory)
        let created = try await Operators.notesyncd(["invites", "create"] + store)
        #expect(created.status == 0, "\(created.output)")
        let code = try #require(Self.lines(created.output).first { $0.hasPrefix("code: ") }?.dropFirst(6))
        let refused = try await Self.signUp(closed.url, "alice", invite: String(code))
        #expect(refused.status == 1 && refused.stderr.contains("does not take sign-ups"), "\(refused)")
        await closed.terminate()
        let open = try await Operators.start(store + ["--sign-up", "open"], directory: directory)
        defer { open.child.stopBlocking() }
        #expect(try await Self.signUp(open.url, "bob", invite: "0000-0000-0000-0000-0000-0000-0000").status == 0)
        // The code was not used by either.
        let listed = try await Operators.notesyncd(["invites", "list", "--json"] + store)
        let invites = try #require(try JSONSerialization.jsonObject(with: Data(listed.output.utf8)) as? [[String: Any]])
        #expect(invites.first?["usesLeft"] as? Int == 1)
    }
}
