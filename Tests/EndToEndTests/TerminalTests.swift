import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tmux server of the test's own (its own socket), one session running a shell command in a real
/// pseudo-terminal: the way a person runs `notes`. Keys go in with `send-keys`; the screen comes out with
/// `capture-pane`.
final class TmuxSession: Sendable {
    static let tmux = "/usr/bin/tmux"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: tmux) }

    let socket: String
    let name = "notes"

    /// Starts `command` (run by `/bin/sh`) in a fresh 100x30 terminal; when it ends the pane shows `[exit N]`.
    init(_ command: String, directory: URL) async throws {
        // A server per session: a session a test has not finished killing never collides with the next one.
        // (Outside the test's directory, which the test may remove first: the server is reached through it to end it.)
        socket = "/tmp/notes-tmux-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).socket"
        let wrapped = "\(command); echo \"[exit $?]\"; exec cat > /dev/null"
        let started = try await Subprocess.run(
            Self.tmux, ["-S", socket, "-f", "/dev/null", "new-session", "-d", "-s", name, "-x", "100", "-y", "30", wrapped])
        guard started.status == .exited(0) else { throw NotesE2EError("tmux did not start: \(started.output)") }
    }

    /// The visible screen.
    func screen() async throws -> String {
        try await Subprocess.run(Self.tmux, ["-S", socket, "capture-pane", "-p", "-t", name]).output
    }

    /// Types `keys` (tmux key names such as `Escape`, `Enter`, `C-c`, or literal text with `literal`).
    func send(_ keys: [String], literal: Bool = false) async throws {
        let result = try await Subprocess.run(Self.tmux, ["-S", socket, "send-keys", "-t", name] + (literal ? ["-l"] : []) + keys)
        guard result.status == .exited(0) else { throw NotesE2EError("send-keys failed: \(result.output)") }
    }

    /// Types `text` literally (no key names).
    func send(_ text: String, literal: Bool) async throws {
        try await send([text], literal: literal)
    }

    /// Polls the screen until `condition` holds, at most `seconds`; returns the screen that satisfied it.
    @discardableResult
    func waitFor(_ what: String, seconds: Double = 30, _ condition: (String) -> Bool) async throws -> String {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var last = ""
        while ContinuousClock.now < deadline {
            last = try await screen()
            if condition(last) { return last }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw NotesE2EError("waited \(seconds) s for \(what); the screen shows:\n\(last)")
    }

    /// The command's exit status, once the pane shows it.
    func exitStatus(seconds: Double = 30) async throws -> Int32 {
        let screen = try await waitFor("the command to exit", seconds: seconds) { $0.contains("[exit ") }
        let tail = screen[screen.range(of: "[exit ")!.upperBound...]
        return Int32(tail.prefix { $0.isNumber }) ?? -1
    }

    /// Ends the session (its processes get SIGHUP, as when a terminal window closes) and the server.
    func kill() async {
        _ = try? await Subprocess.run(Self.tmux, ["-S", socket, "kill-server"])
    }

    /// A session a test did not end (it failed, or its command finished and the pane waits in `cat`, which ends
    /// when the terminal goes) ends with the test: no tmux server, editor or `notes` outlives it. (A pane waiting
    /// in `sleep` instead outlived its server and held `swift test`'s output pipe open until it ended.)
    deinit {
        if let child = try? Subprocess.spawn(Self.tmux, ["-S", socket, "kill-server"], stdout: .null, stderr: .null) {
            _ = child.waitBlocking()
        }
        unlink(socket)
    }
}

/// `notes` in a real terminal: the editor path, as a person uses it (tmux drives a real `vi`).
@Suite(
    "notes in a terminal", .serialized,
    .enabled(if: NotesE2E.binariesExist && TmuxSession.available && FileManager.default.isExecutableFile(atPath: "/usr/bin/vim.tiny"),
        "needs the notes binary, tmux and vim-tiny (scripts/install-deps.sh)"))
