import Foundation
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// The chunk routes over a real socket, as raw HTTP (issue 33, phase 1): a whole chunk passes a body limit smaller
/// than it (the route streams its body), and bodies that are too large (declared or streamed), cut short or over the
/// quota are each refused with the protocol's JSON, leaving no chunk and no file behind.
@Suite("Chunk routes over HTTP")
struct ChunkRouteTests {
    static func head(_ method: String, _ hash: ContentHash, token: String, _ fields: [String]) -> String {
        ([
            "\(method) \(Endpoint.putChunk.path(hash: hash)) HTTP/1.1", "Host: x", "Authorization: Bearer \(token)",
        ] + fields).joined(separator: "\r\n") + "\r\n\r\n"
    }

    /// `PUT` with `Content-Length`, the whole body sent at once.
    static func put(_ connection: RawConnection, _ bytes: [UInt8], as hash: ContentHash, token: String) async throws -> RawResponse {
        try connection.send(
            head("PUT", hash, token: token, ["Content-Type: application/octet-stream", "Content-Length: \(bytes.count)"]))
        try await connection.sendOffPool(bytes: bytes)
        return try #require(await connection.readResponse(timeout: .seconds(30)))
    }

    /// Which of `hashes` the account lacks.
    static func missing(port: Int, token: String, _ hashes: [ContentHash]) async throws -> [ContentHash] {
        let connection = try RawConnection(port: port)
        let json = String(decoding: try WireJSON.encoder().encode(MissingChunksRequest(hashes: hashes)), as: UTF8.self)
        try connection.send(
            "POST \(Endpoint.missingChunks.path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n\(json)")
        let response = try #require(await connection.readResponse(timeout: .seconds(30)))
        #expect(response.status == 200)
        return try JSONDecoder().decode(MissingChunksResponse.self, from: response.body).missing
    }

