import Foundation
import Testing
import TestSupport

/// The real `notes` binary against the real `notesyncd`, one `--home` per simulated device.
@Suite("notes end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct NotesEndToEndTests {
    func signUp(_ device: NotesDevice, _ server: NotesE2EServer, _ username: String) async throws {
        ok(try await account(device, "signup", server.url, username))
    }

    func logIn(_ device: NotesDevice, _ server: NotesE2EServer? = nil, _ username: String, _ extra: [String] = []) async throws -> NotesRun {
        var arguments = ["login", "--username", username, "--password-stdin"] + extra
        if let server { arguments += ["--server", server.url] }
        return try await device.run(arguments, stdin: NotesE2E.password + "\n")
    }

    @Test func twoDevicesEditOfflineThenSync() async throws {
        try await withServer { server in
            let a = try NotesDevice("a")
            let b = try NotesDevice("b")
            defer { a.remove(); b.remove() }
            try await signUp(a, server, "alice")
            ok(try await logIn(b, server, "alice"))

            ok(try await a.run(["add", "from a"]))
            ok(try await a.run(["add", "shared\nmiddle\nlast"]))
            ok(try await b.run(["add"], stdin: "from b, piped\n"))
            ok(try await a.run(["sync"]))
            ok(try await b.run(["sync"]))
            ok(try await a.run(["sync"]))
            let expected = ["from a", "from b, piped", "shared\nmiddle\nlast"]
            #expect(try await a.texts() == expected)
            #expect(try await b.texts() == expected)

            // Both edit the shared note offline, on lines that do not touch: the server merges.
            let listed = try await b.run(["list", "--json"]).json([NotesE2EListedNote].self)
            let shared = try #require(listed.first { $0.text.hasPrefix("shared") })
            ok(try await a.run(["edit", shared.id, "--text", "shared by a\nmiddle\nlast"]))
            ok(try await b.run(["edit", shared.id.lowercased(), "--text", "shared\nmiddle\nlast by b"]))
            ok(try await a.run(["sync"]))
            let merged = try await b.run(["sync", "--json"])
            ok(merged)
            #expect(merged.stdout.contains("\"merged\" : 1"))
            ok(try await a.run(["sync"]))
            let final = ["from a", "from b, piped", "shared by a\nmiddle\nlast by b"]
            #expect(try await a.texts() == final)
            #expect(try await b.texts() == final)
            #expect(try await a.status().pending == 0)
        }
    }

    @Test func logoutThenLoginToTheSameAccountMakesNoDuplicates() async throws {
        try await withServer { server in
            let a = try NotesDevice("a")
            let viewer = try NotesDevice("viewer")
            defer { a.remove(); viewer.remove() }
            try await signUp(a, server, "alice")
            for index in 0..<3 { ok(try await a.run(["add", "note \(index)"])) }
            ok(try await a.run(["sync"]))
            ok(try await a.run(["add", "written before logout"]))

            let logout = try await a.run(["logout"])
            ok(logout)
            #expect(logout.stderr.contains("1 note has unsynced changes; they stay on this device and will sync at alice's next sign-in"))
            #expect(try await a.texts().count == 4, "logout keeps every note")
            ok(try await a.run(["add", "written while signed out"]))
            let sync = try await a.run(["sync"])
            #expect(sync.status == 4 && sync.stderr.hasPrefix("notes: Not signed in"))

            let login = try await logIn(a, nil, "alice", ["--carry"])  // the server is remembered
            ok(login)
            #expect(login.stdout.contains("Signed in as alice"))
            #expect(!login.stderr.contains("conflict"))
            ok(try await logIn(viewer, server, "alice"))
            let expected = ["note 0", "note 1", "note 2", "written before logout", "written while signed out"]
            #expect(try await a.texts() == expected)
            #expect(try await viewer.texts() == expected)
            #expect(try await a.status().conflicts == 0)
        }
    }

    @Test func loginToASecondAccountLeavesTheFirstUntouched() async throws {
        try await withServer { server in
            let a = try NotesDevice("a")
            let aliceViewer = try NotesDevice("alice-viewer")
            let bobViewer = try NotesDevice("bob-viewer")
            defer { a.remove(); aliceViewer.remove(); bobViewer.remove() }
            try await signUp(a, server, "alice")
            ok(try await a.run(["add", "alice's note"]))
            ok(try await a.run(["sync"]))
            ok(try await a.run(["logout"]))
            ok(try await a.run(["add", "after alice"]))
            ok(
                try await a.run(
                    ["signup", "--no-encryption", "--server", server.url, "--username", "bob", "--password-stdin", "--carry"], stdin: NotesE2E.password + "\n"))
            let status = try await a.status()
            #expect(status.username == "bob" && status.pending == 0)

            ok(try await logIn(aliceViewer, server, "alice"))
            ok(try await logIn(bobViewer, server, "bob"))
            #expect(try await aliceViewer.texts() == ["alice's note"])
            // Issue 16: only the note written while signed out, carried when asked; alice's stays hers.
            #expect(try await bobViewer.texts() == ["after alice"])
        }
    }

    @Test func killingASyncLosesNothingAndResumes() async throws {
        try await withServer { server in
            let a = try NotesDevice("a")
            let b = try NotesDevice("b")
            let viewer = try NotesDevice("viewer")
            defer { a.remove(); b.remove(); viewer.remove() }
            try await signUp(a, server, "alice")
            let count = 20_000
            try await NotesE2EHTTP.signIn(server.url, username: "alice").seed(count, prefix: "seeded")

            // Killed while pulling (the sign-in's first sync).
            let pulling = try await b.runKilling(
                ["login", "--server", server.url, "--username", "alice", "--password-stdin"], stdin: NotesE2E.password + "\n",
                when: "Receiving notes")
            #expect(pulling.killed, "the sync finished before it could be killed: \(pulling)")
            #expect(pulling.stderr.contains(" of \(count.formatted())"), "the progress line counts towards the account's notes")
            ok(try await b.run(["sync"]))
            var status = try await b.status()
            #expect(status.notes == count && status.pending == 0)

            // Signing in again after a sign-out downloads nothing twice (issue 30): the notes kept their server IDs
            // and the account its cursor; only the note written meanwhile goes up.
            ok(try await b.run(["add", "one more"]))
            ok(try await b.run(["logout"]))
            let again = try await b.run(["login", "--username", "alice", "--password-stdin", "--json"], stdin: NotesE2E.password + "\n")
            ok(again)
            let resumed = try again.json(NotesE2ESignIn.self)
            #expect(resumed.sync?.pulled == 1 && resumed.sync?.created == 1, "\(again)")

            // Killed while a sign-in pulls the account to find notes it already holds (a device that imported an
            // export of them, so they have no server ID): the notes the pull had not reached yet are pushed by the
            // next sync by client ID, and the server reconciles them: no duplicate, no conflict.
            let c = try NotesDevice("c")
            defer { c.remove() }
            let export = b.home.deletingLastPathComponent().appendingPathComponent("b-export.json")
            let exported = try await b.run(["export"])
            ok(exported)
            try Data(exported.stdout.utf8).write(to: export)
            ok(try await c.run(["import", export.path]))
            let finding = try await c.runKilling(
                ["login", "--server", server.url, "--username", "alice", "--password-stdin", "--carry"], stdin: NotesE2E.password + "\n",
                when: "Receiving notes")
            #expect(finding.killed, "the sync finished before it could be killed: \(finding)")
            ok(try await c.run(["sync"]))
            status = try await c.status()
            #expect(status.notes == count + 1 && status.pending == 0 && status.conflicts == 0)

            let server = try await NotesE2EHTTP.signIn(server.url, username: "alice").liveNoteCount()
            #expect(server.live == count + 1 && server.distinctClientIDs == count + 1, "no duplicates on the server")
        }
    }

    @Test func badInputGetsOneClearLine() async throws {
        let device = try NotesDevice("bad")
        defer { device.remove() }
        ok(try await device.run(["add", "first"]))
        ok(try await device.run(["add", "second"]))
        let notes = try await device.run(["list", "--json"]).json([NotesE2EListedNote].self)
        #expect(notes.count == 2)

        fails(try await device.run(["show", "7ZZZZZZZ"]), 1, saying: "No note has an ID starting with")
        let common = String(notes[0].id.prefix(1))
        #expect(notes[1].id.hasPrefix(common))
        fails(try await device.run(["show", common]), 1, saying: "matches 2 notes")
        fails(try await device.run(["rm", "not/an/id"]), 1, saying: "is not a note ID")
        fails(try await device.run(["add", ""]), 1, saying: "cannot be empty")
        fails(try await device.run(["add"], stdin: "  \n\n"), 1, saying: "cannot be empty")
        fails(try await device.run(["edit", notes[0].id, "--text", " "]), 1, saying: "notes rm")
        #expect(try await device.texts() == ["first", "second"])

        let show = try await device.run(["show", notes[0].id])
        ok(show)
        #expect(show.stdout.hasSuffix("second\n") || show.stdout.hasSuffix("first\n"))

        // A home that is a file.
        let file = device.home.deletingLastPathComponent().appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        let unreadable = try await device.run(["list", "--home", file.path], withHome: false)
        fails(unreadable, 1, saying: "is not a directory")

        // A server that is not a FlakeNotes server, and one that is not there at all.
        let garbage = try NotesE2EFakeServer.htmlPage()
        defer { garbage.stop() }
        fails(
            try await device.run(["login", "--server", garbage.url, "--username", "alice", "--password-stdin", "--no-carry"], stdin: "password123\n"),
            3, saying: "not a FlakeNotes answer")
        fails(
            try await device.run(["login", "--server", "http://127.0.0.1:1", "--username", "alice", "--password-stdin", "--no-carry"], stdin: "password123\n"),
            3, saying: "cannot be reached")
        #expect(try await device.status().signedIn == false)

        // Wiping needs a confirmation that cannot be asked without a terminal.
        fails(try await device.run(["logout", "--wipe"]), 2, saying: "--yes")
        #expect(try await device.texts().count == 2)
        ok(try await device.run(["logout", "--wipe", "--yes"]))
        #expect(try await device.texts().isEmpty)

        // Usage errors, help and completion.
        #expect(try await device.run(["frobnicate"]).status == 2)
        #expect(try await device.run(["search"]).status == 2)
        let help = try await device.run(["--help"], withHome: false)
        #expect(help.status == 0 && help.stdout.contains("Exit status"))
        let completion = try await device.run(["--generate-completion-script", "bash"], withHome: false)
        #expect(completion.status == 0 && completion.stdout.contains("notes"))
    }
}
