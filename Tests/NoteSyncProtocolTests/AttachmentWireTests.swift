import Foundation
import NoteSyncProtocol
import Testing

/// The chunk protocol's shared types: content addresses, the attachment manifest's codec and rules, the chunk
/// routes' paths.
@Suite struct AttachmentWireTests {
    static let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  // SHA-256 of "abc"

    @Test func contentHashesAre64LowercaseHexDigits() throws {
        let hash = try #require(ContentHash(Self.abc))
        #expect(hash.hex == Self.abc)
        #expect(ContentHash(digest: hash.bytes) == hash)
        #expect(hash.bytes.count == 32 && hash.bytes.first == 0xba && hash.bytes.last == 0xad)
        for bad in [
            "", String(Self.abc.dropLast()), Self.abc + "0", Self.abc.uppercased(), "g" + Self.abc.dropFirst(),
            String(Self.abc.dropLast()) + " ", "../" + Self.abc.dropFirst(3), String(repeating: "é", count: 32),
        ] {
            #expect(ContentHash(bad) == nil, "\(bad)")
        }
    }

    @Test func aBadHashInABodyIsInvalidHashNamingTheField() {
        let body = Data(#"{"hashes":["\#(Self.abc)","ABC"]}"#.utf8)
        #expect { try WireJSON.decodeRequest(MissingChunksRequest.self, from: body) } throws: { error in
            let body = error as? APIErrorBody
            return body?.code == .invalidHash && body?.field == "hashes[1]" && body?.code.httpStatus == 400
        }
        #expect { try WireJSON.decodeRequest(MissingChunksRequest.self, from: Data(#"{"hashes":[],"more":1}"#.utf8)) } throws: {
            ($0 as? APIErrorBody)?.code == .unknownField
        }
    }

    static func manifest(size: Int64, chunkSize: Int = ChunkRules.chunkSize) -> AttachmentManifest {
        let hash = ContentHash(Self.abc)!
        return AttachmentManifest(
            name: "photo.png", size: size, mediaType: "image/png", chunkSize: chunkSize,
            chunks: Array(repeating: hash, count: ChunkRules.chunkCount(size: size, chunkSize: chunkSize)), sha256: hash)
    }

    @Test(arguments: [Int64(0), 1, 1 << 20, (1 << 20) + 1, 5 << 20, (1 << 30) + 17] as [Int64])
    func manifestsRoundTripAndCountTheirChunks(_ size: Int64) throws {
        let manifest = Self.manifest(size: size)
        let decoded = try AttachmentManifest.decode(manifest.encodedJSON())
        #expect(decoded == manifest)
        #expect(manifest.chunks.count == (size == 0 ? 0 : Int((size - 1) / (1 << 20)) + 1))
        if !manifest.chunks.isEmpty {
            #expect((0..<manifest.chunks.count).map(manifest.size(ofChunk:)).reduce(0, +) == Int(size))
            #expect(manifest.size(ofChunk: manifest.chunks.count - 1) > 0)
        }
        let json = String(decoding: manifest.encodedJSON(), as: UTF8.self)
        // Keys sorted, so that one manifest always encodes to the same bytes.
        #expect(json.hasPrefix(#"{"chunkSize":1048576,"chunks":["#))
        #expect(json.hasSuffix(#""mediaType":"image/png","name":"photo.png","sha256":"\#(manifest.sha256)","size":\#(size)}"#))
    }

    @Test func manifestsAreCheckedFieldByField() throws {
        func refusal(_ change: (inout AttachmentManifest) -> Void) -> String? {
            var manifest = Self.manifest(size: 3 << 20)
            change(&manifest)
            do {
                _ = try AttachmentManifest.decode(manifest.encodedJSON())
                return nil
            } catch {
                return error.code == .invalidField ? error.field : "\(error.code)"
            }
        }
        #expect(refusal { _ in } == nil)
        #expect(refusal { $0.name = "" } == "name")
        #expect(refusal { $0.name = "a/b.png" } == "name")
        #expect(refusal { $0.name = ".." } == "name")
        #expect(refusal { $0.name = "tab\there" } == "name")
        #expect(refusal { $0.name = String(repeating: "é", count: 128) } == "name")
        #expect(refusal { $0.name = "résumé 2026.pdf" } == nil)
        #expect(refusal { $0.mediaType = "image" } == "mediaType")
        #expect(refusal { $0.mediaType = "image/png; charset=x" } == "mediaType")
        #expect(refusal { $0.mediaType = "image/svg+xml" } == nil)
        #expect(refusal { $0.chunkSize = 0 } == "chunkSize")
        #expect(refusal { $0.chunkSize = (1 << 20) + 1 } == "chunkSize")
        #expect(refusal { $0.size = -1 } == "size")
        #expect(refusal { $0.chunks.removeLast() } == "chunks")
        #expect(refusal { $0.chunks.append($0.sha256) } == "chunks")
        #expect(throws: APIErrorBody.self) {
            try AttachmentManifest.decode(Data(#"{"name":"a","size":0,"mediaType":"a/b","chunkSize":1,"chunks":[],"sha256":"x"}"#.utf8))
        }
        #expect(throws: APIErrorBody.self) {
            var json = String(decoding: Self.manifest(size: 1).encodedJSON(), as: UTF8.self)
            json.removeLast()
            _ = try AttachmentManifest.decode(Data((json + #","encrypted":true}"#).utf8))
        }
    }

    @Test func chunkRoutesHaveATemplatePathAndAFixedOneBesideThem() throws {
        let hash = try #require(ContentHash(Self.abc))
        #expect(Endpoint.putChunk.path == "/v1/chunks/{hash}" && Endpoint.getChunk.path == "/v1/chunks/{hash}")
        #expect(Endpoint.putChunk.path(hash: hash) == "/v1/chunks/\(Self.abc)")
        #expect(Endpoint.matching(method: "PUT", path: "/v1/chunks/\(Self.abc)") == .putChunk)
        #expect(Endpoint.matching(method: "GET", path: "/v1/chunks/\(Self.abc)") == .getChunk)
        // Any one component matches the template (the handler refuses a bad hash: invalid_hash) ...
        #expect(Endpoint.matching(method: "GET", path: "/v1/chunks/nothex") == .getChunk)
        // ... but not more, nor none, nor the fixed path beside it.
        #expect(Endpoint.matching(method: "GET", path: "/v1/chunks/a/b") == nil)
        #expect(Endpoint.matching(method: "GET", path: "/v1/chunks/") == nil)
        #expect(Endpoint.matching(method: "GET", path: "/v1/chunks/missing") == nil)
        #expect(Endpoint.matching(method: "POST", path: "/v1/chunks/missing") == .missingChunks)
        #expect(Endpoint.endpoints(at: "/v1/chunks/missing") == [.missingChunks])
        #expect(Endpoint.endpoints(at: "/v1/chunks/\(Self.abc)").map(\.method) == [.put, .get])
        #expect(Endpoint.putChunk.successStatus == 201 && Endpoint.putChunk.requestMediaType == "application/octet-stream")
        #expect([Endpoint.missingChunks, .putChunk, .getChunk].allSatisfy { $0.requiresAuthentication })
    }
}
