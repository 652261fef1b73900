import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Issue 19: `notes watch` against real daemons, in a real terminal (tmux): it receives another device's note
/// without any `notes sync`, pushes a note another `notes` process wrote, rides out a daemon restart, and stops on
/// Ctrl-C with exit 0 and nothing left to send.
@Suite(
    "notes watch, end to end", .serialized,
    .enabled(if: NotesE2E.binariesExist && TmuxSession.available, "needs the notes and notesyncd binaries and tmux"))
struct WatchEndToEndTests {
    static func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// `notes watch` of `device` in a tmux session (a real terminal), once it has started and run its first sync
    /// (which prints no line when it moved nothing: the device's last sync time tells).
    static func watch(_ device: NotesDevice, directory: URL) async throws -> TmuxSession {
        let before = try await device.status().lastSync
        let command = [NotesE2E.notesBinary.path, "watch", "--home", device.home.path].map(quote).joined(separator: " ")
        let session = try await TmuxSession("env TERM=xterm \(command)", directory: directory)
        try await session.waitFor("the watch to start") { $0.contains("Watching alice's notes on http://") }
        let deadline = ContinuousClock.now + .seconds(30)
        while try await device.status().lastSync == before {
            guard ContinuousClock.now < deadline else { throw NotesE2EError("no first sync in 30 s: \(try await session.screen())") }
            try await Task.sleep(for: .milliseconds(50))
        }
        return session
    }

    /// A laptop and a phone, both signed in as alice on `url` (the caller removes them).
    func aliceOnLaptopAndPhone(_ url: String) async throws -> (laptop: NotesDevice, phone: NotesDevice) {
        let laptop = try NotesDevice("laptop")
        let phone = try NotesDevice("phone")
        _ = ok(try await account(laptop, "signup", url, "alice"))
        _ = ok(try await account(phone, "login", url, "alice"))
        return (laptop, phone)
    }

