import Foundation
import NoteSyncProtocol
import NotesClient
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `notes watch` waiting on an idle daemon leaves the CPU alone: its waiting pull goes through AsyncHTTPClient
/// (Client/NotesClient/EventLoopHTTP.swift), where URLSession spun for as long as the pull waited
/// (Docs/PERFORMANCE.md, "notes watch while it waits").
@Suite(
    "notes watch's CPU while it waits", .serialized,
    .enabled(if: NotesE2E.binariesExist && FileManager.default.fileExists(atPath: "/proc/self/stat"), "needs the notes and notesyncd binaries and /proc"))
struct WatchCPUTests {
    /// The CPU time (user and system) process `pid` has used so far, from `/proc/PID/stat`.
    static func cpuSeconds(_ pid: pid_t) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The command name (field 2) is in parentheses and may hold spaces: count from after it (field 3 is the
        // state, so utime, field 14, is the 12th and stime, field 15, the 13th).
        guard let nameEnd = stat.lastIndex(of: ")") else { throw NotesE2EError("unreadable /proc/\(pid)/stat: \(stat)") }
        let fields = stat[stat.index(after: nameEnd)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw NotesE2EError("unreadable /proc/\(pid)/stat: \(stat)")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A watch waiting 6 s on a daemon where nothing changes uses less than 1.5 s of CPU in that time. Its waiting
    /// pulls ask for 2 s (`--wait 2`): URLSession's spin began once the first waiting pull had answered (20 s in with
    /// the default wait), so the window holds several. Measured on two cores: 3.2–3.4 s of CPU before (URLSession),
    /// 0.02–0.04 s after. The 6 s are the measured window, not a wait for something to happen.
    @Test func aWatchWaitingOnAnIdleDaemonLeavesTheCPUAlone() async throws {
        let directory = try NotesE2E.temporaryDirectory("watch-cpu")
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await DaemonProcess.start(in: directory)
        let device = try NotesDevice("watch-cpu-device")
        defer { device.remove() }
        let signUp = try await account(device, "signup", "http://127.0.0.1:\(daemon.port)", "alice")
        try #require(signUp.status == 0, "\(signUp)")

        let before = try await device.status().lastSync
        let output = directory.appendingPathComponent("watch.out")
        let watch = try Subprocess.spawn(
            NotesE2E.notesBinary.path, ["watch", "--wait", "2", "--home", device.home.path], environment: NotesDevice.environment(home: directory),
            stdout: .file(output.path), stderr: .otherStream)
        defer { watch.stopBlocking(grace: .seconds(10)) }
        // Its first sync has run (the device's last sync time tells): from then on only the waiting pull is out.
        let deadline = ContinuousClock.now + .seconds(30)
        while try await device.status().lastSync == before {
            guard ContinuousClock.now < deadline else { throw NotesE2EError("no first sync in 30 s: \(try String(contentsOf: output, encoding: .utf8))") }
            try await Task.sleep(for: .milliseconds(50))
        }

        let cpuAtStart = try Self.cpuSeconds(watch.pid)
        let started = ContinuousClock.now
        try await Task.sleep(for: .seconds(6))
        let used = try Self.cpuSeconds(watch.pid) - cpuAtStart
        let elapsed = ContinuousClock.now - started
        let screen = try String(contentsOf: output, encoding: .utf8)
        #expect(used < 1.5, "notes watch used \(used) s of CPU in \(elapsed) of waiting on an idle daemon")
        // It was waiting, not backing off from a failure.
        #expect(screen.contains("Watching alice's notes on http://"), "\(screen)")
        #expect(!screen.contains("Retrying in"), "\(screen)")

        watch.signal(SIGINT)
        #expect(await watch.waitForExit(timeLimit: .seconds(15)).code == 0)
        await daemon.terminate()
    }

    /// `notes password` (plaintext account) while the daemon hashes at bcrypt cost 13 (a check of the current
    /// password and a hash of the new one: about a second of waiting, more in a debug build) uses under 0.5 s of CPU:
    /// the requests the server answers after a password hash go through AsyncHTTPClient, where URLSession spun for as
    /// long as they waited (Docs/PERFORMANCE.md, "End-to-end encryption": 72 % of a password change's client CPU).
    @Test func aPasswordChangeLeavesTheCPUAloneWhileTheDaemonHashes() async throws {
        let directory = try NotesE2E.temporaryDirectory("password-cpu")
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await DaemonProcess.start(in: directory, ["--bcrypt-cost", "13"])
        let device = try NotesDevice("password-cpu-device")
        defer { device.remove() }
        let signUp = try await account(device, "signup", "http://127.0.0.1:\(daemon.port)", "alice")
        try #require(signUp.status == 0, "\(signUp)")
        let started = ContinuousClock.now
        let change = try await device.run(["password", "--password-stdin"], stdin: NotesE2E.password + "\n" + "a new password, long enough\n")
        let elapsed = ContinuousClock.now - started
        try #require(change.status == 0, "\(change)")
        let used = try #require(change.cpuSeconds)
        #expect(used < 0.5, "notes password used \(used) s of CPU in \(elapsed)")
        await daemon.terminate()
    }

    /// The waiting pull through AsyncHTTPClient answers and fails as URLSession's requests do: an HTTP answer (a
    /// 401 without a token) comes back whole; https to the plain daemon, and a port where nothing listens, fail with
    /// URLSessionTransport's words, at once (not after the 30-s timeout: AsyncHTTPClient's shared client retries a
    /// connection it cannot make until the deadline, and a watch whose daemon had stopped went 30 s without noticing).
    @Test func aWaitingPullAnswersAndFailsInURLSessionsWords() async throws {
        let directory = try NotesE2E.temporaryDirectory("waiting-pull")
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await DaemonProcess.start(in: directory)
        let pull = WireRequest(method: .get, path: Endpoint.pull.path, query: [(PullQuery.limit, "1"), (PullQuery.wait, "1")])

        let answer = try await URLSessionTransport(baseURL: URL(string: "http://127.0.0.1:\(daemon.port)")!).send(pull)
        #expect(answer.status == 401)
        #expect(String(decoding: answer.body, as: UTF8.self).contains("\"code\""), "\(answer)")

        var started = ContinuousClock.now
        let secure = URLSessionTransport(baseURL: URL(string: "https://127.0.0.1:\(daemon.port)")!)
        let tls = await #expect(throws: TransportError.self) { try await secure.send(pull) }
        #expect(tls?.message.contains("the secure (https) connection could not be set up") == true, "\(String(describing: tls))")
        #expect(ContinuousClock.now - started < .seconds(10))

        await daemon.terminate()
        started = ContinuousClock.now
        let gone = URLSessionTransport(baseURL: URL(string: "http://127.0.0.1:\(daemon.port)")!)
        let refused = await #expect(throws: TransportError.self) { try await gone.send(pull) }
        #expect(refused?.message == "127.0.0.1: connection refused", "\(String(describing: refused))")
        #expect(ContinuousClock.now - started < .seconds(10))
    }
}
