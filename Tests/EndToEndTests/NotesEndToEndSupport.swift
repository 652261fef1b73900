import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Helpers for the `notes` end-to-end tests: the real `notesyncd` and `notes` binaries, run as processes.
enum NotesE2E {
    static var notesBinary: URL { Binaries.notes }
    static var daemonBinary: URL { Binaries.notesyncd }
    static var simBinary: URL { Binaries.notesSim }

    /// Whether both binaries are built (`swift build` builds them; `swift test` does too).
    static var binariesExist: Bool { Binaries.exist(Binaries.notes, Binaries.notesyncd) }

    static let password = "correct horse battery"

    // Linux ioctls for /dev/ptmx (<asm-generic/ioctls.h>); the C library's posix_openpt/grantpt/unlockpt wrappers
    // are not visible to Swift.
    static let getPTYNumber: UInt = 0x8004_5430  // TIOCGPTN
    static let setPTYLock: UInt = 0x4004_5431  // TIOCSPTLCK

    /// Opens a new pseudo-terminal master, unlocked.
    static func openPseudoTerminal() throws -> Int32 {
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw NotesE2EError("cannot open /dev/ptmx") }
        var unlock: CInt = 0
        guard ioctl(master, setPTYLock, &unlock) == 0 else { throw NotesE2EError("cannot unlock the pseudo-terminal") }
        return master
    }

    /// Opens the slave of the pseudo-terminal `master`, starts a child on it with `spawn` (which gets the slave's
    /// descriptor) and closes it here: only the child holds the terminal open, so reading `master` ends (EIO) when
    /// the child exits.
    static func spawnOnTerminal(_ master: Int32, _ spawn: (Int32) throws -> ChildProcess) throws -> ChildProcess {
        let slave = try openSlave(of: master)
        defer { close(slave) }
        return try spawn(slave)
    }

    /// Opens the slave of a pseudo-terminal `master` (close-on-exec: a child gets it only by a duplication).
    static func openSlave(of master: Int32) throws -> Int32 {
        var number: CInt = 0
        guard ioctl(master, getPTYNumber, &number) == 0 else { throw NotesE2EError("cannot name the pseudo-terminal") }
        let slave = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard slave >= 0 else { throw NotesE2EError("cannot open the pseudo-terminal's slave") }
        return slave
    }

    /// A fresh temporary directory.
    static func temporaryDirectory(_ label: String) throws -> URL { try makeTemporaryDirectory("e2e-\(label)") }

    /// Runs blocking work off the cooperative thread pool.
    static func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await Subprocess.blocking(work)
    }
}

/// A running `notesyncd` with its own data directory; stopped (SIGTERM) and its directory removed by ``stop()``.
final class NotesE2EServer: Sendable {
    let daemon: DaemonProcess
    let directory: URL
    var url: String { daemon.url }

    private init(daemon: DaemonProcess, directory: URL) {
        self.daemon = daemon
        self.directory = directory
    }

    /// Starts the daemon on `port` (0: any free one) and returns once it listens.
    static func start(port: Int = 0, extraArguments: [String] = []) async throws -> NotesE2EServer {
        let directory = try NotesE2E.temporaryDirectory("server")
        do {
            let daemon = try await DaemonProcess.start(
                ["--port", "\(port)", "--data-dir", directory.appendingPathComponent("data").path] + extraArguments,
                log: directory.appendingPathComponent("stderr.log"))
            return NotesE2EServer(daemon: daemon, directory: directory)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// SIGTERM, waits for the exit (blocking: it runs in `defer`), removes the data directory.
    func stop() {
        daemon.child.stopBlocking()
        try? FileManager.default.removeItem(at: directory)
    }
}

struct NotesE2EError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The outcome of one `notes` run.
struct NotesRun: Sendable, CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    /// Whether the process was killed by a signal (SIGKILL from the test).
    var killed = false
    /// The CPU time (user and system) it used, where the run measured it.
    var cpuSeconds: Double? = nil

    var description: String { "status \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// Decodes `--json` output.
    func json<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: Data(stdout.utf8))
    }
}

/// One simulated device: its own `--home`.
struct NotesDevice: Sendable {
    let home: URL

    init(_ label: String) throws {
        home = try NotesE2E.temporaryDirectory(label).appendingPathComponent("home")
    }

    /// A device whose data directory is `home` (its parent is removed by ``remove()``).
    init(home: URL) {
        self.home = home
    }