    /// Polls `device`'s notes (another `notes` process reading the store the watch writes) until `condition`.
    func waitForTexts(_ device: NotesDevice, _ what: String, seconds: Double = 30, _ condition: ([String]) -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var last: [String] = []
        while ContinuousClock.now < deadline {
            last = try await device.texts()
            if condition(last) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw NotesE2EError("waited \(seconds) s for \(what); the device has \(last)")
    }

    @Test func watchReceivesPushesReconnectsAndStopsOnControlC() async throws {
        let directory = try NotesE2E.temporaryDirectory("watch")
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = ["--data-dir", directory.appendingPathComponent("data").path]
        let log = directory.appendingPathComponent("notesyncd.log")
        var daemon = try await DaemonProcess.startOnRestartablePort(data, log: log)
        let (laptop, phone) = try await aliceOnLaptopAndPhone("http://127.0.0.1:\(daemon.port)")
        defer { laptop.remove(); phone.remove() }
        let session = try await Self.watch(phone, directory: directory)

        // 1. Another device's note arrives with no `notes sync` on this one.
        _ = ok(try await laptop.run(["add", "from the laptop"]))
        _ = ok(try await laptop.run(["sync"]))
        try await waitForTexts(phone, "the laptop's note") { $0 == ["from the laptop"] }
        try await session.waitFor("a line for the received note") { $0.contains("1 note received") }

        // 2. A note another `notes` process writes on this device is pushed by the watch.
        _ = ok(try await phone.run(["add", "from the phone"]))
        try await session.waitFor("a line for the sent note") { $0.contains("sent 1 change") }
        _ = ok(try await laptop.run(["sync"]))
        #expect(try await laptop.texts() == ["from the laptop", "from the phone"])

        // 3. The daemon restarts: the watch says so, retries, and carries on.
        await daemon.terminate()
        try await session.waitFor("the watch noticing the daemon is gone") { $0.contains("Retrying in") }
        daemon = try await DaemonProcess.start(["--port", "\(daemon.port)"] + data, log: log)
        _ = ok(try await laptop.run(["add", "after the restart"]))
        _ = ok(try await laptop.run(["sync"]))
        try await waitForTexts(phone, "the note written after the restart") { $0.contains("after the restart") }

        // 4. Ctrl-C: exit 0, "Stopped.", nothing left to send, and a one-off sync finds nothing to do.
        try await session.send(["C-c"])
        #expect(try await session.exitStatus() == 0)
        #expect(try await session.screen().contains("Stopped."))
        let status = try await phone.status()
        #expect(status.pending == 0)
        let sync = ok(try await phone.run(["sync", "--json"]))
        #expect(sync.stdout.contains("\"pushed\" : 0"), "\(sync)")
        await session.kill()
        await daemon.terminate()
    }

    /// Issue 28: a line for each sync that sent or received something, as README and `--help` say, and none for a
    /// sync that moved nothing (it printed "synced: nothing to send; nothing new." at start).
    @Test func aWatchPrintsALineOnlyForSyncsThatMovedSomething() async throws {
        let directory = try NotesE2E.temporaryDirectory("watch-lines")
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await DaemonProcess.start(in: directory)
        let (laptop, phone) = try await aliceOnLaptopAndPhone("http://127.0.0.1:\(daemon.port)")
        defer { laptop.remove(); phone.remove() }
        let session = try await Self.watch(phone, directory: directory)
        // Its first sync moved nothing: the screen holds the start line only.
        let started = try await session.screen()
        #expect(!started.contains("synced:"), "\(started)")

        _ = ok(try await laptop.run(["add", "from the laptop"]))
        _ = ok(try await laptop.run(["sync"]))
        try await session.waitFor("a line for the received note") { $0.contains("synced: nothing to send; 1 note received.") }
        _ = ok(try await phone.run(["add", "from the phone"]))
        let screen = try await session.waitFor("a line for the sent note") { $0.contains("synced: sent 1 change (1 new)") }
        // The syncs that brought back the phone's own push moved nothing: no line for them.
        #expect(screen.components(separatedBy: "synced:").count - 1 == 2, "\(screen)")

        try await session.send(["C-c"])
        #expect(try await session.exitStatus() == 0)
        await session.kill()
        await daemon.terminate()
    }

    /// A watching device signed out from another one (`notes devices revoke --others`) ends its watch at once, not
    /// when its 20 s wait runs out: the revocation wakes its waiting pull, which answers 401; the watch says so and
    /// exits 4 (authentication), and the device keeps its notes.
    @Test func aWatchingDeviceSignedOutFromAnotherEndsItsWatchAtOnce() async throws {
        let directory = try NotesE2E.temporaryDirectory("watch-revoked")
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await DaemonProcess.start(in: directory)
        let (laptop, phone) = try await aliceOnLaptopAndPhone("http://127.0.0.1:\(daemon.port)")
        defer { laptop.remove(); phone.remove() }
        _ = ok(try await phone.run(["add", "kept on the phone"]))
        let session = try await Self.watch(phone, directory: directory)
        // The watch's waiting pull follows its first sync at once; the revocation comes a process launch later.
        let started = ContinuousClock.now
        _ = ok(try await laptop.run(["devices", "revoke", "--others"]))
        let status = try await session.exitStatus(seconds: 15)
        #expect(ContinuousClock.now - started < .seconds(15))
        let screen = try await session.screen()
        #expect(status == 4, "\(screen)")
        #expect(screen.contains("Signed out by the server"), "\(screen)")
        #expect(try await phone.texts() == ["kept on the phone"])
        await session.kill()
        await daemon.terminate()
    }
}

/// Issue 19 across two real `notesyncd` processes on one PostgreSQL database: a device watching through one daemon
/// receives, without any `notes sync`, notes pushed through the other (the push's NOTIFY reaches the other daemon's
/// LISTEN connection, which wakes the waiting pull).
@Suite(
    "notes watch across daemons on PostgreSQL", .serialized,
    .enabled(if: NotesE2E.binariesExist && TmuxSession.available && ScaleOut.baseURL != nil, "needs FLAKENOTES_POSTGRES_URL, tmux and built binaries"))
struct WatchScaleOutEndToEndTests {
    @Test func aWatchOnOneDaemonReceivesPushesThroughTheOther() async throws {
        let database = try await ScaleOut.freshDatabase()
        let one = try await ScaleOut.daemon(database)
        let two = try await ScaleOut.daemon(database)
        defer { one.stop(); two.stop() }
        let writer = try NotesDevice("writer")
        let watcher = try NotesDevice("watcher")
        defer { writer.remove(); watcher.remove() }
        let helper = WatchEndToEndTests()
        ok(try await account(writer, "signup", one.url, "alice"))
        ok(try await account(watcher, "login", two.url, "alice"))

        let session = try await WatchEndToEndTests.watch(watcher, directory: watcher.home.deletingLastPathComponent())
        for index in 1...3 {
            ok(try await writer.run(["add", "through daemon one, \(index)"]))
            ok(try await writer.run(["sync"]))
            // Well within the 20-s wait: only a wake-up through NOTIFY delivers it this soon.
            try await helper.waitForTexts(watcher, "note \(index) through the other daemon", seconds: 10) { $0.count == index }
        }
        #expect(try await watcher.texts() == (1...3).map { "through daemon one, \($0)" })
        try await session.send(["C-c"])
        #expect(try await session.exitStatus() == 0)
        await session.kill()
    }
}