    /// The regular files under the data directory's chunk directory.
    static func chunkFiles(_ dataDirectory: URL) -> [String] {
        let root = dataDirectory.appendingPathComponent(SQLiteNoteStore.chunkDirectoryName).path
        return (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []).filter { relative in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }

    static func expectRefusal(_ response: RawResponse?, _ status: Int, _ code: APIErrorCode, _ what: String) {
        #expect(response?.status == status, "\(what)")
        #expect(response?.headers["content-type"] == "application/json", "\(what)")
        let body = response.flatMap { try? JSONDecoder().decode(APIErrorBody.self, from: $0.body) }
        #expect(body?.code == code, "\(what): \(response.map { String(decoding: $0.body, as: UTF8.self) } ?? "no answer")")
    }

    @Test func aWholeChunkPassesABodyLimitSmallerThanIt() async throws {
        try await withTemporaryDirectory("chunk-routes") { directory in
            try await LiveDaemon.run({
                $0.dataDirectory = directory.path
                $0.limits.maxBodyBytes = 4096
            }) { port, _ in
                let token = try await LiveSyncHTTPTests.token(port: port)
                let chunk = ChunkStoreConformance.bytes(ChunkRules.maxChunkBytes, seed: 40)
                let hash = ChunkStoreConformance.address(chunk)
                let connection = try RawConnection(port: port)
                let created = try await Self.put(connection, chunk, as: hash, token: token)
                #expect(created.status == 201, "\(String(decoding: created.body, as: UTF8.self))")
                #expect(try JSONDecoder().decode(ChunkStoredResponse.self, from: created.body) == ChunkStoredResponse(hash: hash, size: chunk.count))
                #expect(try await Self.put(connection, chunk, as: hash, token: token).status == 200, "stored once, answered 200 again")
                try connection.send(Self.head("GET", hash, token: token, []))
                let read = try #require(await connection.readResponse(timeout: .seconds(30)))
                #expect(read.status == 200)
                #expect(read.headers["content-type"] == ChunkRules.mediaType)
                #expect(read.headers["content-length"] == "\(chunk.count)")
                #expect(Array(read.body) == chunk)
                #expect(try await Self.missing(port: port, token: token, [hash]) == [])
                #expect(Self.chunkFiles(directory).count == 1)
            }
        }
    }

    /// curl sends `Expect: 100-continue` with every `PUT` and waits a second for `100 Continue` before it sends the
    /// body: the daemon answers it at once.
    @Test func aPutThatExpectsContinueIsToldToGoOnBeforeItSendsItsBody() async throws {
        try await withTemporaryDirectory("chunk-routes") { directory in
            try await LiveDaemon.run({ $0.dataDirectory = directory.path }) { port, _ in
                let token = try await LiveSyncHTTPTests.token(port: port)
                let chunk = ChunkStoreConformance.bytes(ChunkRules.maxChunkBytes, seed: 44)
                let hash = ChunkStoreConformance.address(chunk)
                let connection = try RawConnection(port: port)
                for expected in [201, 200] {
                    try connection.send(
                        Self.head(
                            "PUT", hash, token: token,
                            ["Content-Type: application/octet-stream", "Content-Length: \(chunk.count)", "Expect: 100-Continue"]))
                    let interim = await connection.readResponse(timeout: .seconds(10))
                    #expect(interim?.status == 100, "no 100 Continue before the body")
                    #expect(interim?.body.isEmpty == true)
                    try await connection.sendOffPool(bytes: chunk)
                    let stored = try #require(await connection.readResponse(timeout: .seconds(30)))
                    #expect(stored.status == expected, "\(String(decoding: stored.body, as: UTF8.self))")
                }
                // Without the expectation, no interim answer: the final one comes first.
                #expect(try await Self.put(connection, chunk, as: hash, token: token).status == 200)
            }
        }
    }

    @Test func oversizedCutAndOverQuotaBodiesStoreNothing() async throws {
        try await withTemporaryDirectory("chunk-routes") { directory in
            try await LiveDaemon.run({
                $0.dataDirectory = directory.path
                $0.quota.maxTextBytes = 3000
            }) { port, _ in
                let token = try await LiveSyncHTTPTests.token(port: port)
                let octets = "Content-Type: application/octet-stream"

                // Declared too large: refused from the head, before a byte of the body is read.
                let large = ChunkStoreConformance.bytes(ChunkRules.maxChunkBytes + 1, seed: 41)
                let declared = try RawConnection(port: port)
                try declared.send(Self.head("PUT", ChunkStoreConformance.address(large), token: token, [octets, "Content-Length: \(large.count)"]))
                Self.expectRefusal(await declared.readResponse(timeout: .seconds(30)), 413, .chunkTooLarge, "declared too large")

                // Streamed too large (chunked, no length): refused once the limit is passed.
                let streamed = try RawConnection(port: port)
                try streamed.send(Self.head("PUT", ChunkStoreConformance.address(large), token: token, [octets, "Transfer-Encoding: chunked"]))
                for start in stride(from: 0, to: large.count, by: 64 << 10) {
                    let piece = large[start..<min(start + (64 << 10), large.count)]
                    // The daemon may answer and stop reading before the end: later sends may fail.
                    do {
                        try streamed.send(String(piece.count, radix: 16) + "\r\n")
                        try await streamed.sendOffPool(bytes: Array(piece))
                        try streamed.send("\r\n")
                    } catch { break }
                }
                try? streamed.send("0\r\n\r\n")
                Self.expectRefusal(await streamed.readResponse(timeout: .seconds(30)), 413, .chunkTooLarge, "streamed too large")

                // Over the account's 3,000 bytes, declared and streamed.
                let big = ChunkStoreConformance.bytes(3001, seed: 42)
                let bigHash = ChunkStoreConformance.address(big)
                let overQuota = try RawConnection(port: port)
                Self.expectRefusal(try await Self.put(overQuota, big, as: bigHash, token: token), 413, .quotaExceeded, "declared over the quota")
                let overQuotaStreamed = try RawConnection(port: port)
                try overQuotaStreamed.send(
                    Self.head("PUT", bigHash, token: token, [octets, "Transfer-Encoding: chunked"]) + String(big.count, radix: 16) + "\r\n")
                try await overQuotaStreamed.sendOffPool(bytes: big)
                try overQuotaStreamed.send("\r\n0\r\n\r\n")
                Self.expectRefusal(await overQuotaStreamed.readResponse(timeout: .seconds(30)), 413, .quotaExceeded, "streamed over the quota")

                // Cut short: the client goes after half its body.
                let cut = ChunkStoreConformance.bytes(2000, seed: 43)
                let cutHash = ChunkStoreConformance.address(cut)
                let cutConnection = try RawConnection(port: port)
                try cutConnection.send(Self.head("PUT", cutHash, token: token, [octets, "Content-Length: \(cut.count)"]))
                try cutConnection.send(bytes: Array(cut[..<1000]))
                cutConnection.hangUp()

                // None of them was stored, and no file was left; a whole chunk still goes in afterwards.
                #expect(try await Self.missing(port: port, token: token, [bigHash, cutHash]) == [bigHash, cutHash])
                // The cut body's temporary file goes once the daemon has read the end of that stream.
                let deadline = ContinuousClock.now + .seconds(30)
                while !Self.chunkFiles(directory).isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                #expect(Self.chunkFiles(directory) == [])
                let after = try RawConnection(port: port)
                #expect(try await Self.put(after, cut, as: cutHash, token: token).status == 201)
                #expect(Self.chunkFiles(directory).count == 1)
            }
        }
    }
}