    /// Runs `notes ARGS --home HOME` with `stdin` as standard input (never a terminal, so no editor or prompt).
    ///
    /// A run that outlives 5 minutes is killed (and its status says so): a test that would hang fails instead.
    func run(_ arguments: [String], stdin: String = "", withHome: Bool = true) async throws -> NotesRun {
        let scratch = try NotesE2E.temporaryDirectory("run")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let input = scratch.appendingPathComponent("stdin").path
        let output = scratch.appendingPathComponent("stdout").path
        let errors = scratch.appendingPathComponent("stderr").path
        try Data(stdin.utf8).write(to: URL(fileURLWithPath: input))
        let child = try Subprocess.spawn(
            NotesE2E.notesBinary.path, withHome ? arguments + ["--home", home.path] : arguments,
            environment: Self.environment(home: scratch), stdin: .file(input), stdout: .file(output), stderr: .file(errors))
        let status = await child.waitForExit(timeLimit: .seconds(300))
        let stderr = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        return NotesRun(
            status: status.code, stdout: (try? String(contentsOfFile: output, encoding: .utf8)) ?? "",
            stderr: status == .timedOut ? stderr + "\n(killed: still running after 5 minutes)" : stderr, cpuSeconds: child.cpuSeconds)
    }

    /// The environment of a `notes` run: this process's, without what would point it elsewhere, with `HOME` at
    /// `home` and a dumb terminal.
    static func environment(home: URL) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for key in ["NOTES_HOME", "EDITOR", "VISUAL", "XDG_DATA_HOME"] { environment.removeValue(forKey: key) }
        environment["HOME"] = home.path
        environment["TERM"] = "dumb"
        return environment
    }

    /// Like ``run(_:stdin:)``, with stderr on a pseudo-terminal (so `notes` draws its progress line); the process
    /// is killed with SIGKILL as soon as `marker` appears on it.
    func runKilling(_ arguments: [String], stdin: String = "", when marker: String) async throws -> NotesRun {
        try await NotesE2E.blocking { try runBlocking(arguments, stdin: stdin, killWhenStderrShows: marker) }
    }

    private func runBlocking(_ arguments: [String], stdin: String, killWhenStderrShows marker: String) throws -> NotesRun {
        let scratch = try NotesE2E.temporaryDirectory("run")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let input = scratch.appendingPathComponent("stdin").path
        let output = scratch.appendingPathComponent("stdout").path
        try Data(stdin.utf8).write(to: URL(fileURLWithPath: input))
        let master = try NotesE2E.openPseudoTerminal()
        defer { close(master) }
        let child = try NotesE2E.spawnOnTerminal(master) { slave in
            try Subprocess.spawn(
                NotesE2E.notesBinary.path, arguments + ["--home", home.path], environment: Self.environment(home: scratch),
                stdin: .file(input), stdout: .file(output), stderr: .descriptor(slave))
        }
        var killed = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        var seen: [UInt8] = []
        // As ``run(_:stdin:)``: a run that neither shows the marker nor exits is killed after 5 minutes.
        let deadline = ContinuousClock.now + .seconds(300)
        while true {
            // Checked at every turn: a run that keeps drawing its progress line without the marker ends too.
            if ContinuousClock.now >= deadline {
                child.signal(SIGKILL)
                break
            }
            var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 1000)
            if ready <= 0 { continue }
            let count = read(master, &buffer, buffer.count)
            if count <= 0 { break }  // EIO: the child closed the terminal (it exited)
            seen.append(contentsOf: buffer[0..<count])
            if String(decoding: seen, as: UTF8.self).contains(marker) {
                child.signal(SIGKILL)
                killed = true
                break
            }
        }
        let status = child.waitBlocking()
        return NotesRun(
            status: status.code, stdout: (try? String(contentsOfFile: output, encoding: .utf8)) ?? "",
            stderr: String(decoding: seen, as: UTF8.self), killed: killed && status == .signaled(SIGKILL))
    }

    /// Live notes' texts, sorted, from `notes list --json`.
    func texts() async throws -> [String] {
        let run = try await run(["list", "--json"])
        guard run.status == 0 else { throw NotesE2EError("list failed: \(run)") }
        return try run.json([NotesE2EListedNote].self).map(\.text).sorted()
    }

    /// `notes status --json`.
    func status() async throws -> NotesE2EStatus {
        let run = try await run(["status", "--json"])
        guard run.status == 0 else { throw NotesE2EError("status failed: \(run)") }
        return try run.json(NotesE2EStatus.self)
    }

    func remove() { try? FileManager.default.removeItem(at: home.deletingLastPathComponent()) }
}

