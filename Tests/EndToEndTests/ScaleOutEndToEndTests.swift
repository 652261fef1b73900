import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Several real `notesyncd` processes on one PostgreSQL database (`FLAKENOTES_POSTGRES_URL`; each test makes its
/// own database with `psql`), with real `notes` devices and raw HTTP clients spread across them.
@Suite(
    "notesyncd scale-out on PostgreSQL", .serialized,
    .enabled(if: NotesE2E.binariesExist && ScaleOut.baseURL != nil, "needs FLAKENOTES_POSTGRES_URL and built binaries")
)
struct ScaleOutEndToEndTests {
    func logIn(_ device: NotesDevice, _ server: NotesE2EServer, _ username: String) async throws {
        ok(
            try await device.run(
                ["login", "--server", server.url, "--username", username, "--password-stdin"], stdin: NotesE2E.password + "\n"
            )
        )
    }

    /// Two daemons, two devices on different daemons, sign-out and sign-in with the re-push landing on the other
    /// daemon: one set of notes, converged, no duplicates, and the daemons mint with different instance numbers.
    @Test func devicesOnTwoDaemonsConvergeAndReconcileAcrossThem() async throws {
        let database = try await ScaleOut.freshDatabase()
        let one = try await ScaleOut.daemon(database)
        let two = try await ScaleOut.daemon(database)
        defer { one.stop(); two.stop() }
        try await ScaleOut.signUp(one.url, "alice")
        let oneSession = try await NotesE2EHTTP.signIn(one.url, username: "alice")
        let twoSession = try await NotesE2EHTTP.signIn(two.url, username: "alice")
        #expect(try await ScaleOut.instance(one.url) != ScaleOut.instance(two.url), "two daemons share an instance number")
        _ = (oneSession, twoSession)

        let a = try NotesDevice("a")
        let b = try NotesDevice("b")
        defer { a.remove(); b.remove() }
        try await logIn(a, one, "alice")
        try await logIn(b, two, "alice")
        for index in 0..<5 { ok(try await a.run(["add", "from a \(index)"])) }
        for index in 0..<5 { ok(try await b.run(["add", "from b \(index)"])) }
        ok(try await a.run(["sync"]))
        ok(try await b.run(["sync"]))
        ok(try await a.run(["sync"]))
        let expected = ((0..<5).map { "from a \($0)" } + (0..<5).map { "from b \($0)" }).sorted()
        #expect(try await a.texts() == expected)
        #expect(try await b.texts() == expected)

        // Device a signs out (forgetting server IDs), edits offline, signs in through the other daemon.
        ok(try await a.run(["logout"]))
        let listed = try await a.run(["list", "--json"]).json([NotesE2EListedNote].self)
        let first = try #require(listed.first { $0.text == "from a 0" })
        ok(try await a.run(["edit", first.id, "--text", "from a 0, edited while signed out"]))
        try await logIn(a, two, "alice")
        ok(try await a.run(["sync"]))
        ok(try await b.run(["sync"]))
        let final = (["from a 0, edited while signed out"] + (1..<5).map { "from a \($0)" } + (0..<5).map { "from b \($0)" }).sorted()
        #expect(try await a.texts() == final)
        #expect(try await b.texts() == final)
        let counts = try await twoSession.liveNoteCount()
        #expect(counts.live == 10)
        #expect(counts.distinctClientIDs == 10)
    }

    /// The same notes pushed to one account through both daemons at once, many times, with new edit IDs (a device
    /// re-pushing after sign-in) and with the same ones (a retry landing on the other daemon).
    @Test func samePushesThroughBothDaemonsAtOnceMakeNoDuplicate() async throws {
        let database = try await ScaleOut.freshDatabase()
        let one = try await ScaleOut.daemon(database)
        let two = try await ScaleOut.daemon(database)
        defer { one.stop(); two.stop() }
        try await ScaleOut.signUp(one.url, "alice")
        let viaOne = try await NotesE2EHTTP.signIn(one.url, username: "alice")
        let viaTwo = try await NotesE2EHTTP.signIn(two.url, username: "alice")
        // A retry comes from the same device (the same session) but may reach the other daemon.
        let sameDeviceViaTwo = NotesE2EHTTP(baseURL: two.url, token: viaOne.token)
        let origin = try FlakeID(validating: 777_777_777)
        func batch(editBase: Int64) throws -> Data {
            let changes = try (1...100).map { index in
                NoteChange(
                    clientID: try FlakeID(validating: 5_000_000 + Int64(index)), origin: origin,
                    editID: try FlakeID(validating: editBase + Int64(index)), text: "note \(index)\n",
                    baseText: "note \(index)\n"
                )
            }
            return try WireJSON.encoder().encode(PushRequest(changes: changes))
        }
        var replays = 0
        for round in 0..<6 {
            let editBase = Int64(1_000_000 + round * 1000)
            let retry = round % 2 == 1
            async let first = viaOne.send(.push, body: try batch(editBase: editBase))
            async let second = (retry ? sameDeviceViaTwo : viaTwo).send(.push, body: try batch(editBase: retry ? editBase : editBase + 500))
            let (x, y) = try await (first, second)
            #expect(x.0 == 200 && y.0 == 200)
            let resultsX = try WireJSON.decoder().decode(PushResponse.self, from: x.1).results
            let resultsY = try WireJSON.decoder().decode(PushResponse.self, from: y.1).results
            #expect(resultsX.map(\.serverID) == resultsY.map(\.serverID))
            if retry { replays += (resultsX + resultsY).filter(\.replayed).count }
        }
        #expect(replays == 300, "each retried batch was applied once and replayed once")
        let counts = try await viaTwo.liveNoteCount()
        #expect(counts.live == 100)
        #expect(counts.distinctClientIDs == 100)
    }

    /// A daemon killed with SIGKILL in the middle of a stream of pushes: every acknowledged note is there through
    /// the other daemon; its instance number stays leased until the lease expires, then a new daemon takes it.
    @Test func aKilledDaemonLosesNoAcknowledgedWriteAndItsNumberIsTakenAfterExpiry() async throws {
        let database = try await ScaleOut.freshDatabase()
        let victim = try await ScaleOut.daemon(database)
        let survivor = try await ScaleOut.daemon(database)
        defer { victim.stop(); survivor.stop() }
        try await ScaleOut.signUp(survivor.url, "alice")
        let victimSession = try await NotesE2EHTTP.signIn(victim.url, username: "alice")
        let survivorSession = try await NotesE2EHTTP.signIn(survivor.url, username: "alice")
        let victimInstance = try await ScaleOut.instance(victim.url)

        let acknowledged = Locked<[FlakeID]>([])
        let origin = try FlakeID(validating: 888_888_888)
        let pusher = Task {
            var next: Int64 = 9_000_000
            while true {
                let changes = try (0..<20).map { _ in
                    next += 1
                    return NoteChange(clientID: try FlakeID(validating: next), origin: origin, editID: try FlakeID(validating: next), text: "n\(next)\n")
                }
                guard let (status, data) = try? await victimSession.send(.push, body: WireJSON.encoder().encode(PushRequest(changes: changes))),
                    status == 200, let response = try? WireJSON.decoder().decode(PushResponse.self, from: data)
                else { return }
                acknowledged.withLock { $0 += response.results.compactMap(\.serverID) }
            }
        }
        // Kill once some pushes were acknowledged (bounded wait on an observable, not a sleep for a race).
        let deadline = ContinuousClock.now + .seconds(60)
        while acknowledged.withLock({ $0.count }) < 200, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        await victim.daemon.kill9()
        _ = await pusher.result
        let acked = Set(acknowledged.withLock { $0 })
        #expect(acked.count >= 200)

        var stored = Set<FlakeID>()
        var cursor = SyncCursor.start.text
        while true {
            let (status, data) = try await survivorSession.send(.pull, query: [(PullQuery.since, cursor), (PullQuery.limit, "1000")])
            #expect(status == 200)
            let page = try WireJSON.decoder().decode(PullResponse.self, from: data)
            stored.formUnion(page.changes.map(\.serverID))
            if !page.hasMore { break }
            cursor = page.cursor.text
        }
        #expect(acked.isSubset(of: stored), "\(acked.subtracting(stored).count) acknowledged notes lost")

        // The dead daemon's number is still leased: a new daemon gets another one.
        let early = try await ScaleOut.daemon(database)
        defer { early.stop() }
        let earlyInstance = try await ScaleOut.instance(early.url)
        #expect(earlyInstance != victimInstance)
        // Once the lease has expired (bounded wait, polling the lease table), the next daemon takes the number.
        let expiry = ContinuousClock.now + .seconds(30)
        while try await ScaleOut.psql(database, "SELECT count(*) FROM instance_leases WHERE instance = \(victimInstance) AND expires_at > now()") != "0",
            ContinuousClock.now < expiry
        {
            try await Task.sleep(for: .milliseconds(200))
        }
        let late = try await ScaleOut.daemon(database)
        defer { late.stop() }
        #expect(try await ScaleOut.instance(late.url) == victimInstance)
        // And the new holder of the number never repeats an ID the dead one stored.
        let fresh = try await NotesE2EHTTP.signIn(late.url, username: "alice")
        let (status, data) = try await fresh.send(
            .push,
            body: WireJSON.encoder().encode(
                PushRequest(changes: [NoteChange(clientID: try FlakeID(validating: 42), origin: origin, editID: try FlakeID(validating: 42), text: "late\n")])
            )
        )
        #expect(status == 200)
        let serverID = try #require(try WireJSON.decoder().decode(PushResponse.self, from: data).results.first?.serverID)
        #expect(!stored.contains(serverID))
        #expect(serverID > (stored.max() ?? serverID))
    }
}

extension ScaleOutEndToEndTests {
    /// The real `notes-sim` against two real daemons on one PostgreSQL database, devices spread over both, with
    /// faults, and restarts that kill both daemons with SIGKILL and start them again (each leasing a new number
    /// while the dead ones' leases run out).
    @Test func notesSimAgainstTwoDaemonsWithRestarts() async throws {
        let simulator = Binaries.notesSim
        try #require(FileManager.default.isExecutableFile(atPath: simulator.path), "build notes-sim first")
        let database = try await ScaleOut.freshDatabase()
        let directory = try NotesE2E.temporaryDirectory("sim-scaleout")
        defer { try? FileManager.default.removeItem(at: directory) }
        let ports = try (0..<2).map { _ in try DaemonProcess.freePort() }
        // One script starts (or restarts) both daemons: SIGKILL what runs, start again, wait for the listening lines.
        let script = directory.appendingPathComponent("restart.sh")
        var lines = ["#!/bin/sh", "cd '\(directory.path)'"]
        for port in ports {
            lines.append("[ -f d\(port).pid ] && kill -9 $(cat d\(port).pid) 2>/dev/null; rm -f d\(port).out")
        }
        for port in ports {
            lines.append(
                "'\(NotesE2E.daemonBinary.path)' --database '\(database)' --port \(port) --bcrypt-cost 4 --log-level warning --sign-up open "
                    + "--instance-lease-seconds 10 >d\(port).out 2>>d\(port).err </dev/null & echo $! >d\(port).pid"
            )
        }
        for port in ports {
            lines.append("i=0; until grep -q listening d\(port).out 2>/dev/null; do i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.05; done")
        }
        try (lines.joined(separator: "\n") + "\n").write(to: script, atomically: true, encoding: .utf8)
        defer {
            for port in ports {
                if let pid = try? String(contentsOf: directory.appendingPathComponent("d\(port).pid"), encoding: .utf8),
                    let value = Int32(pid.trimmingCharacters(in: .whitespacesAndNewlines))
                {
                    kill(value, SIGTERM)
                }
            }
        }
        #expect(try await ScaleOut.run("/bin/sh", [script.path]).status == 0, "the daemons did not start")

        let urls = ports.map { "http://127.0.0.1:\($0)" }.joined(separator: ",")
        let result = try await ScaleOut.run(
            simulator.path,
            [
                "--server", urls, "--restart-command", "/bin/sh \(script.path)", "--scan-postgres", database, "--seeds", "1..2", "--steps", "120",
                "--accounts", "2", "--devices", "4", "--faults", "0.1", "--json", "--no-shrink",
                // Devices 0 and 1 watch, one on each daemon: a push through one daemon must wake a waiting pull on
                // the other (PostgreSQL NOTIFY), or `watch-converges` breaks.
                "--watchers", "2",
            ]
        )
        #expect(result.status == 0, "notes-sim failed: \(result.output.suffix(2000))")
        let summaryLine = try #require(result.output.split(separator: "\n").last { $0.hasPrefix("{") }, "no JSON summary")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(summaryLine.utf8)) as? [String: Any])
        #expect(summary["violations"] as? Int == 0)
        #expect(summary["runs"] as? Int == 2)
        #expect((summary["server restarts"] as? Int ?? 0) > 0, "the schedule restarted no daemon")
        #expect((summary["syncs"] as? Int ?? 0) > 0)
        #expect((summary["watch iterations"] as? Int ?? 0) > 0 && (summary["syncs run by watches"] as? Int ?? 0) > 0)
        // The encrypted account's words never reached the tables (issue 32), scanned after every restart and at the end.
        #expect((summary["encrypted accounts"] as? Int ?? 0) > 0, "\(summary)")
        #expect((summary["store scans for canary words"] as? Int ?? 0) > 2, "\(summary)")

        // The scan is real: a canary word in any table is caught at the end of the next run.
        _ = try await ScaleOut.psql(database, "CREATE TABLE planted (text text); INSERT INTO planted VALUES ('a note: qzcanaryxvt12')")
        let caught = try await ScaleOut.run(
            simulator.path,
            ["--server", urls, "--scan-postgres", database, "--seed", "3", "--steps", "5", "--accounts", "2", "--devices", "2", "--no-shrink"])
        #expect(caught.status != 0, "\(caught.output.suffix(2000))")
        #expect(caught.output.contains("no-plaintext-on-server") && caught.output.contains("qzcanaryxvt12"), "\(caught.output.suffix(2000))")
    }
}

/// Helpers for the scale-out tests.
enum ScaleOut {
    /// Runs a program to completion; returns its exit status (128 + signal when killed) and its standard output and
    /// error together.
    static func run(_ program: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        let (status, output) = try await Subprocess.run(program, arguments)
        return (status.code, output)
    }

    static let baseURL: String? = {
        let value = ProcessInfo.processInfo.environment["FLAKENOTES_POSTGRES_URL"]
        return value?.isEmpty == false ? value : nil
    }()

    /// Runs `psql URL -Atc SQL` and returns its trimmed output.
    @discardableResult
    static func psql(_ url: String, _ sql: String) async throws -> String {
        var environment = ProcessInfo.processInfo.environment
        environment["PGSSLMODE"] = "disable"
        let (status, output) = try await Subprocess.run(
            "/usr/bin/env", ["psql", url, "-v", "ON_ERROR_STOP=1", "-Atc", sql], environment: environment)
        guard status == .exited(0) else { throw NotesE2EError("psql failed (\(status)): \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A new, empty database on the test server; returns its URL.
    static func freshDatabase() async throws -> String {
        let base = try #require(baseURL)
        let name = "e2e_" + String(UInt64.random(in: .min ... .max), radix: 16)
        try await psql(base, "CREATE DATABASE \(name)")
        var components = try #require(URLComponents(string: base))
        components.path = "/\(name)"
        return try #require(components.string)
    }

    /// A daemon on `database` with a 3-second instance lease (short, so that the kill test sees one expire; long
    /// enough that a renewal delayed by a loaded machine does not fence the daemon's minting).
    static func daemon(_ database: String) async throws -> NotesE2EServer {
        try await NotesE2EServer.start(extraArguments: ["--database", database, "--instance-lease-seconds", "3"])
    }

    static func signUp(_ url: String, _ username: String) async throws {
        let body = try WireJSON.encoder().encode(SignUpRequest(username: username, password: NotesE2E.password))
        let (status, data) = try await NotesE2EHTTP(baseURL: url).send(.signUp, body: body)
        guard status == 201 || status == 200 else { throw NotesE2EError("sign-up failed: \(status) \(String(decoding: data, as: UTF8.self))") }
    }

    /// The instance number a daemon mints with: read off the session ID it mints for a sign-in.
    static func instance(_ url: String) async throws -> Int {
        let body = try WireJSON.encoder().encode(SignInRequest(username: "alice", password: NotesE2E.password, deviceName: "probe"))
        let (status, data) = try await NotesE2EHTTP(baseURL: url).send(.signIn, body: body)
        guard status == 200 else { throw NotesE2EError("probe sign-in failed: \(status)") }
        return try WireJSON.decoder().decode(SignInResponse.self, from: data).sessionID.instance
    }
}
