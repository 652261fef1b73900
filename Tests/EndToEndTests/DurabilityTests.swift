import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient
import Testing
import TestSupport

/// The real `notesyncd`, killed with SIGKILL while three writers push: every acknowledged push is there after a
/// restart.
@Suite("Durability", .serialized, .enabled(if: Binaries.exist(Binaries.notesyncd), "build notesyncd first (swift build)"))
struct DurabilityTests {
    /// What the writers sent for one note: every text in order, and how many of them were acknowledged.
    struct NoteLog: Sendable {
        var serverID: FlakeID?
        var texts: [String]
        var acknowledged: Int
    }

    @Test(.timeLimit(.minutes(5)))
    func killNineLosesNoAcknowledgedPush() async throws {
        let directory = try makeTemporaryDirectory("kill")
        defer { try? FileManager.default.removeItem(at: directory) }
        let arguments = ["--port", "0", "--data-dir", directory.appendingPathComponent("data").path]
        let log = directory.appendingPathComponent("notesyncd.log")
        let seed = propertySeeds(1, base: UInt64(UInt32.random(in: 1...UInt32.max)))[0]
        var rng = SplitMix64(seed: seed)
        let killAfter = 20 + Int(rng.next() % 200)  // acknowledged pushes before kill -9

        let first = try await DaemonProcess.start(arguments, log: log)
        let firstAPI = APIClient(transport: URLSessionTransport(baseURL: URL(string: first.url)!))
        try await firstAPI.signUp("durable")
        let token = try await firstAPI.signIn("durable").token

        // Writers: each creates notes and edits its own earlier ones, one push at a time, logging what was
        // acknowledged. The killer fires after `killAfter` acknowledgements, while pushes are in flight.
        let logs = Locked<[String: NoteLog]>([:])
        let (acks, ackContinuation) = AsyncStream.makeStream(of: Void.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<3 {
                group.addTask {
                    let api = APIClient(transport: URLSessionTransport(baseURL: URL(string: first.url)!))
                    do {
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
                    } catch {
                        // The daemon was killed under this writer: its last push may or may not have committed.
                    }
                }
            }
            group.addTask {
                var count = 0
                for await _ in acks {
                    count += 1
                    if count >= killAfter { break }
                }
                await first.kill9()
                ackContinuation.finish()
            }
            try await group.waitForAll()
        }

        // Restart on the same data directory: every acknowledged text is there.
        let second = try await DaemonProcess.start(arguments, log: log)
        let secondAPI = APIClient(transport: URLSessionTransport(baseURL: URL(string: second.url)!))
        let notes = try await secondAPI.pullAll(token)
        let newID = try await secondAPI.push(token, [change(999_999_999, edit: 999_999_999, text: "after restart\n")])[0].serverID
        #expect(await second.terminate() == .exited(0), "graceful shutdown exits 0")

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
