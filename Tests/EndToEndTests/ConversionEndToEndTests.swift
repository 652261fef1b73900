import Foundation
import Testing
import TestSupport

/// Converting a plaintext account with the real binaries (issue 32): `notes encryption enable` on an account with
/// notes, history, a conflict copy and a deleted note (then the daemon's SQLite file and WAL hold none of the canary
/// words the notes held), the same killed halfway and carried on by `notes sync`, and an account the operator made
/// (`notesyncd users add`) set up as encrypted at its first `notes login`.
@Suite("converting an account end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct ConversionEndToEndTests {
    func login(_ device: NotesDevice, _ server: NotesE2EServer, _ username: String = "alice") async throws -> NotesRun {
        try await device.run(["login", "--server", server.url, "--username", username, "--password-stdin"], stdin: NotesE2E.password + "\n")
    }

    /// `notes signup --no-encryption` of alice on `device`.
    func signUpPlaintext(_ device: NotesDevice, _ server: NotesE2EServer) async throws {
        ok(try await account(device, "signup", server.url, "alice"))
    }

    @Test func aPlaintextAccountWithHistoryAndAConflictCopyIsConvertedAndTheServerKeepsNoCanary() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("cv-a")
        let b = try NotesDevice("cv-b")
        defer { a.remove(); b.remove() }
        try await signUpPlaintext(a, server)
        _ = ok(try await a.run(["add", "canaryone first line\nmiddle\nlast", "--tag", "canarytag"]))
        _ = ok(try await a.run(["add", "canarygone soon deleted"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await login(b, server))
        // History, a deleted note, and a conflict copy (both edit the same line).
        let listed = try await a.run(["list", "--json"]).json([NotesE2EListedNote].self)
        let shared = try #require(listed.first { $0.text.hasPrefix("canaryone") })
        let gone = try #require(listed.first { $0.text.hasPrefix("canarygone") })
        _ = ok(try await a.run(["rm", gone.id]))
        _ = ok(try await a.run(["edit", shared.id, "--text", "canaryone by a\nmiddle\nlast"]))
        _ = ok(try await b.run(["edit", shared.id, "--text", "canaryone by b\nmiddle\nlast"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await b.run(["sync"]))
        _ = ok(try await a.run(["sync"]))
        let before = try await a.texts()
        #expect(before.count == 2, "\(before)")
        #expect(try server.occurrences(of: "canary") > 0)

        let enabled = ok(try await a.run(["encryption", "enable", "--password-stdin"], stdin: NotesE2E.password + "\n"))
        #expect(enabled.stderr.contains("recovery key"), "\(enabled)")
        #expect(enabled.stdout.contains("Encrypted 2 notes; alice's account is end-to-end encrypted"), "\(enabled)")
        #expect(ok(try await a.run(["status"])).stdout.contains("Encryption: end-to-end encrypted"))
        #expect(try await a.texts() == before)
        // The other device was signed out; it signs in again with the same password and reads every note.
        #expect(try await b.run(["sync"]).status == 4)
        _ = ok(try await login(b, server))
        #expect(try await b.texts() == before)
        #expect(ok(try await b.run(["show", shared.id])).stdout.contains("canarytag"))
        // Edits go on, encrypted; history opens on the device.
        _ = ok(try await b.run(["edit", shared.id, "--text", "canaryone by a\nmiddle\nlast after"]))
        _ = ok(try await b.run(["sync"]))
        _ = ok(try await a.run(["sync"]))
        #expect(try await a.texts().contains("canaryone by a\nmiddle\nlast after"))
        // Again: nothing to do.
        let again = ok(try await a.run(["encryption", "enable", "--password-stdin"], stdin: NotesE2E.password + "\n"))
        #expect(again.stdout.contains("already end-to-end encrypted"), "\(again)")
        #expect(try server.occurrences(of: "canary") == 0)
    }

    @Test func aConversionKilledHalfwayIsCarriedOnByTheNextSync() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("cv-kill")
        defer { a.remove() }
        try await signUpPlaintext(a, server)
        try await NotesE2EHTTP.signIn(server.url, username: "alice").seed(5000, prefix: "canaryseed")
        _ = ok(try await a.run(["sync"]))
        let killed = try await a.runKilling(
            ["encryption", "enable", "--password-stdin"], stdin: NotesE2E.password + "\n", when: "sending changes 2000/")
        #expect(killed.killed, "the conversion finished before it could be killed: \(killed)")
        let halfway = ok(try await a.run(["status"]))
        #expect(halfway.stdout.contains("Encryption: converting ("), "\(halfway)")
        _ = ok(try await a.run(["sync"]))
        #expect(ok(try await a.run(["status"])).stdout.contains("Encryption: end-to-end encrypted"))
        #expect(try await a.texts().count == 5000)
        #expect(try server.occurrences(of: "canaryseed") == 0)
    }

    @Test func enableAsksThePasswordOnATerminalAndAWrongOneChangesNothing() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("cv-pty")
        defer { a.remove() }
        try await signUpPlaintext(a, server)
        _ = ok(try await a.run(["add", "canarypty note"]))
        _ = ok(try await a.run(["sync"]))
        let wrong = try await a.run(["encryption", "enable", "--password-stdin"], stdin: "not the password\n")
        #expect(wrong.status == 4 && wrong.stderr.contains("Wrong password"), "\(wrong)")
        #expect(ok(try await a.run(["status"])).stdout.contains("Encryption: none"))
        let typed = try await AccountsEndToEndTests().runInTerminal(
            a, ["encryption", "enable"], answers: [("Password for alice: ", NotesE2E.password)])
        #expect(typed.status == 0 && typed.output.contains("Encrypted 1 note; alice's account is end-to-end encrypted"), "\(typed)")
        #expect(typed.output.contains("recovery key") && !typed.output.contains(NotesE2E.password), "\(typed)")
        #expect(try server.occurrences(of: "canarypty") == 0)
    }

    @Test func anAccountTheOperatorMadeIsEncryptedAtItsFirstSignIn() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("cv-op-a")
        let b = try NotesDevice("cv-op-b")
        defer { a.remove(); b.remove() }
        let data = server.directory.appendingPathComponent("data").path
        let added = try await OperatorsEndToEndTests.notesyncd(
            ["users", "add", "olga", "--data-dir", data, "--bcrypt-cost", "4", "--password-stdin"], stdin: NotesE2E.password + "\n")
        #expect(added.status == 0, "\(added.output)")
        let first = ok(try await login(a, server, "olga"))
        #expect(first.stderr.contains("it is now end-to-end encrypted") && first.stderr.contains("recovery key"), "\(first)")
        #expect(ok(try await a.run(["status"])).stdout.contains("Encryption: end-to-end encrypted"))
        _ = ok(try await a.run(["add", "canaryolga writes"]))
        _ = ok(try await a.run(["sync"]))
        // Another device signs in with the same password: no second set-up, the note opens.
        let second = ok(try await login(b, server, "olga"))
        #expect(!second.stderr.contains("now end-to-end encrypted"), "\(second)")
        #expect(try await b.texts() == ["canaryolga writes"])
        #expect(try server.occurrences(of: "canaryolga") == 0)
    }
}
