import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import NotesClient
import SyncHarness

/// The server a simulation runs against.
protocol SimServer: AnyObject {
    /// What the auditor sends through.
    var transport: any SyncTransport { get }
    /// What device `index` sends through (each wraps it in its own ``FaultyTransport``): ``transport`` unless the
    /// server is several daemons.
    func transport(forDevice index: Int) -> any SyncTransport
    /// The URL devices sign in to (in-process: a placeholder the transport ignores).
    var url: String { get }
    /// The MiniFlake instance of server IDs, when known.
    var instance: Int? { get }
    /// The account's notes changed after `cursor` (tombstones included; from ``SyncCursor/start``: every note), as
    /// the server holds them, oldest change first, and the cursor after the last of them (`cursor` when none).
    func changes(accountID: FlakeID, token: String, after cursor: SyncCursor) async throws -> (notes: [NoteRecord], cursor: SyncCursor)
    /// The files of the server's store that ``Simulation/scanStore(_:)`` reads for canary words (issue 32): an SQLite
    /// database, its WAL and `-shm`, and the attachment chunk files under its `chunks/` directory as they are now
    /// (issue 33, ``StoreScan/sqliteStoreFiles(of:)``); nil when the simulation cannot reach the store.
    var storeFiles: [String]? { get }
    /// The server's PostgreSQL database (a libpq URL) that ``Simulation/scanStore(_:)`` dumps and reads for canary
    /// words; nil when the store is not PostgreSQL or the simulation was not told it.
    var postgresURL: String? { get }
    /// Restarts the server (in-process: a new service over the same store; HTTP: the restart command).
    func restart() async throws
    func shutdown() async
}

extension SimServer {
    func transport(forDevice index: Int) -> any SyncTransport { transport }
    var postgresURL: String? { nil }

    /// Every version of a note the server keeps (`GET /v1/notes/{serverID}/versions`, page by page), oldest first.
    func versions(serverID: FlakeID, token: String) async throws -> [NoteVersion] {
        var all: [NoteVersion] = []
        var after: Int64 = 0
        while true {
            let response = try await transport.send(NoteVersionsRequest(serverID: serverID, after: after).wireRequest(bearerToken: token))
            guard response.status == 200 else {
                throw SimSetupError("the history of note \(serverID) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
            }
            let page = try JSONDecoder().decode(NoteVersionsResponse.self, from: response.body)
            all += page.versions
            guard page.hasMore, let last = page.versions.last?.version, last > after else { return all }
            after = last
        }
    }
}

/// The real server code in this process over an SQLite store in a file of its own: deterministic, no sockets.
///
/// The file (with its WAL, as a daemon's) is what the canary scan reads (issue 32). It lies in `/dev/shm` where there
/// is one, else in the temporary directory, and is removed at ``shutdown()``. It is ``SQLiteNoteStore/unsynced(path:)``:
/// one connection on the calling thread with `synchronous = OFF`, since no step loses power and a restart keeps the
/// store open (the daemon's pool hopped to its queues' threads twice a transaction and flushed every commit, for a
/// durability nothing here observes: Docs/PERFORMANCE.md, notes-sim, 2026-11-27).
final class InProcessSimServer: SimServer {
    let server: InProcessServer
    var store: any NoteStore { server.store }
    let instance: Int? = 0
    var transport: any SyncTransport { server.transport }
    let url = "http://notesyncd.simulated"
    let directory: URL
    /// The SQLite database file.
    let storePath: String
    var storeFiles: [String]? { StoreScan.sqliteStoreFiles(of: storePath) }

    init(clock: ManualFlakeClock) async throws {
        directory = Self.scratchParent.appendingPathComponent("notes-sim-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent(SQLiteNoteStore.fileName).path
        storePath = path
        let store = try SQLiteNoteStore.unsynced(path: path)
        server = try InProcessServer(
            store: store, clock: clock, instance: 0, after: try await store.largestIssuedID(), limits: Self.limits,
            passwords: Self.simulatedPasswords,
            logger: Logger(label: "notes-sim.server", factory: { _ in SwiftLogNoOpLogHandler() }),
            // Holds waiting pulls, so that watching devices' pulls wait for a push's signal (issue 19).
            changeFeed: ChangeFeed())
    }

    /// Where a run keeps its files: `/dev/shm` where there is one (memory: an fsync costs no disk flush there), else
    /// the temporary directory.
    static var scratchParent: URL {
        let memory = URL(fileURLWithPath: "/dev/shm", isDirectory: true)
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: memory.path, isDirectory: &isDirectory) && isDirectory.boolValue
            && FileManager.default.isWritableFile(atPath: memory.path) ? memory : FileManager.default.temporaryDirectory
    }

    /// Small batches and pages, so that the simulation's stores (tens to a few thousand notes) push in several
    /// batches and pull in several pages: an interrupted sync stops between pages, and a pull that skipped or
    /// repeated a page would show. Pages of 8: with 32, a 300-step run rarely pulled more than one page (most pulls
    /// carry a few changes), and planted bug 3 (a pull that skips the page after a full one) went uncaught in the
    /// 200-seed sweep once half the accounts were encrypted; with 8 it is caught at seed 4. (Over HTTP, pass the
    /// daemon `--max-batch` and `--max-page` for the same.)
    static let limits = SyncLimits(maxBatchChanges: 32, maxPageSize: 8, defaultPageSize: 8)

