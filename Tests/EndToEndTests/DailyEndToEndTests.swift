import Foundation
import NoteSyncProtocol
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The everyday surface of the real `notes` binary against the real `notesyncd` (issue 17): input fidelity, the
/// server's limits, edit times, conflicts, one-line errors, search, listing, trash, export and import.
@Suite("notes every day, end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct DailyEndToEndTests {
    /// The daemon's arguments here: the cheapest password hashing (these tests sign in often).
    static let quickHashing = ["--bcrypt-cost", "4"]

    func signUp(_ device: NotesDevice, _ server: NotesE2EServer, _ username: String = "alice") async throws {
        ok(try await account(device, "signup", server.url, username, ["--carry"]))
    }

    func logIn(_ device: NotesDevice, _ server: NotesE2EServer, _ username: String = "alice") async throws {
        ok(try await account(device, "login", server.url, username, ["--carry"]))
    }

    /// Runs `notes` through `/bin/sh -c SCRIPT` (for bytes no Swift string can carry), with `$NOTES` the binary.
    func shell(_ script: String, home: URL) async throws -> NotesRun {
        let directory = try NotesE2E.temporaryDirectory("shell")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("out").path
        let errors = directory.appendingPathComponent("err").path
        var environment = ProcessInfo.processInfo.environment
        for key in ["EDITOR", "VISUAL", "XDG_DATA_HOME"] { environment.removeValue(forKey: key) }
        environment["NOTES"] = NotesE2E.notesBinary.path
        environment["NOTES_HOME"] = home.path
        let child = try Subprocess.spawn("/bin/sh", ["-c", script], environment: environment, stdout: .file(output), stderr: .file(errors))
        let status = await child.waitForExit(timeLimit: .seconds(120))
        return NotesRun(
            status: status.code, stdout: (try? String(contentsOfFile: output, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")
    }

    // MARK: - Defects

    @Test func textIsStoredByteForByteAndInvalidUTF8IsRefused() async throws {
        try await withServer(Self.quickHashing) { server in
            let a = try NotesDevice("a")
            let b = try NotesDevice("b")
            defer { a.remove(); b.remove() }
            try await signUp(a, server)
            ok(try await shell(#"printf 'before\0after\n' | "$NOTES" add"#, home: a.home))
            fails(try await shell(#"printf 'ok \377 bad\n' | "$NOTES" add"#, home: a.home), 1, saying: "not valid UTF-8 at byte offset 3")
            fails(try await shell(#""$NOTES" add "$(printf 'x\351y')""#, home: a.home), 1, saying: "Argument 2 is not valid UTF-8 at byte offset 1")
            ok(try await a.run(["sync"]))
            try await logIn(b, server)
            for device in [a, b] {
                let listed = try await device.run(["list", "--json"]).json([NotesE2EListedNote].self)
                #expect(listed.map { Array($0.text.utf8) } == [Array("before\u{0}after".utf8)])
            }
            let id = try #require(try await b.run(["list", "--json"]).json([NotesE2EListedNote].self).first?.id)
            let shown = try await shell(#""$NOTES" show "# + id + #" | tail -n 1 | od -An -c | tr -s ' '"#, home: b.home)
            #expect(shown.stdout.contains("b e f o r e \\0 a f t e r"), "\(shown)")
        }
    }

    @Test func aNoteTheServerRefusesIsRefusedWhenWrittenOrReportedByEverySync() async throws {
        try await withServer(Self.quickHashing + ["--max-note-bytes", "1000"]) { server in
            let a = try NotesDevice("a")
            defer { a.remove() }
            let big = String(repeating: "b", count: 1500)
            ok(try await a.run(["add", big]))  // offline, before the limit is known
            let signup = try await a.run(["signup", "--no-encryption", "--server", server.url, "--username", "alice", "--password-stdin", "--carry"], stdin: NotesE2E.password + "\n")
            #expect(signup.status == 1 && signup.stderr.contains("note_too_large"), "\(signup)")
            for _ in 0..<2 {
                let sync = try await a.run(["sync"])
                #expect(sync.status == 1, "\(sync)")
                #expect(sync.stderr.contains("is not synced: ") && sync.stderr.contains("note_too_large"), "\(sync)")
                #expect(sync.stderr.hasSuffix("notes: 1 note refused by the server is not synced; edit it to try again\n"), "\(sync)")
            }
            let status = try await a.run(["status"])
            #expect(status.stdout.contains("Pending:    nothing to send") && status.stdout.contains("Refused:    1 note"), "\(status)")
            // The JSON counts the same way: the refused note waits for an edit, so it is not pending.
            let counts = try await a.status()
            #expect(counts.pending == 0 && counts.failed == 1 && counts.overQuota == 0, "\(counts)")
            fails(try await a.run(["add", String(repeating: "c", count: 1001)]), 1, saying: "takes notes of at most 1000 bytes")
            #expect(try await a.texts() == [big])
        }
    }

    @Test func editTimesAreTheEditingDevicesOnEveryDevice() async throws {
        try await withServer(Self.quickHashing) { server in
            let a = try NotesDevice("a")
            let b = try NotesDevice("b")
            defer { a.remove(); b.remove() }
            try await signUp(a, server)
            ok(try await a.run(["add", "older"]))
            ok(try await a.run(["add", "newer"]))
            ok(try await a.run(["sync"]))
            try await Task.sleep(for: .milliseconds(20))  // so that "arrived at" would differ from "edited at"
            try await logIn(b, server)
            struct Timed: Decodable { var text: String; var editedAt: String }
            let onA = try await a.run(["list", "--json"]).json([Timed].self)
            let onB = try await b.run(["list", "--json"]).json([Timed].self)
            #expect(onA.map(\.text) == ["newer", "older"] && onB.map(\.text) == ["newer", "older"])
            #expect(onA.map(\.editedAt) == onB.map(\.editedAt))
        }
    }

    @Test func conflictsSayWhoseTextShowADiffAndResolve() async throws {
        try await withServer(Self.quickHashing) { server in
            let a = try NotesDevice("a")
            let b = try NotesDevice("b")
            defer { a.remove(); b.remove() }
            try await signUp(a, server)
            ok(try await a.run(["add", "plan\nship friday"]))
            ok(try await a.run(["sync"]))
            try await logIn(b, server)
            let id = try #require(try await a.run(["list", "--json"]).json([NotesE2EListedNote].self).first?.id)
            ok(try await a.run(["edit", id, "--text", "plan\nship monday"]))
            ok(try await b.run(["edit", id, "--text", "plan\nship tuesday"]))
            ok(try await a.run(["sync"]))
            let sync = try await b.run(["sync"])
            ok(sync)
            #expect(sync.stderr.contains("this device's text is in a conflict copy"), "\(sync)")
            let conflicts = try await b.run(["conflicts", "--diff"])
            #expect(conflicts.stdout.contains("this device's text"), "\(conflicts)")
            #expect(conflicts.stdout.contains("- ship monday") && conflicts.stdout.contains("+ ship tuesday"), "\(conflicts)")
            let pulled = try await a.run(["sync"])
            #expect(pulled.stderr.contains("arrived from another device"), "\(pulled)")
            #expect(try await a.run(["conflicts"]).stdout.contains("another device's text"))

            // Merge in the editor: a script editor replaces the draft (which marks the differing lines).
            let copy = try #require(try await b.run(["list", "--json"]).json([NotesE2EListedNote].self).first { $0.conflict }?.id)
            let merged = try await shell(
                #"EDITOR="sh -c 'grep -q \"<<<<<<<\" \"\$1\" && printf \"plan\nship monday or tuesday\n\" > \"\$1\"' sh" "$NOTES" resolve "#
                    + copy + " --merge", home: b.home)
            ok(merged)
            #expect(try await b.texts() == ["plan\nship monday or tuesday"])
            ok(try await b.run(["sync"]))
            ok(try await a.run(["sync"]))
            #expect(try await a.texts() == ["plan\nship monday or tuesday"])
            #expect(try await a.status().conflicts == 0)
        }
    }

    @Test func accountAndServerMistakesGetOneClearLine() async throws {
        try await withServer(Self.quickHashing) { server in
            let a = try NotesDevice("a")
            defer { a.remove() }
            fails(
                try await a.run(["login", "--server", "htp://127.0.0.1:1", "--username", "alice", "--password-stdin"], stdin: "password123\n"),
                2, saying: "is not a server URL")
            fails(
                try await a.run(["signup", "--no-encryption", "--server", "http//localhost", "--username", "alice", "--password-stdin"], stdin: "password123\n"),
                2, saying: "is not a server URL")
            // https against the plain-HTTP daemon.
            let https = server.url.replacingOccurrences(of: "http://", with: "https://")
            let tls = try await a.run(["login", "--server", https, "--username", "alice", "--password-stdin"], stdin: "password123\n")
            fails(tls, 3, saying: "use an http:// URL")
            #expect(!tls.stderr.contains("SSL routines") && !tls.stderr.contains("error:"), "\(tls)")
            // A port where something else listens and hangs up.
            let closer = try NotesE2EFakeServer.hangingUp()
            defer { closer.stop() }
            let hangUp = try await a.run(["login", "--server", closer.url, "--username", "alice", "--password-stdin"], stdin: "password123\n")
            fails(hangUp, 3, saying: "is a FlakeNotes server (notesyncd) listening at that address and port?")
            #expect(!hangUp.stderr.contains("Broken pipe") || hangUp.stderr.contains("FlakeNotes server"), "\(hangUp)")

            // signup remembers the server like login: a second account needs no --server.
            try await signUp(a, server)
            ok(try await a.run(["logout"]))
            ok(try await a.run(["signup", "--no-encryption", "--username", "bob", "--password-stdin"], stdin: NotesE2E.password + "\n"))
            #expect(try await a.status().username == "bob")

            // A lockout after failed sign-ins is an authentication failure (4).
            ok(try await a.run(["logout"]))
            var last = NotesRun(status: 0, stdout: "", stderr: "")
            for _ in 0..<6 {
                last = try await a.run(["login", "--username", "bob", "--password-stdin"], stdin: "wrong password\n")
                #expect(last.status == 4, "\(last)")
            }
            fails(last, 4, saying: "Too many failed sign-ins")

            // A home under a file.
            let file = a.home.deletingLastPathComponent().appendingPathComponent("plain-file")
            try Data("x".utf8).write(to: file)
            let under = try await a.run(["list", "--home", file.appendingPathComponent("notes").path], withHome: false)
            fails(under, 1, saying: "is a file, not a directory")
            #expect(!under.stderr.contains("NSCocoaErrorDomain"))

            // `--version` is the daemon's.
            let version = try await a.run(["--version"], withHome: false)
            let (_, body) = try await NotesE2EHTTP(baseURL: server.url).send(.info)
            let info = try JSONDecoder().decode(ServerInfo.self, from: body)
            #expect(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == info.version)
        }
    }

    @Test func syncSummaryAccountsForEveryChangeAndScriptsCanUseTheEditor() async throws {
        try await withServer(Self.quickHashing) { server in
            let a = try NotesDevice("a")
            let b = try NotesDevice("b")
            defer { a.remove(); b.remove() }
            try await signUp(a, server)
            try await logIn(b, server)
            ok(try await a.run(["add", "same on both"]))
            ok(try await a.run(["sync"]))
            ok(try await b.run(["sync"]))
            let id = try #require(try await a.run(["list", "--json"]).json([NotesE2EListedNote].self).first?.id)
            // Both make the same edit: the second push changes nothing on the server ("already up to date").
            ok(try await a.run(["edit", id, "--text", "edited the same"]))
            ok(try await b.run(["edit", id, "--text", "edited the same"]))
            ok(try await b.run(["add", "new on b"]))
            ok(try await a.run(["sync"]))
            let sync = try await b.run(["sync"])
            #expect(sync.stdout.contains("sent 2 changes (1 new, 1 already up to date)"), "\(sync)")

            // A script editor, with standard input neither a terminal nor a pipe: the editor runs.
            let edited = try await shell(
                #"EDITOR="sh -c 'printf \"from the editor\" > \"\$1\"' sh" "$NOTES" edit "# + id + " < /dev/null", home: a.home)
            ok(edited)
            #expect(edited.stdout.contains("Updated "), "\(edited)")
            #expect(try await a.texts() == ["from the editor"])
            ok(try await shell(#"printf 'from stdin' | "$NOTES" edit --stdin "# + id, home: a.home))
            #expect(try await a.texts().contains("from stdin"))
        }
    }

    /// Issue 28: `edit` reads piped text as `add` does (it refused: "no terminal to run the editor on"), even with an
    /// editor configured; an empty pipe is refused and changes nothing.
    @Test func editReadsAPipeAsAddDoes() async throws {
        let a = try NotesDevice("pipe")
        defer { a.remove() }
        ok(try await a.run(["add", "first text"]))
        let id = try #require(try await a.run(["list", "--json"]).json([NotesE2EListedNote].self).first?.id)
        let piped = try await shell(#"printf 'from the pipe\n' | "$NOTES" edit "# + id, home: a.home)
        ok(piped)
        #expect(piped.stdout.contains("Updated "), "\(piped)")
        #expect(try await a.texts() == ["from the pipe"])
        let withEditor = try await shell(
            #"printf 'piped, editor set' | EDITOR="sh -c 'printf \"from the editor\" > \"\$1\"' sh" "$NOTES" edit "# + id, home: a.home)
        ok(withEditor)
        #expect(try await a.texts() == ["piped, editor set"])
        let empty = try await shell(#"printf '' | "$NOTES" edit "# + id, home: a.home)
        fails(empty, 1, saying: "A note cannot be empty")
        #expect(try await a.texts() == ["piped, editor set"])
        // From a file, as `add` reads one.
        let file = a.home.deletingLastPathComponent().appendingPathComponent("text.txt")
        try Data("from a file\n".utf8).write(to: file)
        ok(try await shell(#""$NOTES" edit "# + id + " < '\(file.path)'", home: a.home))
        #expect(try await a.texts() == ["from a file"])
    }

    @Test func statusTellsAnInterruptedFirstSync() async throws {
        try await withServer(Self.quickHashing + ["--max-page", "50"]) { server in
            let a = try NotesDevice("a")
            let b = try NotesDevice("b")
            defer { a.remove(); b.remove() }
            try await signUp(a, server)
            try await NotesE2EHTTP.signIn(server.url, username: "alice").seed(20_000, prefix: "seeded")
            let killed = try await b.runKilling(
                ["login", "--server", server.url, "--username", "alice", "--password-stdin"], stdin: NotesE2E.password + "\n",
                when: "Receiving notes")
            #expect(killed.killed, "the sync finished before it could be killed: \(killed)")
            let status = try await b.run(["status"])
            #expect(status.stdout.contains("more changes waiting on the server"), "\(status)")
            #expect(status.stdout.contains("Last sync:  not finished"), "\(status)")
            ok(try await b.run(["sync"]))
            let done = try await b.run(["status"])
            #expect(!done.stdout.contains("not finished") && !done.stdout.contains("waiting on the server"), "\(done)")
        }
    }

    // MARK: - Features

    @Test func searchListTrashExportAndImport() async throws {
        try await withServer(Self.quickHashing) { server in
            let a = try NotesDevice("a")
            let fresh = try NotesDevice("fresh")
            defer { a.remove(); fresh.remove() }
            try await signUp(a, server)
            for index in 0..<30 { ok(try await a.run(["add", "note \(index)\nsome body text"])) }
            ok(try await a.run(["new", "Groceries\nbuy zebra milk"]))
            ok(try await a.run(["add", "zebra zebra zebra"]))

            let search = try await a.run(["search", "zebra"])
            let lines = search.stdout.split(separator: "\n")
            #expect(lines.first?.hasSuffix("zebra zebra zebra") == true, "ranked: \(search)")
            #expect(lines.contains { $0.contains("Groceries") } && lines.contains { $0.trimmingCharacters(in: .whitespaces) == "buy zebra milk" }, "\(search)")
            let json = try await a.run(["search", "ZEBRA", "milk", "--json"])
            #expect(json.stdout.contains("\"line\" : \"buy zebra milk\""), "\(json)")

            let limited = try await a.run(["ls", "--limit", "5"])
            #expect(limited.stdout.split(separator: "\n").count == 6 && limited.stdout.contains("… and 27 more"), "\(limited)")
            #expect(limited.stdout.split(separator: "\n").first?.contains("just now") == true, "\(limited)")

            // Trash: deleted, synced away, restored.
            let zebra = try #require(try await a.run(["list", "--json"]).json([NotesE2EListedNote].self).first { $0.text == "zebra zebra zebra" })
            ok(try await a.run(["rm", zebra.id]))
            ok(try await a.run(["sync"]))
            let trash = try await a.run(["trash"])
            #expect(trash.stdout.contains(zebra.id) && trash.stdout.contains("zebra zebra zebra"), "\(trash)")
            ok(try await a.run(["restore", zebra.id]))
            ok(try await a.run(["sync"]))
            #expect(try await a.texts().contains("zebra zebra zebra"))

            // Export, then import on a fresh device of the same account: nothing doubles.
            ok(try await a.run(["add", "written after the last sync"]))
            let exportFile = fresh.home.deletingLastPathComponent().appendingPathComponent("export.json")
            ok(try await a.run(["export", exportFile.path]))
            let imported = try await fresh.run(["import", exportFile.path])
            #expect(imported.stdout.contains("Imported 33 notes"), "\(imported)")
            try await logIn(fresh, server)
            ok(try await a.run(["sync"]))
            ok(try await fresh.run(["sync"]))
            #expect(try await fresh.texts() == (try await a.texts()))
            let counts = try await NotesE2EHTTP.signIn(server.url, username: "alice").liveNoteCount()
            #expect(counts.live == 33 && counts.distinctClientIDs == 33, "no duplicate on the server")

            // Markdown out, and back in twice: the second import adds nothing.
            let markdown = fresh.home.deletingLastPathComponent().appendingPathComponent("md")
            ok(try await a.run(["export", "--format", "markdown", markdown.path]))
            let files = try FileManager.default.contentsOfDirectory(atPath: markdown.path)
            #expect(files.count == 33 && files.allSatisfy { $0.hasSuffix(".md") })
            let other = try NotesDevice("other")
            defer { other.remove() }
            #expect(try await other.run(["import", markdown.path]).stdout.contains("Imported 33 notes"))
            #expect(try await other.run(["import", markdown.path]).stdout.contains("Imported 0 notes; skipped 33 with the same text"))
        }
    }
}