/// The fields of `notes list --json` the tests read.
struct NotesE2EListedNote: Decodable, Sendable {
    var id: String
    var clientID: String
    var text: String
    var pending: Bool
    var conflict: Bool
    var deleted: Bool
}

/// The fields of `notes status --json` the tests read.
struct NotesE2EStatus: Decodable, Sendable {
    var signedIn: Bool
    var username: String?
    var notes: Int
    var setAside: Int
    var pending: Int
    var conflicts: Int
    /// Refused notes waiting for an edit, and those over the account's quota (counted in `pending`).
    var failed: Int
    var overQuota: Int
    var lastSync: String?
}

/// A minimal HTTP client for seeding a server directly (the protocol module's types over URLSession).
struct NotesE2EHTTP: Sendable {
    let baseURL: String
    var token: String?

    func send(_ endpoint: Endpoint, body: Data? = nil, query: [(String, String)] = []) async throws -> (Int, Data) {
        var components = URLComponents(string: baseURL + endpoint.path)!
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        var request = URLRequest(url: components.url!)
        request.httpMethod = endpoint.method.rawValue
        request.httpBody = body
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    static func signIn(_ baseURL: String, username: String) async throws -> NotesE2EHTTP {
        let body = try WireJSON.encoder().encode(SignInRequest(username: username, password: NotesE2E.password, deviceName: "seeder"))
        let (status, data) = try await NotesE2EHTTP(baseURL: baseURL).send(.signIn, body: body)
        guard status == 200 else { throw NotesE2EError("seeder sign-in failed: \(status) \(String(decoding: data, as: UTF8.self))") }
        let session = try WireJSON.decoder().decode(SignInResponse.self, from: data)
        return NotesE2EHTTP(baseURL: baseURL, token: session.token)
    }

    /// Creates `count` notes in the account, in batches.
    func seed(_ count: Int, prefix: String) async throws {
        let origin = try FlakeID(validating: 424_242_424_242)
        var made = 0
        var next: Int64 = 1_200_000_000_000_000_000
        while made < count {
            let size = min(1000, count - made)
            var changes: [NoteChange] = []
            for index in 0..<size {
                next += 1
                let id = try FlakeID(validating: next)
                changes.append(NoteChange(clientID: id, origin: origin, editID: id, text: "\(prefix) \(made + index)\nbody"))
            }
            let (status, data) = try await send(.push, body: WireJSON.encoder().encode(PushRequest(changes: changes)))
            guard status == 200 else { throw NotesE2EError("seeding failed: \(status) \(String(decoding: data, as: UTF8.self))") }
            made += size
        }
    }

    /// How many live notes the account has, by pulling everything.
    func liveNoteCount() async throws -> (live: Int, distinctClientIDs: Int) {
        var cursor = SyncCursor.start.text
        var live: [String: Bool] = [:]
        var clientIDs = Set<String>()
        while true {
            let (status, data) = try await send(.pull, query: [(PullQuery.since, cursor), (PullQuery.limit, "1000")])
            guard status == 200 else { throw NotesE2EError("pull failed: \(status)") }
            let page = try WireJSON.decoder().decode(PullResponse.self, from: data)
            for record in page.changes {
                live[record.serverID.description] = !record.deleted
                if !record.deleted { clientIDs.insert("\(record.clientID)/\(record.origin)") }
            }
            if !page.hasMore { break }
            cursor = page.cursor.text
        }
        return (live.values.filter { $0 }.count, clientIDs.count)
    }
}

/// A TCP server on 127.0.0.1 that is not a FlakeNotes server: each connection is handed to `serve` (on one thread,
/// one connection at a time), which must close it.
final class NotesE2EFakeServer: @unchecked Sendable {
    private let socketFD: Int32
    let url: String

    init(serve: @escaping @Sendable (Int32) -> Void) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw NotesE2EError("socket failed") }
        socketFD = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { throw NotesE2EError("bind/listen failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        url = "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
        Thread.detachNewThread {
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { return }
                serve(client)
            }
        }
    }

