import Foundation
import Testing
import TestSupport

/// End-to-end encryption with the real binaries (issue 32): `notes signup` makes an encrypted account (the recovery
/// key shown once), a second device signs in with the password, both converge, and the daemon's SQLite file and its
/// WAL hold none of the canary words every note is made of.
@Suite("encryption end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct EncryptionEndToEndTests {
    func ok(_ run: NotesRun, sourceLocation: SourceLocation = #_sourceLocation) -> NotesRun {
        #expect(run.status == 0, "\(run)", sourceLocation: sourceLocation)
        return run
    }

    /// How many times `word` occurs in the daemon's database file and its WAL.
    func occurrences(of word: String, in server: NotesE2EServer) throws -> Int {
        let database = server.directory.appendingPathComponent("data/notesyncd.sqlite").path
        let needle = Data(word.utf8)
        var hits = 0
        for file in [database, database + "-wal"] where FileManager.default.fileExists(atPath: file) {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
            var start = bytes.startIndex
            while let found = bytes.range(of: needle, in: start..<bytes.endIndex) {
                hits += 1
                start = found.upperBound
            }
        }
        return hits
    }

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
        #expect(try occurrences(of: "canary", in: server) == 0)
    }
}