struct TerminalTests {
    static let vi = "/usr/bin/vim.tiny"

    /// A directory with the device's home and its own `$TMPDIR` (where the editor's file must not outlive a run).
    struct Setup {
        let directory: URL
        var home: URL { directory.appendingPathComponent("home") }
        var temporary: URL { directory.appendingPathComponent("tmp") }

        init() throws {
            directory = try NotesE2E.temporaryDirectory("terminal")
            try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        }

        /// A shell command running `notes ARGS` with this home, `$TMPDIR` and `editor`.
        func notes(_ arguments: [String], editor: String) -> String {
            let quoted = ([NotesE2E.notesBinary.path] + arguments + ["--home", home.path]).map(Self.quote).joined(separator: " ")
            return "env -u VISUAL TERM=xterm TMPDIR=\(Self.quote(temporary.path)) EDITOR=\(Self.quote(editor)) \(quoted)"
        }

        /// Files the editor runs on that are still there.
        func leftovers() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: temporary.path).filter { $0.hasPrefix("notes-") }
        }

        static func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// vi draws its screen (empty-line tildes) only when it owns the terminal: in a process group of its own it is
    /// stopped and the screen stays blank, whatever is typed.
    static func viIsUp(_ screen: String) -> Bool {
        screen.split(separator: "\n").filter { $0.hasPrefix("~") }.count >= 5
    }

    @Test func addAndEditInVi() async throws {
        let setup = try Setup()
        defer { setup.remove() }
        let session = try await TmuxSession(setup.notes(["add"], editor: Self.vi), directory: setup.directory)
        try await session.waitFor("vi's screen", Self.viIsUp)
        #expect(try setup.leftovers().count == 1, "the note is edited in a temporary file")
        try await session.send(["i"])
        try await session.send(["typed in vi", "with a second line"].joined(separator: "\r"), literal: true)
        try await session.send(["Escape", ":wq", "Enter"])
        let status = try await session.exitStatus()
        let screen = try await session.screen()
        #expect(status == 0, "\(screen)")
        #expect(try await session.screen().contains("Added "))
        #expect(try setup.leftovers().isEmpty)
        await session.kill()

        let device = NotesDevice(home: setup.home)
        let listed = try await device.run(["list", "--json"]).json([NotesE2EListedNote].self)
        #expect(listed.map(\.text) == ["typed in vi\nwith a second line"])

        // `edit` opens the current text.
        let edit = try await TmuxSession(setup.notes(["edit", listed[0].id], editor: Self.vi), directory: setup.directory)
        try await edit.waitFor("vi showing the note") { $0.contains("typed in vi") && $0.contains("with a second line") }
        try await edit.send(["G", "o"])
        try await edit.send("and a third", literal: true)
        try await edit.send(["Escape", ":wq", "Enter"])
        #expect(try await edit.exitStatus() == 0)
        #expect(try await device.texts() == ["typed in vi\nwith a second line\nand a third"])
        #expect(try setup.leftovers().isEmpty)
    }

    /// Issue 31 on a terminal: `add -t` tags the note written in vi (a bad tag is refused before vi opens), and the
    /// listing shows pinned notes first with their tags; an archived one is left out.
    @Test func addWithTagsInViThenListOnTheTerminal() async throws {
        let setup = try Setup()
        defer { setup.remove() }
        let refused = try await TmuxSession(setup.notes(["add", "-t", "no spaces"], editor: Self.vi), directory: setup.directory)
        #expect(try await refused.exitStatus() == 2)
        #expect(try await refused.screen().contains("notes: A tag holds only letters"))
        #expect(try setup.leftovers().isEmpty, "the editor never opened")
        await refused.kill()

        let session = try await TmuxSession(setup.notes(["add", "-t", "idea", "-t", "Work"], editor: Self.vi), directory: setup.directory)
        try await session.waitFor("vi's screen", Self.viIsUp)
        try await session.send(["i"])
        try await session.send("tagged in vi", literal: true)
        try await session.send(["Escape", ":wq", "Enter"])
        #expect(try await session.exitStatus() == 0)
        await session.kill()
        let device = NotesDevice(home: setup.home)
        #expect(try await device.run(["add", "older, pinned"]).status == 0)
        #expect(try await device.run(["add", "archived"]).status == 0)
        let listed = try await device.run(["list", "--json"]).json([NotesE2EListedNote].self)
        let older = try #require(listed.first { $0.text == "older, pinned" })
        #expect(try await device.run(["pin", older.id]).status == 0)
        #expect(try await device.run(["archive", try #require(listed.first { $0.text == "archived" }).id]).status == 0)

        let list = try await TmuxSession(setup.notes(["list"], editor: Self.vi), directory: setup.directory)
        #expect(try await list.exitStatus() == 0)
        let lines = try await list.screen().split(separator: "\n")
        #expect(lines.count >= 2 && lines[0].hasSuffix("older, pinned  [pinned]"), "\(lines)")
        #expect(lines[1].hasSuffix("tagged in vi  #idea #Work"), "\(lines)")
        #expect(!lines.contains { $0.contains("archived") }, "\(lines)")
    }

    /// Ctrl-C goes to the editor, not to `notes`: an editor that dies of it saves nothing, and `notes` reports it
    /// and removes its file.
    @Test func controlCInTheEditorSavesNothingAndLeavesNoFile() async throws {
        let setup = try Setup()
        defer { setup.remove() }
        // An editor that waits for a line on the terminal.
        let session = try await TmuxSession(setup.notes(["add"], editor: "echo EDITING; read line; true"), directory: setup.directory)
        try await session.waitFor("the editor to start") { $0.contains("EDITING") }
        #expect(try setup.leftovers().count == 1)
        try await session.send(["C-c"])
        #expect(try await session.exitStatus() == 1)
        let screen = try await session.screen()
        #expect(screen.contains("notes: the editor") && screen.contains("nothing saved"), "\(screen)")
        #expect(try setup.leftovers().isEmpty)
        #expect(try await NotesDevice(home: setup.home).texts().isEmpty)
        await session.kill()

        // vi itself handles Ctrl-C (it does not quit), then `:q!` abandons the edit: nothing is added.
        let vi = try await TmuxSession(setup.notes(["add"], editor: Self.vi), directory: setup.directory)
        try await vi.waitFor("vi's screen", Self.viIsUp)
        try await vi.send(["i"])
        try await vi.send("never saved", literal: true)
        // The text is on the screen before Ctrl-C goes: a Ctrl-C the terminal sees first would discard typed keys.
        try await vi.waitFor("vi showing the typed text") { $0.contains("never saved") }
        try await vi.send(["C-c"])
        try await vi.waitFor("vi still running after Ctrl-C") { $0.contains("never saved") }
        try await vi.send(["Escape", ":q!", "Enter"])
        #expect(try await vi.exitStatus() == 1, "an empty note is refused")
        #expect(try setup.leftovers().isEmpty)
        #expect(try await NotesDevice(home: setup.home).texts().isEmpty)
    }

    /// Closing the terminal while the editor runs (SIGHUP to `notes` and the editor) removes the file too.
    @Test func closingTheTerminalWhileEditingLeavesNoFile() async throws {
        let setup = try Setup()
        defer { setup.remove() }
        let session = try await TmuxSession(setup.notes(["add"], editor: Self.vi), directory: setup.directory)
        try await session.waitFor("vi's screen", Self.viIsUp)
        #expect(try setup.leftovers().count == 1)
        await session.kill()
        let deadline = ContinuousClock.now + .seconds(20)
        while try !setup.leftovers().isEmpty && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try setup.leftovers().isEmpty)
    }
}
