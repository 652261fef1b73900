import Foundation
import MiniFlake
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
import TestSupport

/// Attachments on notes (issue 33, phase 2) with the real binaries: `notes attach`, `attachments`, `save`, `detach`,
/// `show`, export and import between devices that each have their own `--home`, through a real `notesyncd` whose
/// metrics count the chunk PUTs; a `notes sync` killed mid-upload and a daemon restarted mid-`save` resume without
/// sending or fetching what the other side stored.
@Suite("note attachments end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct NoteAttachmentsEndToEndTests {
    static let mib = 1 << 20

    /// An attachment as `notes attachments --json` lists it: the fields these tests read (``attachmentFields`` names
    /// them all).
    struct Listed: Decodable {
        var name: String
        var chunks: Int
        var onDevice: Bool
    }

    /// Every field of an attachment in `notes attachments --json`.
    static let attachmentFields: Set<String> = ["name", "size", "mediaType", "sha256", "chunks", "onDevice"]

    struct Added: Decodable { var id: String }

    struct Synced: Decodable {
        var chunksUploaded: Int
        var failures: [Failure]
        struct Failure: Decodable { var code: String }
    }

    struct Saved: Decodable {
        var chunksDownloaded: Int
        var chunksOnDevice: Int
    }

    /// A daemon with its metrics on their own port, restartable on the same port.
    final class Server: Sendable {
        let directory: URL
        let metricsPort: Int
        let daemon: Mutex<DaemonProcess>
        var url: String { daemon.withLock { $0.url } }
        var data: String { directory.appendingPathComponent("data").path }

        init() async throws {
            directory = try NotesE2E.temporaryDirectory("attachments-server")
            metricsPort = try DaemonProcess.freePort()
            daemon = Mutex(try await DaemonProcess.start(in: directory, ["--metrics-address", "127.0.0.1:\(metricsPort)"]))
        }

        /// Kills the daemon (SIGKILL) and starts it again on the same port and data.
        func restart() async throws {
            let old = daemon.withLock { $0 }
            await old.kill9()
            let new = try await DaemonProcess.start(
                ["--port", "\(old.port)", "--data-dir", data, "--metrics-address", "127.0.0.1:\(metricsPort)"], log: old.log)
            daemon.withLock { $0 = new }
        }

        /// Chunk PUTs the daemon answered since it started (stored now, or had already).
        func chunkPuts() async throws -> Int {
            let (body, _) = try await URLSession.shared.data(from: try #require(URL(string: "http://127.0.0.1:\(metricsPort)/metrics")))
            let text = String(decoding: body, as: UTF8.self)
            return ["201", "200"].reduce(0) { total, status in
                total + Int(OperatorsEndToEndTests.sample(text, #"notesyncd_http_requests_total{route="putChunk",status="\#(status)"}"#) ?? 0)
            }
        }

        /// The chunk files the daemon stores.
        func storedChunks() -> Int {
            let paths = (try? FileManager.default.subpathsOfDirectory(atPath: data + "/chunks")) ?? []
            return paths.filter { $0.split(separator: "/").last?.count == 64 }.count
        }

        func stop() async {
            _ = await daemon.withLock { $0 }.terminate()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    func signIn(_ device: NotesDevice, _ server: Server, signUp: Bool = false) async throws {
        ok(
            try await device.run(
                (signUp ? ["signup", "--no-encryption"] : ["login"]) + ["--server", server.url, "--username", "alice", "--password-stdin"],
                stdin: NotesE2E.password + "\n"))
    }

    func attachments(_ device: NotesDevice, _ id: String) async throws -> [Listed] {
        let listing = ok(try await device.run(["attachments", id, "--json"]))
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]])
        #expect(objects.allSatisfy { Set($0.keys) == Self.attachmentFields }, "\(listing)")
        return try listing.json([Listed].self)
    }

    static func bytes(_ count: Int, seed: UInt64) -> Data {
        var random = SplitMix64(seed: seed)
        return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &random) })
    }

    /// Files in the data directory's chunk cache.
    static func cachedChunks(_ device: NotesDevice) -> Int {
        let paths = (try? FileManager.default.subpathsOfDirectory(atPath: device.home.appendingPathComponent("chunks").path)) ?? []
        return paths.filter { !$0.hasPrefix(".incoming") && $0.split(separator: "/").last?.count == 64 }.count
    }

    /// Starts `notes ARGS --home HOME` without waiting for it.
    static func spawn(_ device: NotesDevice, _ arguments: [String], stdout: URL) throws -> ChildProcess {
        try Subprocess.spawn(
            NotesE2E.notesBinary.path, arguments + ["--home", device.home.path],
            environment: NotesDevice.environment(home: device.home.deletingLastPathComponent()), stdout: .file(stdout.path),
            stderr: .file(stdout.path + ".err"))
    }

    /// Waits (polling, no fixed delay) until `condition` holds or the child exits, and sends the child `signal` the
    /// moment it holds: whether it held, and the child's one waiter (await it for the exit; a second `waitForExit`
    /// would wait for the same process twice). The polling runs on a thread of its own and the signal goes from it:
    /// from a task of the cooperative pool, which the full suite keeps busy for seconds on two cores, the transfer had
    /// finished before the condition was seen (a restart meant to land mid-save found every chunk on the device).
    static func until(
        _ child: ChildProcess, thenSignal signal: Int32, _ condition: @escaping @Sendable () -> Bool
    ) async throws -> (held: Bool, exit: Task<Termination, Never>) {
        let exited = Locked(false)
        let waiter = Task {
            let termination = await child.waitForExit(timeLimit: .seconds(300))
            exited.withLock { $0 = true }
            return termination
        }
        let held = try await Subprocess.blocking {
            while !exited.withLock({ $0 }) {
                if condition() {
                    child.signal(signal)
                    return true
                }
                usleep(1000)
            }
            return condition()
        }
        return (held, waiter)
    }

    @Test func attachSyncSaveOnAnotherDeviceExportAndImport() async throws {
        let server = try await Server()
        let a = try NotesDevice("att-a")
        let b = try NotesDevice("att-b")
        let c = try NotesDevice("att-c")
        let scratch = try NotesE2E.temporaryDirectory("att-files")
        defer {
            for device in [a, b, c] { device.remove() }
            try? FileManager.default.removeItem(at: scratch)
        }
        try await signIn(a, server, signUp: true)
        try await signIn(b, server)
        let film = Self.bytes(3 * Self.mib + 123, seed: 33)
        let filmFile = scratch.appendingPathComponent("film.mov")
        try film.write(to: filmFile)
        let readme = scratch.appendingPathComponent("readme.txt")
        try Data("read me\n".utf8).write(to: readme)

        let id = try ok(try await a.run(["add", "--json", "trip"])).json(Added.self).id
        let attached = ok(try await a.run(["attach", id, filmFile.path, readme.path]))
        #expect(attached.stdout.contains("Attached film.mov (3.1 MB, video/quicktime)"), "\(attached)")
        let listed = try await attachments(a, id)
        #expect(listed.map(\.name) == ["film.mov", "readme.txt"] && listed.allSatisfy(\.onDevice) && listed[0].chunks == 4)
        #expect(ok(try await a.run(["show", id])).stdout.contains("Attached: film.mov"))
        fails(try await a.run(["attach", id, scratch.appendingPathComponent("absent.png").path]), 1, saying: "Cannot read")
        fails(try await a.run(["attach", id, readme.path]), 1, saying: "already has an attachment named readme.txt")
        fails(try await a.run(["save", id, "nope.png"]), 1, saying: "no attachment named nope.png")
        fails(try await a.run(["detach", id, "nope.png"]), 1, saying: "no attachment named nope.png")

        let synced = try ok(try await a.run(["sync", "--json"])).json(Synced.self)
        #expect(synced.chunksUploaded == 5 && synced.failures.isEmpty)
        #expect(try await server.chunkPuts() == 5)

        // Export beside the notes, import on a device with no account: the files come back, checked.
        let export = scratch.appendingPathComponent("export.json").path
        ok(try await a.run(["export", export]))
        #expect(FileManager.default.fileExists(atPath: export + ".attachments"))
        ok(try await c.run(["import", export]))
        #expect(try await attachments(c, id).map(\.onDevice) == [true, true])
        ok(try await c.run(["save", id, "film.mov", scratch.appendingPathComponent("c.mov").path]))
        #expect(try Data(contentsOf: scratch.appendingPathComponent("c.mov")) == film)

        // The same file on a second note: the sync sends no chunk.
        #expect(ok(try await a.run(["save", id, "readme.txt", "-"])).stdout == "read me\n")
        let second = try ok(try await a.run(["add", "--json", "copy"])).json(Added.self).id
        ok(try await a.run(["attach", second, filmFile.path]))
        #expect(try ok(try await a.run(["sync", "--json"])).json(Synced.self).chunksUploaded == 0)
        #expect(try await server.chunkPuts() == 5)

        // Device B: the pull brings the note and its attachments, not their chunks; save fetches them.
        ok(try await b.run(["sync"]))
        #expect(Self.cachedChunks(b) == 0, "a pull downloads no chunk")
        #expect(try await attachments(b, id).map(\.onDevice) == [false, false])
        let saved = try ok(try await b.run(["save", id, "film.mov", scratch.appendingPathComponent("b.mov").path, "--json"])).json(Saved.self)
        #expect(saved.chunksDownloaded == 4 && saved.chunksOnDevice == 0)
        #expect(try Data(contentsOf: scratch.appendingPathComponent("b.mov")) == film)
        #expect(ok(try await b.run(["save", id, "readme.txt", "-"])).stdout == "read me\n")

        // Detached on A, gone from B after both sync.
        ok(try await a.run(["detach", id, "film.mov"]))
        ok(try await a.run(["sync"]))
        ok(try await b.run(["sync"]))
        #expect(try await attachments(b, id).map(\.name) == ["readme.txt"])
        await server.stop()
    }

    @Test func aSyncKilledMidUploadResendsNothingTheServerStored() async throws {
        let server = try await Server()
        let a = try NotesDevice("att-kill")
        let scratch = try NotesE2E.temporaryDirectory("att-kill-files")
        defer {
            a.remove()
            try? FileManager.default.removeItem(at: scratch)
        }
        try await signIn(a, server, signUp: true)
        let total = 48  // 48 MiB: room to land the signal mid-transfer on a loaded machine (12 was not, in a full run)
        let file = scratch.appendingPathComponent("big.bin")
        try Self.bytes(total * Self.mib - 7, seed: 34).write(to: file)
        let id = try ok(try await a.run(["add", "--json", "big"])).json(Added.self).id
        ok(try await a.run(["attach", id, file.path]))

        // SIGKILL once the daemon stored a quarter of the chunks.
        let child = try Self.spawn(a, ["sync"], stdout: scratch.appendingPathComponent("sync.out"))
        let (reached, exit) = try await Self.until(child, thenSignal: SIGKILL) { server.storedChunks() >= total / 4 }
        _ = await exit.value
        #expect(reached)
        let storedAtKill = server.storedChunks()
        #expect(storedAtKill < total, "killed mid-upload (\(storedAtKill) of \(total) stored)")
        let putsBefore = try await server.chunkPuts()

        let rerun = try ok(try await a.run(["sync", "--json"])).json(Synced.self)
        #expect(rerun.chunksUploaded <= total - storedAtKill + 1, "\(rerun.chunksUploaded) sent after \(storedAtKill) of \(total) stored")
        #expect(server.storedChunks() == total)
        // The daemon may still finish, after the signal, the two PUTs the killed sync had in flight (it sends two at a
        // time), before or after the rerun asks what is missing; beyond those two, no chunk goes up twice.
        let puts = try await server.chunkPuts()
        #expect(puts >= putsBefore + rerun.chunksUploaded, "the daemon counted every PUT of the rerun")
        #expect(puts <= total + 2, "\(puts) PUTs for \(total) chunks")
        #expect(try await attachments(a, id).map(\.onDevice) == [true])
        await server.stop()
    }

    @Test func aSaveAcrossADaemonRestartFetchesNoChunkTwice() async throws {
        let server = try await Server()
        let a = try NotesDevice("att-restart")
        let scratch = try NotesE2E.temporaryDirectory("att-restart-files")
        defer {
            a.remove()
            try? FileManager.default.removeItem(at: scratch)
        }
        try await signIn(a, server, signUp: true)
        let total = 48  // 48 MiB: room to land the signal mid-transfer on a loaded machine (12 was not, in a full run)
        let data = Self.bytes(total * Self.mib - 11, seed: 35)
        let file = scratch.appendingPathComponent("scan.pdf")
        try data.write(to: file)
        let id = try ok(try await a.run(["add", "--json", "scan"])).json(Added.self).id
        ok(try await a.run(["attach", id, file.path]))
        ok(try await a.run(["sync"]))
        // The device's cache emptied (as a prune would): the chunks are on the server only.
        try FileManager.default.removeItem(at: a.home.appendingPathComponent("chunks"))
        #expect(try await attachments(a, id).map(\.onDevice) == [false])

        // The daemon is killed and started again once the save has a quarter of the chunks: the save is stopped
        // (SIGSTOP) the moment it has them, and goes on (SIGCONT) once the daemon is back.
        let out = scratch.appendingPathComponent("saved.pdf")
        let child = try Self.spawn(a, ["save", id, "scan.pdf", out.path, "--json"], stdout: scratch.appendingPathComponent("save.out"))
        let (reached, exit) = try await Self.until(child, thenSignal: SIGSTOP) { Self.cachedChunks(a) >= total / 4 }
        let cachedAtRestart = Self.cachedChunks(a)
        do {
            try await server.restart()
        } catch {
            child.signal(SIGCONT)
            throw error
        }
        child.signal(SIGCONT)
        let first = await exit.value
        #expect(reached && cachedAtRestart < total, "restarted mid-save (\(cachedAtRestart) of \(total) chunks here)")
        if first.code == 0 {
            // The save retried across the restart within its own run: each chunk fetched once.
            let saved = try JSONDecoder().decode(Saved.self, from: Data(contentsOf: scratch.appendingPathComponent("save.out")))
            #expect(saved.chunksDownloaded == total && saved.chunksOnDevice == 0)
        } else {
            // Run again: what the first run stored is not fetched again.
            let again = try ok(try await a.run(["save", id, "scan.pdf", out.path, "--json"])).json(Saved.self)
            #expect(again.chunksOnDevice >= cachedAtRestart && again.chunksDownloaded + again.chunksOnDevice == total)
        }
        #expect(try Data(contentsOf: out) == data)
        #expect(try await attachments(a, id).map(\.onDevice) == [true])
        await server.stop()
    }
}
