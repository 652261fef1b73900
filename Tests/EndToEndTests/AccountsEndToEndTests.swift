import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 16, with the real binaries: accounts on one device stay apart, and the question about notes written while
/// signed out is asked on a real pseudo-terminal (or refused without one).
@Suite("accounts on one device, end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct AccountsEndToEndTests {
    /// What the server holds for `username`, seen by a brand-new device.
    func serverTexts(_ server: NotesE2EServer, _ username: String) async throws -> [String] {
        let viewer = try NotesDevice("viewer")
        defer { viewer.remove() }
        _ = ok(try await account(viewer, "login", server.url, username))
        return try await viewer.texts()
    }

    /// The story of the issue: demo on a laptop, then `signup -u bob` without logging out, then alice (whose phone
    /// holds a private note), then demo again. Nothing crosses.
    @Test func theStoryOfTheIssueNothingCrosses() async throws {
        try await withServer { server in
            let laptop = try NotesDevice("laptop")
            let phone = try NotesDevice("phone")
            defer { laptop.remove(); phone.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "demo"))
            _ = ok(try await laptop.run(["add", "demo one"]))
            _ = ok(try await laptop.run(["add", "demo two"]))
            _ = ok(try await laptop.run(["sync"]))
            _ = ok(try await account(phone, "signup", server.url, "alice"))
            _ = ok(try await phone.run(["add", "alice private: bank PIN hint"]))
            _ = ok(try await phone.run(["sync"]))

            // A new account without logging out: demo's notes are set aside, none is sent.
            let bob = ok(try await account(laptop, "signup", server.url, "bob"))
            #expect(bob.stdout.contains("demo's 2 notes set aside"), "\(bob)")
            #expect(bob.stdout.contains("Synced: nothing to send"), "\(bob)")
            #expect(try await laptop.texts() == [])
            #expect(try await laptop.status().setAside == 2)
            #expect(ok(try await laptop.run(["status"])).stdout.contains("Set aside:  2 notes hidden on this device"))
            #expect(try await serverTexts(server, "bob") == [])

            // alice on the laptop: her phone's note arrives; an edit made here goes to alice only.
            let alice = ok(try await account(laptop, "login", server.url, "alice"))
            #expect(try await laptop.texts() == ["alice private: bank PIN hint"])
            let listed = try await laptop.run(["list", "--json"]).json([NotesE2EListedNote].self)
            _ = ok(try await laptop.run(["edit", listed[0].id, "--text", "alice private: bank PIN hint\nedited on the laptop"]))
            _ = ok(try await laptop.run(["sync"]))

            // Back to demo: demo's notes as they were, nothing of alice's.
            let demo = ok(try await account(laptop, "login", server.url, "demo"))
            #expect(demo.stdout.contains("alice's 1 note set aside") && demo.stdout.contains("2 notes of demo back"), "\(demo)")
            #expect(try await laptop.texts() == ["demo one", "demo two"])
            #expect(try await serverTexts(server, "demo") == ["demo one", "demo two"])
            #expect(try await serverTexts(server, "alice") == ["alice private: bank PIN hint\nedited on the laptop"])
            #expect(try await serverTexts(server, "bob") == [])

            // The explicit way across: a copy, a new note in alice's account.
            let demoNotes = try await laptop.run(["list", "--json"]).json([NotesE2EListedNote].self)
            let one = try #require(demoNotes.first { $0.text == "demo one" })
            let copied = ok(try await laptop.run(["copy", one.id, "--to", "alice"]))
            #expect(copied.stdout.contains("into alice's account"), "\(copied)")
            let unknown = try await laptop.run(["copy", one.id, "--to", "nobody"])
            #expect(unknown.status == 2 && unknown.stderr.contains("No account 'nobody' was signed in to on this device"), "\(unknown)")
            _ = ok(try await account(laptop, "login", server.url, "alice"))
            #expect(try await serverTexts(server, "alice") == ["alice private: bank PIN hint\nedited on the laptop", "demo one"])
            #expect(try await serverTexts(server, "demo") == ["demo one", "demo two"])

            // Logout says whose notes stay; signed out, the list says whose notes it shows.
            let out = ok(try await laptop.run(["logout"]))
            #expect(out.stdout.contains("Kept alice's 2 notes on this device"), "\(out)")
            let list = ok(try await laptop.run(["list"]))
            #expect(list.stdout.hasPrefix("Signed out: showing alice's notes"), "\(list)")
        }
    }

    /// Without a terminal and without --carry/--no-carry, a sign-in with notes written while signed out is refused:
    /// one line on stderr, exit status 2, nothing sent, still signed out.
    @Test func withoutATerminalTheQuestionIsARefusalNotAGuess() async throws {
        try await withServer { server in
            let laptop = try NotesDevice("refuse")
            defer { laptop.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "demo"))
            _ = ok(try await laptop.run(["logout"]))
            _ = ok(try await laptop.run(["add", "written while signed out"]))
            let refused = try await account(laptop, "login", server.url, "demo")
            #expect(refused.status == 2, "\(refused)")
            #expect(refused.stderr.contains("--carry") && refused.stderr.split(separator: "\n").count == 1, "\(refused)")
            #expect(try await laptop.status().signedIn == false)
            #expect(try await serverTexts(server, "demo") == [])

            let kept = ok(try await account(laptop, "login", server.url, "demo", ["--no-carry"]))
            #expect(kept.stdout.contains("1 note written while signed out kept off demo"), "\(kept)")
            #expect(try await serverTexts(server, "demo") == [])
            _ = ok(try await laptop.run(["logout"]))
            let carried = ok(try await account(laptop, "login", server.url, "demo", ["--carry"]))
            #expect(carried.stdout.contains("1 note written while signed out added to demo"), "\(carried)")
            #expect(try await serverTexts(server, "demo") == ["written while signed out"])
        }
    }

    /// The question under a real pseudo-terminal, answered as a person would: first no, then yes.
    @Test func theQuestionIsAskedOnATerminal() async throws {
        try await withServer { server in
            let laptop = try NotesDevice("pty")
            defer { laptop.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "demo"))
            _ = ok(try await account(laptop, "signup", server.url, "bob"))
            _ = ok(try await laptop.run(["logout"]))
            for text in ["one", "two", "three"] { _ = ok(try await laptop.run(["add", "offline \(text)"])) }

            let question = "3 notes written while signed out: add them to demo? [y/N] "
            let no = try await runInTerminal(
                laptop, ["login", "--server", server.url, "--username", "demo"],
                answers: [(question, "n"), ("Password for demo: ", NotesE2E.password)])
            #expect(no.status == 0, "\(no)")
            #expect(no.output.contains("3 notes written while signed out kept off demo"), "\(no)")
            #expect(try await serverTexts(server, "demo") == [])

            _ = ok(try await laptop.run(["logout"]))
            let yes = try await runInTerminal(
                laptop, ["login", "--username", "bob"],
                answers: [("3 notes written while signed out: add them to bob? [y/N] ", "y"), ("Password for bob: ", NotesE2E.password)])
            #expect(yes.status == 0, "\(yes)")
            #expect(yes.output.contains("3 notes written while signed out added to bob"), "\(yes)")
            #expect(try await serverTexts(server, "bob") == ["offline one", "offline three", "offline two"])
            #expect(try await serverTexts(server, "demo") == [])
        }
    }

    /// `--wipe` on a sign-in to another account deletes that account's notes from this device only after a yes:
    /// refused without a terminal unless --yes, asked on a terminal (anything but yes keeps everything), and never
    /// asked when the same account signs in again (nothing is wiped then).
    @Test func wipingAnotherAccountsNotesIsConfirmedFirst() async throws {
        try await withServer { server in
            let laptop = try NotesDevice("wipe")
            defer { laptop.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "demo"))
            _ = ok(try await laptop.run(["add", "demo synced"]))
            _ = ok(try await laptop.run(["sync"]))
            _ = ok(try await laptop.run(["add", "demo unsynced"]))

            let refused = try await account(laptop, "signup", server.url, "bob", ["--wipe"])
            #expect(refused.status == 2 && refused.stderr.contains("--yes"), "\(refused)")
            #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused)")
            #expect(try await laptop.texts() == ["demo synced", "demo unsynced"])
            #expect(try await laptop.status().username == "demo")

            // The same account again: nothing to wipe, nothing asked.
            _ = ok(try await account(laptop, "login", server.url, "demo", ["--wipe"]))
            #expect(try await laptop.texts() == ["demo synced", "demo unsynced"])
            _ = ok(try await laptop.run(["add", "demo unsynced again"]))

            let question = "Delete demo's 3 notes from this device (1 with changes no server has: they will be lost)? Type 'yes' to confirm: "
            let no = try await runInTerminal(laptop, ["signup", "--no-encryption", "--username", "bob", "--wipe"], answers: [(question, "no")])
            #expect(no.status == 1 && no.output.contains("nothing deleted"), "\(no)")
            #expect(try await laptop.texts() == ["demo synced", "demo unsynced", "demo unsynced again"])

            let yes = try await runInTerminal(
                laptop, ["signup", "--no-encryption", "--username", "bob", "--wipe"],
                answers: [(question, "yes"), ("Choose a password: ", NotesE2E.password), ("Repeat the password: ", NotesE2E.password)])
            #expect(yes.status == 0, "\(yes)")
            #expect(yes.output.contains("demo's 3 notes deleted from this device"), "\(yes)")
            #expect(try await laptop.texts() == [])
            #expect(try await laptop.status().setAside == 0)
            #expect(try await serverTexts(server, "demo") == ["demo synced", "demo unsynced"])
            #expect(try await serverTexts(server, "bob") == [])
        }
    }

    struct TerminalRun: CustomStringConvertible {
        var status: Int32
        var output: String
        var description: String { "status \(status)\n\(output)" }
    }

    /// Runs `notes ARGS --home HOME` with stdin, stdout and stderr on a new pseudo-terminal; writes each answer (and a
    /// newline) once its prompt appears. Fails rather than hangs when a prompt does not come within 60 seconds.
    func runInTerminal(_ device: NotesDevice, _ arguments: [String], answers: [(String, String)]) async throws -> TerminalRun {
        let home = device.home
        return try await NotesE2E.blocking {
            let master = try NotesE2E.openPseudoTerminal()
            defer { close(master) }
            let scratch = try NotesE2E.temporaryDirectory("pty")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let process = try NotesE2E.spawnOnTerminal(master) { slave in
                try Subprocess.spawn(
                    NotesE2E.notesBinary.path, arguments + ["--home", home.path], environment: NotesDevice.environment(home: scratch),
                    stdin: .descriptor(slave), stdout: .descriptor(slave), stderr: .descriptor(slave))
            }

            var seen: [UInt8] = []
            var pending = answers[...]
            var answeredUpTo = 0
            var buffer = [UInt8](repeating: 0, count: 4096)
            let deadline = Date().addingTimeInterval(60)
            while true {
                var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
                let ready = poll(&poller, 1, 1000)
                if ready == 0 {
                    if Date() > deadline {
                        process.signal(SIGKILL)
                        _ = process.waitBlocking()
                        throw NotesE2EError("no prompt within 60 s; the terminal shows: \(String(decoding: seen, as: UTF8.self))")
                    }
                    continue
                }
                let count = read(master, &buffer, buffer.count)
                if count <= 0 { break }
                seen.append(contentsOf: buffer[0..<count])
                if let (prompt, answer) = pending.first {
                    let text = String(decoding: seen[answeredUpTo...], as: UTF8.self)
                    if text.contains(prompt) {
                        let line = Array((answer + "\n").utf8)
                        _ = line.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
                        pending = pending.dropFirst()
                        answeredUpTo = seen.count
                    }
                }
            }
            let status = process.waitBlocking()
            guard pending.isEmpty else {
                throw NotesE2EError("never asked \(pending.map(\.0)); the terminal shows: \(String(decoding: seen, as: UTF8.self))")
            }
            return TerminalRun(status: status.code, output: String(decoding: seen, as: UTF8.self))
        }
    }
}
