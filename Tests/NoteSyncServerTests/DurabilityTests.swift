import Foundation
import HTTPTypes
import HummingbirdTesting
import MiniFlake
import NIOCore
import NoteSyncProtocol
import Synchronization
import Testing

@testable import NoteSyncServer

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `notesyncd` child process.
final class Daemon: Sendable {
    let process: Process
    let port: Int

    private init(process: Process, port: Int) {
        self.process = process
        self.port = port
    }

    /// The built `notesyncd`: `NOTESYNCD_BINARY`, else next to the test bundle, else `<package>/.build/debug/`.
    static let binary: URL? = {
        var candidates: [URL] = []
        if let path = ProcessInfo.processInfo.environment["NOTESYNCD_BINARY"] { candidates.append(URL(fileURLWithPath: path)) }
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = bundle.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(directory.appendingPathComponent("notesyncd"))
            directory = directory.deletingLastPathComponent()
        }
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(packageRoot.appendingPathComponent(".build/debug/notesyncd"))
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }()

    /// Starts the daemon on a free loopback port and returns once it printed its listening line.
    static func start(binary: URL, dataDirectory: String) async throws -> Daemon {
        let process = Process()
        process.executableURL = binary
        process.arguments = ["--port", "0", "--host", "127.0.0.1", "--data-dir", dataDirectory, "--bcrypt-cost", "4", "--log-level", "error"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        let line = try await readLine(output.fileHandleForReading)
        let prefix = "notesyncd listening on http://127.0.0.1:"
        guard line.hasPrefix(prefix), let port = Int(line.dropFirst(prefix.count)) else {
            process.terminate()
            throw DaemonError(message: "unexpected first line: \(line)")
        }
        return Daemon(process: process, port: port)
    }

    struct DaemonError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// Reads one line on a thread of its own (a blocking read must not hold a cooperative thread).
    static func readLine(_ handle: FileHandle) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                var buffer = Data()
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty {
                        continuation.resume(throwing: DaemonError(message: "notesyncd exited before listening: \(String(decoding: buffer, as: UTF8.self))"))
                        return
                    }
                    buffer.append(chunk)
                    if let newline = buffer.firstIndex(of: 0x0A) {
                        continuation.resume(returning: String(decoding: buffer[..<newline], as: UTF8.self))
                        return
                    }
                }
            }
        }
    }

    /// `kill -9`, then reap.
    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM (graceful), then reap; returns the exit status.
    func terminate() -> Int32 {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// An API client over one HTTP connection to the daemon.
    func withClient<T: Sendable>(_ body: @Sendable @escaping (APIClient) async throws -> T) async throws -> T {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            try await body(APIClient(send: { request, contentType in
                var uri = request.path
                if !request.query.isEmpty {
                    uri += "?" + request.query.map { "\($0.0)=\(percentEncoded($0.1))" }.joined(separator: "&")
                }
                var headers = HTTPFields()
                if let token = request.bearerToken { headers[.authorization] = "Bearer \(token)" }
                if let contentType { headers[.contentType] = contentType }
                let response = try await client.execute(
                    TestClient.Request(uri, method: HTTPRequest.Method(request.method.rawValue)!, headers: headers, body: request.body.map { ByteBuffer(bytes: $0) })
                )
                return WireResponse(
                    status: response.status.code, headers: lowercasedHeaders(response.headers),
                    body: response.body.map { Data($0.readableBytesView) } ?? Data()
                )
            }))
        }
    }
}

@Suite("Durability", .serialized)
struct DurabilityTests {
    /// What the writers sent for one note: every text in order, and how many of them were acknowledged.
    struct NoteLog: Sendable {
        var serverID: FlakeID?
        var texts: [String]
        var acknowledged: Int
    }

