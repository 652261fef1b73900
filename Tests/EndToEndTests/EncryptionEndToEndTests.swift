import Foundation
import Testing
import TestSupport

/// End-to-end encryption with the real binaries (issue 32): `notes signup` makes an encrypted account (the recovery
/// key shown once), a second device signs in with the password, both converge, and the daemon's SQLite file and its
/// WAL hold none of the canary words every note is made of. The account commands that prove the password
/// (`notes password`, `notes account delete`) send its AuthKey, never the password, and the signing-out ones
/// (`notes devices revoke`, `notes logout --everywhere`) work on an encrypted account.
@Suite("encryption end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct EncryptionEndToEndTests {
    @Test func twoDevicesOfAnEncryptedAccountConvergeAndTheServerHoldsNoCanary() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("a")
        let b = try NotesDevice("b")
        defer { a.remove(); b.remove() }
        let signup = ok(
            try await a.run(
                ["signup", "--server", server.url, "--username", "alice", "--password-stdin"], stdin: NotesE2E.password + "\n"))
        #expect(signup.stderr.contains("recovery key"), "\(signup)")
        _ = ok(try await b.run(["login", "--server", server.url, "--username", "alice", "--password-stdin"], stdin: NotesE2E.password + "\n"))

        _ = ok(try await a.run(["add", "canaryone canarytwo\nmiddle\nlast", "--tag", "canarytag"]))
        _ = ok(try await b.run(["add", "canarythree from b"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await b.run(["sync"]))
        _ = ok(try await a.run(["sync"]))
        let expected = ["canaryone canarytwo\nmiddle\nlast", "canarythree from b"]
        #expect(try await a.texts() == expected)
        #expect(try await b.texts() == expected)

        // Both edit the shared note offline on lines that do not touch: the server answers `stale`, b merges.
        let listed = try await b.run(["list", "--json"]).json([NotesE2EListedNote].self)
        let shared = try #require(listed.first { $0.text.hasPrefix("canaryone") })
        _ = ok(try await a.run(["edit", shared.id, "--text", "canaryone canarytwo by a\nmiddle\nlast"]))
        _ = ok(try await b.run(["edit", shared.id, "--text", "canaryone canarytwo\nmiddle\nlast by b"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await b.run(["sync"]))
        _ = ok(try await a.run(["sync"]))
        let final = ["canaryone canarytwo by a\nmiddle\nlast by b", "canarythree from b"]
        #expect(try await a.texts() == final)
        #expect(try await b.texts() == final)

        #expect(ok(try await b.run(["status"])).stdout.contains("end-to-end encrypted"))
        #expect(try server.occurrences(of: "canary") == 0)
    }

    func signUp(_ device: NotesDevice, _ server: NotesE2EServer, _ username: String = "alice") async throws {
        _ = ok(
            try await device.run(
                ["signup", "--server", server.url, "--username", username, "--password-stdin"], stdin: NotesE2E.password + "\n"))
    }

    func login(_ device: NotesDevice, _ server: NotesE2EServer, password: String = NotesE2E.password) async throws -> NotesRun {
        try await device.run(["login", "--server", server.url, "--username", "alice", "--password-stdin"], stdin: password + "\n")
    }

    @Test func aPasswordChangeRewrapsTheKeyAndAnotherDeviceReadsTheNotesWithTheNewPassword() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("pw-a")
        let b = try NotesDevice("pw-b")
        let c = try NotesDevice("pw-c")
        defer { a.remove(); b.remove(); c.remove() }
        try await signUp(a, server)
        _ = ok(try await a.run(["add", "canaryone before the change", "--tag", "canarytag"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await login(b, server))

        // A wrong current password changes nothing (its AuthKey does not match).
        let wrong = try await a.run(["password", "--password-stdin"], stdin: "not the password\nnew password 123\n")
        #expect(wrong.status == 4 && wrong.stderr.contains("Wrong password"), "\(wrong)")
        #expect(try await b.run(["sync"]).status == 0)

        // Typed on a terminal: the account key is re-wrapped by the new password, the other device signed out.
        let changed = try await AccountsEndToEndTests().runInTerminal(
            a, ["password"],
            answers: [
                ("Current password for alice: ", NotesE2E.password), ("New password: ", "new password 123"),
                ("Repeat the new password: ", "new password 123"),
            ])
        #expect(changed.status == 0 && changed.output.contains("Password changed for alice; 1 other device signed out"), "\(changed)")
        #expect(!changed.output.contains(NotesE2E.password) && !changed.output.contains("new password 123"), "\(changed)")
        _ = ok(try await a.run(["add", "canarytwo after the change"]))
        _ = ok(try await a.run(["sync"]))
        #expect(try await b.run(["sync"]).status == 4)

        // The old password is refused; the new one opens the account's key on a new device and on the signed-out one.
        let old = try await login(c, server)
        #expect(old.status == 4, "\(old)")
        _ = ok(try await login(c, server, password: "new password 123"))
        let expected = ["canaryone before the change", "canarytwo after the change"]
        #expect(try await c.texts() == expected)
        _ = ok(try await login(b, server, password: "new password 123"))
        #expect(try await b.texts() == expected)
        #expect(try server.occurrences(of: "canary") == 0)
    }

    @Test func revokingADeviceAndLoggingOutEverywhereWorkOnAnEncryptedAccount() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("rv-a")
        let b = try NotesDevice("rv-b")
        let c = try NotesDevice("rv-c")
        defer { a.remove(); b.remove(); c.remove() }
        try await signUp(a, server)
        _ = ok(try await a.run(["add", "canaryone"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await login(b, server))
        _ = ok(try await login(c, server))

        struct Listed: Decodable {
            var id: String
            var thisDevice: Bool
        }
        let devices = try ok(try await a.run(["devices", "--json"])).json([Listed].self)
        let others = devices.filter { !$0.thisDevice }.map(\.id)
        #expect(devices.count == 3 && others.count == 2)
        let revoked = ok(try await a.run(["devices", "revoke", try #require(others.first)]))
        #expect(revoked.stdout.contains("Signed out"), "\(revoked)")
        #expect(try await a.run(["devices", "--json"]).json([Listed].self).count == 2)
        let everywhere = ok(try await a.run(["logout", "--everywhere"]))
        #expect(everywhere.stdout.contains("Signed out 1 other device too"), "\(everywhere)")
        #expect(try await b.run(["sync"]).status == 4)
        #expect(try await c.run(["sync"]).status == 4)
        // Every device keeps its notes, and the password still opens the account.
        #expect(try await b.texts() == ["canaryone"])
        _ = ok(try await login(a, server))
        #expect(try await a.texts() == ["canaryone"])
    }

    @Test func deletingAnEncryptedAccountProvesThePassword() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("del-a")
        defer { a.remove() }
        try await signUp(a, server)
        _ = ok(try await a.run(["add", "canaryone"]))
        _ = ok(try await a.run(["add", "canarytwo"]))
        _ = ok(try await a.run(["sync"]))

        let wrong = try await a.run(["account", "delete", "--yes", "--password-stdin"], stdin: "wrong password!\n")
        #expect(wrong.status == 4 && wrong.stderr.contains("nothing was deleted"), "\(wrong)")
        let deleted = try await AccountsEndToEndTests().runInTerminal(
            a, ["account", "delete"], answers: [("Password for alice: ", NotesE2E.password), ("to delete it: ", "alice")])
        #expect(deleted.status == 0 && deleted.output.contains("Kept 2 notes on this device as notes of no account"), "\(deleted)")
        #expect(try await a.status().signedIn == false)
        #expect(try await a.texts() == ["canaryone", "canarytwo"])
        // The account is gone: its password no longer signs in.
        let b = try NotesDevice("del-b")
        defer { b.remove() }
        #expect(try await login(b, server).status == 4)
    }
}
