import Foundation
import NoteSyncProtocol
import Testing

/// Issue 33: an encrypted account's manifest carries its file's key (`key`, inside the note envelope only), and the
/// chunk limit is a whole chunk sealed.
@Suite struct AttachmentKeyWireTests {
    static let key = String(repeating: "5e", count: 32)

    static func sealed(size: Int64, chunkSize: Int = ChunkRules.chunkSize, key: String? = AttachmentKeyWireTests.key) -> AttachmentManifest {
        var manifest = AttachmentWireTests.manifest(size: size, chunkSize: chunkSize)
        manifest.key = key
        return manifest
    }

    @Test func aKeyRoundTripsInItsSortedPlaceAndIsLeftOutWhenAbsent() throws {
        let manifest = Self.sealed(size: 3 << 20)
        let json = String(decoding: manifest.encodedJSON(), as: UTF8.self)
        #expect(json.contains(#"],"key":"\#(Self.key)","mediaType":"#))
        #expect(try AttachmentManifest.decode(manifest.encodedJSON()) == manifest)
        let plain = String(decoding: AttachmentWireTests.manifest(size: 1).encodedJSON(), as: UTF8.self)
        #expect(!plain.contains("key"))
    }

    @Test func aKeyIs64LowercaseHexDigitsAndNeverNull() throws {
        for bad in [Self.key.uppercased(), String(Self.key.dropLast()), "", "zz" + Self.key.dropFirst(2)] {
            #expect(throws: APIErrorBody.self, "\(bad)") { try Self.sealed(size: 5, key: bad).validate() }
            do {
                try Self.sealed(size: 5, key: bad).validate()
            } catch {
                #expect(error.code == .invalidField && error.field == "key")
            }
        }
        let json = String(decoding: AttachmentWireTests.manifest(size: 5).encodedJSON(), as: UTF8.self)
        let withNull = Data(json.replacingOccurrences(of: #""mediaType""#, with: #""key":null,"mediaType""#).utf8)
        #expect(throws: APIErrorBody.self) { try AttachmentManifest.decode(withNull) }
    }

    @Test func theChunkLimitIsAWholeChunkSealedAndASealedManifestsChunksFitIt() throws {
        #expect(ChunkRules.maxChunkBytes == ChunkRules.chunkSize + ChunkRules.sealingOverhead)
        #expect(ChunkRules.sealingOverhead == 17)
        // A manifest's chunk size is at most the protocol's, sealed or not, so that its chunks sealed fit the limit.
        try Self.sealed(size: 5 << 20, chunkSize: ChunkRules.chunkSize).validate()
        #expect(throws: APIErrorBody.self) { try Self.sealed(size: 5 << 20, chunkSize: ChunkRules.chunkSize + 1).validate() }
        let manifest = Self.sealed(size: (2 << 20) + 3)
        #expect((0..<3).map(manifest.storedSize(ofChunk:)) == [(1 << 20) + 17, (1 << 20) + 17, 3 + 17])
        #expect(AttachmentWireTests.manifest(size: 3).storedSize(ofChunk: 0) == 3)
    }
}