    @Test(
        .enabled(if: Daemon.binary != nil, "build notesyncd first: swift build --product notesyncd"),
        .timeLimit(.minutes(5))
    )
    func killNineLosesNoAcknowledgedPush() async throws {
        let binary = try #require(Daemon.binary)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notesyncd-kill-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seed = propertySeeds(1, base: UInt64(UInt32.random(in: 1...UInt32.max)))[0]
        var rng = SplitMix64(seed: seed)
        let killAfter = 20 + Int(rng.next() % 200)  // acknowledged pushes before kill -9

        let first = try await Daemon.start(binary: binary, dataDirectory: directory)
        let token = try await first.withClient { api in
            try await api.signUp("durable")
            return try await api.signIn("durable").token
        }

        // Writers: each creates notes and edits its own earlier ones, one push at a time, logging what was
        // acknowledged. The killer fires after `killAfter` acknowledgements, while pushes are in flight.
        let logs = Locked<[String: NoteLog]>([:])
        let (acks, ackContinuation) = AsyncStream.makeStream(of: Void.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<3 {
                group.addTask {
                    try? await first.withClient { api in
                        var sequence: Int64 = 0
                        var mine: [(key: String, clientID: Int64)] = []
                        while true {
                            sequence += 1
                            var changes: [NoteChange] = []
                            var keys: [String] = []
                            let clientID = Int64(writer) * 1_000_000 + sequence
                            let key = "\(writer)-\(sequence)"
                            let text = "writer \(writer) note \(sequence) v0\n"
                            changes.append(change(clientID, origin: Int64(writer + 1), edit: clientID * 10, text: text))
                            keys.append(key)
                            logs.withLock { $0[key] = NoteLog(texts: [text], acknowledged: 0) }
                            if let old = mine.randomElement() {
                                let log = logs.withLock { $0[old.key]! }
                                if let serverID = log.serverID, log.acknowledged == log.texts.count {
                                    let newText = "writer \(writer) note \(old.clientID) v\(log.texts.count)\n"
                                    changes.append(
                                        change(old.clientID, origin: Int64(writer + 1), server: serverID, edit: clientID * 10 + 1, text: newText,
                                               baseVersion: Int64(log.texts.count))
                                    )
                                    keys.append(old.key)
                                    logs.withLock { $0[old.key]!.texts.append(newText) }
                                }
                            }
                            let results = try await api.push(token, changes)
                            logs.withLock { logs in
                                for (key, result) in zip(keys, results) where result.status == .created || result.status == .updated {
                                    logs[key]!.serverID = result.serverID
                                    logs[key]!.acknowledged = logs[key]!.texts.count
                                }
                            }
                            mine.append((key, clientID))
                            ackContinuation.yield()
                        }
                    }
                }
            }
            group.addTask {
                var count = 0
                for await _ in acks {
                    count += 1
                    if count >= killAfter { break }
                }
                first.kill9()
                ackContinuation.finish()
            }
            try await group.waitForAll()
        }

        // Restart on the same data directory: every acknowledged text is there.
        let second = try await Daemon.start(binary: binary, dataDirectory: directory)
        let (notes, newID) = try await second.withClient { api in
            let notes = try await api.pullAll(token)
            let fresh = try await api.push(token, [change(999_999_999, edit: 999_999_999, text: "after restart\n")])
            return (notes, fresh[0].serverID)
        }
        #expect(second.terminate() == 0, "graceful shutdown exits 0")

        let stored = byServerID(notes)
        let snapshot = logs.withLock { $0 }
        var checked = 0
        for (key, log) in snapshot where log.acknowledged > 0 {
            let serverID = try #require(log.serverID)
            guard let note = stored[serverID] else {
                Issue.record("seed \(seed): acknowledged note \(key) is missing after kill -9")
                continue
            }
            // The last acknowledged text, or a later one whose push committed but whose answer was lost.
            #expect(log.texts[(log.acknowledged - 1)...].contains(note.text), "seed \(seed): note \(key) has \(note.text)")
            checked += 1
        }
        #expect(checked >= killAfter, "seed \(seed)")
        #expect(Set(notes.map(\.serverID)).count == notes.count)
        if let newID, let largest = notes.map(\.serverID).max() { #expect(newID > largest) }
    }
}
