import Foundation
import SyncHarness
import Testing
import TestSupport

/// The account key's generations with the real binaries (issue 32): `notes devices revoke` rotates the key so the
/// revoked device cannot open what is written after; a device signing in after two rotations reads every note; a
/// password change rotates too; after `notesyncd users reset-password` the recovery key, typed on a terminal, gets
/// the account back. The stores are read with the `sqlite3` shell (scripts/install-deps.sh installs it).
@Suite("key rotation end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct KeyRotationEndToEndTests {
    let encryption = EncryptionEndToEndTests()

    /// The rows `sql` selects from the SQLite file at `path`, one line each.
    static func query(_ path: String, _ sql: String) async throws -> [String] {
        let (status, output) = try await Subprocess.run("/usr/bin/sqlite3", [path, sql], stdin: .null, timeLimit: .seconds(30))
        guard status.code == 0 else { throw NotesE2EError("sqlite3 \(path): \(output)") }
        return output.split(separator: "\n").map(String.init)
    }

    /// The key generation of each live note the server holds (bytes 1–4 of each envelope, big-endian).
    static func serverGenerations(_ server: NotesE2EServer) async throws -> [UInt32] {
        let path = server.directory.appendingPathComponent("data/notesyncd.sqlite").path
        return try await query(path, "SELECT CAST(text AS TEXT) FROM notes WHERE deleted = 0 ORDER BY server_id").map { text in
            let head = text.prefix(8).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            let bytes = try #require(Data(base64Encoded: head))
            return bytes[1...4].reduce(0) { $0 << 8 | UInt32($1) }
        }
    }

    /// The key generations a device's local store holds.
    static func deviceGenerations(_ device: NotesDevice) async throws -> [UInt32] {
        let files = FileManager.default.enumerator(at: device.home, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        let store = try #require(files.first { $0.lastPathComponent == "notes.sqlite" })
        return try await query(store.path, "SELECT generation FROM account_keys ORDER BY generation").compactMap { UInt32($0) }
    }

    /// `device`'s session ID as `notes devices` lists it.
    func sessionID(_ device: NotesDevice) async throws -> String {
        struct Listed: Decodable {
            var id: String
            var thisDevice: Bool
        }
        return try #require(try ok(try await device.run(["devices", "--json"])).json([Listed].self).first { $0.thisDevice }).id
    }

    @Test func aRevokedDeviceCannotOpenANoteWrittenAfterAndTheKeptOneReadsIt() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("kr-a")
        let b = try NotesDevice("kr-b")
        let c = try NotesDevice("kr-c")
        defer { a.remove(); b.remove(); c.remove() }
        try await encryption.signUp(a, server)
        _ = ok(try await a.run(["add", "canaryone before"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await encryption.login(b, server))
        _ = ok(try await encryption.login(c, server))

        let revoked = ok(try await a.run(["devices", "revoke", try await sessionID(c)]))
        #expect(revoked.stdout.contains("The account key is now generation 2"), "\(revoked)")
        _ = ok(try await a.run(["add", "canarytwo after the revocation"]))
        _ = ok(try await a.run(["sync"]))
        // The new note is sealed under generation 2, and that sync re-sealed the older one too (lazy re-seal).
        #expect(try await Self.serverGenerations(server) == [2, 2])
        // The kept device opens its hand-over at its next sync, without the password.
        _ = ok(try await b.run(["sync"]))
        #expect(try await b.texts() == ["canaryone before", "canarytwo after the revocation"])
        #expect(try await Self.deviceGenerations(b) == [1, 2])
        // The revoked one is signed out and holds generation 1 only: the new note's envelope is beyond it.
        #expect(try await c.run(["sync"]).status == 4)
        #expect(try await Self.deviceGenerations(c) == [1])
        #expect(try await c.texts() == ["canaryone before"])
        #expect(try server.occurrences(of: "canary") == 0)
    }

    @Test func aDeviceSigningInAfterTwoRotationsReadsEveryNote() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("kr2-a")
        let b = try NotesDevice("kr2-b")
        let c = try NotesDevice("kr2-c")
        let d = try NotesDevice("kr2-d")
        defer { a.remove(); b.remove(); c.remove(); d.remove() }
        try await encryption.signUp(a, server)
        _ = ok(try await a.run(["add", "one"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await encryption.login(b, server))
        _ = ok(try await a.run(["devices", "revoke", try await sessionID(b)]))
        _ = ok(try await a.run(["add", "two"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await encryption.login(c, server))
        let others = ok(try await a.run(["devices", "revoke", "--others"]))
        #expect(others.stdout.contains("generation 3"), "\(others)")
        _ = ok(try await a.run(["add", "three"]))
        _ = ok(try await a.run(["sync"]))
        #expect(try await Self.serverGenerations(server).last == 3)

        _ = ok(try await encryption.login(d, server))
        #expect(try await d.texts() == ["one", "three", "two"])
        #expect(try await Self.deviceGenerations(d) == [1, 2, 3])
    }

    @Test func aPasswordChangeRotatesAndAnotherDeviceReadsWithTheNewPassword() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("krp-a")
        let b = try NotesDevice("krp-b")
        defer { a.remove(); b.remove() }
        try await encryption.signUp(a, server)
        _ = ok(try await a.run(["add", "before"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await encryption.login(b, server))
        let changed = ok(try await a.run(["password", "--password-stdin"], stdin: NotesE2E.password + "\nnew password 123\n"))
        #expect(changed.stdout.contains("1 other device signed out"), "\(changed)")
        _ = ok(try await a.run(["add", "after"]))
        _ = ok(try await a.run(["sync"]))
        #expect(try await Self.serverGenerations(server) == [2, 2], "the new note, and the older one re-sealed by that sync")
        #expect(try await b.run(["sync"]).status == 4)
        #expect(try await Self.deviceGenerations(b) == [1])
        _ = ok(try await encryption.login(b, server, password: "new password 123"))
        #expect(try await b.texts() == ["after", "before"])
        #expect(try await Self.deviceGenerations(b) == [1, 2])
    }

    @Test func afterAResetTheRecoveryKeyTypedOnATerminalGetsTheNotesBack() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("krr-a")
        let b = try NotesDevice("krr-b")
        let c = try NotesDevice("krr-c")
        defer { a.remove(); b.remove(); c.remove() }
        let signup = ok(
            try await a.run(["signup", "--server", server.url, "--username", "alice", "--password-stdin"], stdin: NotesE2E.password + "\n"))
        let recoveryKey = try #require(
            signup.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { line in
                line.count == 69 && line.split(separator: "-").count == 14
            })
        _ = ok(try await a.run(["add", "canaryone"]))
        _ = ok(try await a.run(["sync"]))
        _ = ok(try await encryption.login(c, server))
        _ = ok(try await a.run(["devices", "revoke", try await sessionID(c)]))
        _ = ok(try await a.run(["add", "canarytwo, generation 2"]))
        _ = ok(try await a.run(["sync"]))

        let reset = try await OperatorsEndToEndTests.notesyncd(
            ["users", "reset-password", "alice", "--data-dir", server.directory.appendingPathComponent("data").path])
        #expect(reset.status == 0, "\(reset.output)")
        let temporary = String(try #require(reset.output.split(separator: "\n").first { $0.hasPrefix("password: ") }?.dropFirst(10)))

        // Without a terminal: one clear error, nothing stored.
        let scripted = try await encryption.login(b, server, password: temporary)
        #expect(scripted.status != 0 && scripted.stderr.contains("recovery key") && scripted.stderr.contains("still here"), "\(scripted)")
        // On a terminal without the key: what is lost and what is not, in one line.
        let without = try await AccountsEndToEndTests().runInTerminal(
            b, ["login", "--server", server.url, "--username", "alice"],
            answers: [("Password for alice: ", temporary), ("Recovery key: ", "")])
        #expect(without.status != 0 && without.output.contains("unreadable") && without.output.contains("still here"), "\(without)")
        // With it: every generation opens, the new password wraps the key, the notes come back.
        let recovered = try await AccountsEndToEndTests().runInTerminal(
            b, ["login", "--server", server.url, "--username", "alice"],
            answers: [
                ("Password for alice: ", temporary), ("Recovery key: ", recoveryKey), ("New password: ", "recovered pw 1"),
                ("Repeat the new password: ", "recovered pw 1"),
            ])
        #expect(recovered.status == 0 && recovered.output.contains("operator reset"), "\(recovered)")
        #expect(recovered.output.contains("Recovered alice"), "\(recovered)")
        #expect(!recovered.output.contains(recoveryKey) && !recovered.output.contains(temporary), "\(recovered)")
        #expect(try await b.texts() == ["canaryone", "canarytwo, generation 2"])
        #expect(try await Self.deviceGenerations(b) == [1, 2])
        // The first device signs in with the new password; the temporary one is gone.
        #expect(try await encryption.login(c, server, password: temporary).status != 0)
        _ = ok(try await encryption.login(a, server, password: "recovered pw 1"))
        #expect(try await a.texts() == ["canaryone", "canarytwo, generation 2"])
        #expect(try server.occurrences(of: "canary") == 0)
    }

    /// The recovery key a run printed on stderr (14 groups of 4).
    static func recoveryKey(in run: NotesRun) throws -> String {
        try #require(
            run.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { line in
                line.count == 69 && line.split(separator: "-").count == 14
            }, "\(run)")
    }

    @Test func aNewRecoveryKeyRecoversAScriptedResetAndTheOldOneNoLongerDoes() async throws {
        let server = try await NotesE2EServer.start()
        defer { server.stop() }
        let a = try NotesDevice("krk-a")
        let b = try NotesDevice("krk-b")
        defer { a.remove(); b.remove() }
        let signup = ok(
            try await a.run(["signup", "--server", server.url, "--username", "alice", "--password-stdin"], stdin: NotesE2E.password + "\n"))
        let old = try Self.recoveryKey(in: signup)
        _ = ok(try await a.run(["add", "kept"]))
        _ = ok(try await a.run(["sync"]))
        let renewed = ok(try await a.run(["encryption", "recovery-key"]))
        #expect(renewed.stdout.contains("generation 2"), "\(renewed)")
        let new = try Self.recoveryKey(in: renewed)
        #expect(new != old)

        let reset = try await OperatorsEndToEndTests.notesyncd(
            ["users", "reset-password", "alice", "--data-dir", server.directory.appendingPathComponent("data").path])
        let temporary = String(try #require(reset.output.split(separator: "\n").first { $0.hasPrefix("password: ") }?.dropFirst(10)))
        let scratch = try NotesE2E.temporaryDirectory("recovery-key")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let keyFile = scratch.appendingPathComponent("recovery.txt")
        func recover(with key: String) async throws -> NotesRun {
            try key.write(to: keyFile, atomically: true, encoding: .utf8)
            return try await b.run(
                ["encryption", "recover", "--server", server.url, "--username", "alice", "--recovery-key-file", keyFile.path, "--password-stdin"],
                stdin: temporary + "\nrecovered pw 2\n")
        }
        let refused = try await recover(with: old)
        #expect(refused.status != 0 && refused.stderr.contains("recovery key"), "\(refused)")
        let recovered = ok(try await recover(with: new))
        #expect(recovered.stdout.contains("Recovered alice"), "\(recovered)")
        #expect(try await b.texts() == ["kept"])
        _ = ok(try await encryption.login(a, server, password: "recovered pw 2"))
    }
}