    /// Answers every request with an HTML page.
    static func htmlPage() throws -> NotesE2EFakeServer {
        try NotesE2EFakeServer { client in
            var buffer = [UInt8](repeating: 0, count: 65536)
            var request: [UInt8] = []
            while !String(decoding: request, as: UTF8.self).contains("\r\n\r\n") {
                let count = read(client, &buffer, buffer.count)
                if count <= 0 { break }
                request.append(contentsOf: buffer[0..<count])
            }
            let page = "<html><body>It works!</body></html>"
            let answer = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\nConnection: close\r\n\r\n\(page)"
            _ = answer.withCString { write(client, $0, strlen($0)) }
            close(client)
        }
    }

    /// Reads a little of each request and hangs up without answering, with a reset rather than a clean close: what
    /// a service speaking another protocol often does.
    static func hangingUp() throws -> NotesE2EFakeServer {
        try NotesE2EFakeServer { client in
            var buffer = [UInt8](repeating: 0, count: 16)
            _ = read(client, &buffer, buffer.count)
            var hardClose = linger(l_onoff: 1, l_linger: 0)
            setsockopt(client, SOL_SOCKET, SO_LINGER, &hardClose, socklen_t(MemoryLayout<linger>.size))
            close(client)
        }
    }

    func stop() {
        shutdown(socketFD, Int32(SHUT_RDWR))
        close(socketFD)
    }
}

/// What `notes login --json` says of its sync (the fields these tests read).
struct NotesE2ESignIn: Decodable, Sendable {
    struct Sync: Decodable, Sendable {
        var pulled: Int
        var created: Int
    }

    var username: String
    var sync: Sync?
}

/// How many times `word` occurs in `files`, each read whole: a canary that must not reach the daemon's disk.
func occurrences(of word: String, in files: [URL]) throws -> Int {
    let needle = Data(word.utf8)
    var hits = 0
    for file in files {
        let bytes = try Data(contentsOf: file)
        var start = bytes.startIndex
        while let found = bytes.range(of: needle, in: start..<bytes.endIndex) {
            hits += 1
            start = found.upperBound
        }
    }
    return hits
}

extension NotesE2EServer {
    /// How many times `word` occurs in the daemon's database file and its WAL.
    func occurrences(of word: String) throws -> Int {
        let database = directory.appendingPathComponent("data/notesyncd.sqlite").path
        let files = [database, database + "-wal"].filter { FileManager.default.fileExists(atPath: $0) }
        return try EndToEndTests.occurrences(of: word, in: files.map { URL(fileURLWithPath: $0) })
    }
}

extension DaemonProcess {
    /// `notesyncd ARGUMENTS` on a port it can be restarted on, its data in `directory/data` and its standard error in
    /// `directory/notesyncd.log`.
    static func start(in directory: URL, _ arguments: [String] = []) async throws -> DaemonProcess {
        try await startOnRestartablePort(
            ["--data-dir", directory.appendingPathComponent("data").path] + arguments, log: directory.appendingPathComponent("notesyncd.log"))
    }
}

/// Runs `body` with a fresh `notesyncd` started with `arguments`, stopped afterwards.
func withServer(_ arguments: [String] = [], _ body: (NotesE2EServer) async throws -> Void) async throws {
    let server = try await NotesE2EServer.start(extraArguments: arguments)
    defer { server.stop() }
    try await body(server)
}

/// `notes VERB` (`signup`, `login`) of `username` on the server at `url`, the password on stdin; a sign-up makes a
/// plaintext account (these tests are about sync, not encryption: EncryptionEndToEndTests).
func account(
    _ device: NotesDevice, _ verb: String, _ url: String, _ username: String, _ extra: [String] = [], password: String = NotesE2E.password
) async throws -> NotesRun {
    try await device.run(
        [verb] + (verb == "signup" ? ["--no-encryption"] : []) + ["--server", url, "--username", username, "--password-stdin"] + extra,
        stdin: password + "\n")
}

/// Expects `run` to have succeeded (exit 0), and returns it.
@discardableResult
func ok(_ run: NotesRun, sourceLocation: SourceLocation = #_sourceLocation) -> NotesRun {
    #expect(run.status == 0, "\(run)", sourceLocation: sourceLocation)
    return run
}

/// Expects `run` to have failed as a person meets it: the status, and one line on stderr saying `words`.
func fails(_ run: NotesRun, _ status: Int32, saying words: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(run.status == status, "\(run)", sourceLocation: sourceLocation)
    #expect(run.stderr.hasPrefix("notes: ") && run.stderr.contains(words), "\(run)", sourceLocation: sourceLocation)
    #expect(run.stderr.split(separator: "\n").count == 1, "one line: \(run.stderr)", sourceLocation: sourceLocation)
}