    /// The simulation's stand-in for bcrypt: its accounts' passwords are made up, and even bcrypt's minimum cost
    /// would dominate a run. Sign-in still checks the password against the stored form; the server suites test
    /// bcrypt itself.
    static let simulatedPasswords = PasswordHashing(
        hash: { "fnv1a:" + String(fnv1a($0), radix: 16) },
        verify: { password, hash in hash == "fnv1a:" + String(fnv1a(password), radix: 16) },
        isSlow: false)

    static func fnv1a(_ text: String) -> UInt64 {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { value = (value ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return value
    }

    func changes(accountID: FlakeID, token: String, after cursor: SyncCursor) async throws -> (notes: [NoteRecord], cursor: SyncCursor) {
        let page = try await store.pull(accountID: accountID, after: cursor.sequence, limit: Int.max)
        return (page.notes.map(\.record), page.notes.last.map { SyncCursor(sequence: $0.changeSeq) } ?? cursor)
    }

    /// A new service over the same store, as a daemon builds at start: its generator continues after the largest
    /// ID the store holds, so a restart never reissues one.
    func restart() async throws { try await server.restart() }

    func shutdown() async {
        await server.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A running `notesyncd` over HTTP (`--server URL`); restarts run `--restart-command` and wait for `/healthz`.
final class HTTPSimServer: SimServer {
    let baseURL: URL
    let restartCommand: String?
    let http: URLSessionTransport
    /// One transport per daemon when `url` lists several (daemons sharing one PostgreSQL database).
    let daemons: [URLSessionTransport]
    var transport: any SyncTransport { http }
    var url: String { baseURL.absoluteString }
    let instance: Int? = nil
    /// The daemon's SQLite database file, when its store is to be scanned.
    let storePath: String?
    var storeFiles: [String]? { storePath.map(StoreScan.sqliteStoreFiles(of:)) }
    let postgresURL: String?

    /// - Parameter url: One daemon's URL, or several separated by commas: devices are spread over them round-robin
    ///   (device `i` talks to daemon `i % n`); the auditor uses the first.
    /// - Parameter storePath: The daemon's SQLite database file, scanned for canary words (nil: not scanned).
    /// - Parameter postgresURL: The daemons' PostgreSQL database, dumped and scanned for canary words (nil: not).
    init(url: String, restartCommand: String?, storePath: String? = nil, postgresURL: String? = nil) throws {
        self.storePath = storePath
        self.postgresURL = postgresURL
        var daemons: [URLSessionTransport] = []
        var first: URL?
        for text in url.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            guard let baseURL = URL(string: text), baseURL.scheme == "http" || baseURL.scheme == "https" else {
                throw SimSetupError("'\(text)' is not an http(s) URL")
            }
            first = first ?? baseURL
            daemons.append(URLSessionTransport(baseURL: baseURL, timeout: 30))
        }
        guard let first, let auditor = daemons.first else { throw SimSetupError("--server names no URL") }
        self.baseURL = first
        self.restartCommand = restartCommand
        self.daemons = daemons
        http = auditor
    }

    func transport(forDevice index: Int) -> any SyncTransport { daemons[index % daemons.count] }

    func changes(accountID: FlakeID, token: String, after start: SyncCursor) async throws -> (notes: [NoteRecord], cursor: SyncCursor) {
        var all: [NoteRecord] = []
        var cursor = start
        while true {
            let response = try await http.send(
                WireRequest(.pull, query: [(PullQuery.since, cursor.text), (PullQuery.limit, "1000")], bearerToken: token))
            guard response.status == 200 else {
                throw SimSetupError("audit pull answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
            }
            let page = try JSONDecoder().decode(PullResponse.self, from: response.body)
            all += page.changes
            cursor = page.cursor
            if !page.hasMore { return (all, cursor) }
        }
    }

    /// How long a restart command may run before it is killed.
    static let restartCommandLimit: Duration = .seconds(60)
    /// How long the daemon may take to answer `/healthz` again after the restart command.
    static let comebackLimit: TimeInterval = 30

    func restart() async throws {
        guard let restartCommand else { return }
        // Not Foundation's Process: see ShellCommand for why it waited for the restarted daemon's death.
        switch try await ShellCommand.run(restartCommand, timeLimit: Self.restartCommandLimit) {
        case .exited(0): break
        case .exited(let status): throw SimSetupError("the restart command exited with \(status)")
        case .signaled(let signal): throw SimSetupError("the restart command was killed by signal \(signal)")
        case .timedOut: throw SimSetupError("the restart command ran longer than \(Self.restartCommandLimit) and was killed")
        }
        // Wait for every daemon to answer again; a refused connection fails at once, a probe waits at most 2 s.
        var waiting = daemons.map { URLSessionTransport(baseURL: $0.baseURL, timeout: 2) }
        let deadline = Date().addingTimeInterval(Self.comebackLimit)
        while Date() < deadline {
            var stillDown: [URLSessionTransport] = []
            for probe in waiting {
                if let response = try? await probe.send(WireRequest(.health)), response.status == 200 { continue }
                stillDown.append(probe)
            }
            if stillDown.isEmpty { return }
            waiting = stillDown
            try await Task.sleep(for: .milliseconds(20))
        }
        throw SimSetupError("the server did not come back within \(Int(Self.comebackLimit)) s after a restart")
    }

    func shutdown() async {}
}

/// A simulation that could not be set up (not an invariant violation).
public struct SimSetupError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
