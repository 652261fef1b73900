import Foundation
import NoteSyncProtocol
import Testing

/// A note's attachments on the wire: the rules a pushed set must keep (``AttachmentRules``), refused by both decoding
/// paths alike, naming the field.
@Suite struct AttachmentRulesTests {
    static let a = String(repeating: "a", count: 64)
    static let b = String(repeating: "b", count: 64)

    /// A manifest as JSON, with `replacing` applied to its text.
    static func manifest(name: String = "p.png", _ replacing: (String, String)? = nil) -> String {
        let json = #"{"name":"\#(name)","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["\#(a)"],"sha256":"\#(b)"}"#
        guard let replacing else { return json }
        return json.replacingOccurrences(of: replacing.0, with: replacing.1)
    }

    static func body(_ key: String, _ value: String) -> Data {
        Data(#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x"},{"clientID":"1","origin":"11","editID":"6","text":"x","\#(key)":\#(value)}]}"#.utf8)
    }

    static func reference(_ body: Data) -> Result<PushRequest, APIErrorBody> {
        Result { () throws(APIErrorBody) in try WireJSON.decodeRequest(PushRequest.self, from: body) }
    }

    /// A set that breaks the rules is refused with a stable code naming the manifest's field, by both paths; the fast
    /// path gives up on it and never accepts it.
    @Test(arguments: [
        ("[\(manifest(("\"size\":3", "\"size\":-1")))]", "invalidField", "[0].size"),
        ("[\(manifest(("\"size\":3", "\"size\":2000000")))]", "invalidField", "[0].chunks"),
        ("[\(manifest(name: "a/b"))]", "invalidField", "[0].name"),
        ("[\(manifest(name: ""))]", "invalidField", "[0].name"),
        ("[\(manifest(name: "x\\u0001"))]", "invalidField", "[0].name"),
        ("[\(manifest(("image/png", "image png")))]", "invalidField", "[0].mediaType"),
        ("[\(manifest(("1048576", "1048577")))]", "invalidField", "[0].chunkSize"),
        ("[\(manifest()),\(manifest(name: "q.png")),\(manifest(name: "p.png"))]", "invalidField", "[2].name"),
        ("[\(manifest(name: "caf\\u00e9")),\(manifest(name: "cafe\\u0301"))]", "invalidField", "[1].name"),
        ("[\((0...AttachmentRules.maxAttachmentsPerNote).map { manifest(name: "f\($0)") }.joined(separator: ","))]", "invalidField", ""),
        ("[\(manifest((b, b.uppercased())))]", "invalidHash", "[0].sha256"),
        ("[\(manifest((a, "a")))]", "invalidHash", "[0].chunks[0]"),
        ("[\(manifest(("\"size\":3", "\"size\":3,\"owner\":\"x\"")))]", "unknownField", "[0].owner"),
        ("[\(manifest(("\"size\":3", "\"size\":null")))]", "invalidJSON", "[0].size"),
    ])
    func invalidAttachmentsAreRefusedNamingTheField(_ attachments: String, _ code: String, _ field: String) throws {
        let codes: [String: APIErrorCode] = [
            "invalidField": .invalidField, "invalidHash": .invalidHash, "unknownField": .unknownField, "invalidJSON": .invalidJSON,
        ]
        for key in ["attachments", "baseAttachments"] {
            let body = Self.body(key, attachments)
            #expect(PushRequest.fastDecode(body) == nil)
            guard case .failure(let error) = Self.reference(body) else {
                Issue.record("JSONDecoder accepted \(key) \(attachments)")
                continue
            }
            #expect(error.code == codes[code] && error.field == "changes[1].\(key)\(field)", "\(error)")
            #expect(error.code.httpStatus == 400)
            #expect(Result { () throws(APIErrorBody) in try PushRequest.decodeBody(body) } == .failure(error))
        }
    }

    /// The fields are optional each on its own, `null` is refused, and a valid set is read by the fast path.
    @Test func attachmentsAndChunkRefsAreOptionalAndReadByTheFastPath() throws {
        let absent = try #require(PushRequest.fastDecode(Self.body("tags", "[]")))
        #expect(absent.changes[1].attachments == nil && absent.changes[1].baseAttachments == nil && absent.changes[1].chunkRefs == nil)
        let set = "[\(Self.manifest()),\(Self.manifest(name: "q.png"))]"
        for key in ["attachments", "baseAttachments"] {
            let read = try #require(PushRequest.fastDecode(Self.body(key, set))?.changes[1])
            let manifests = key == "attachments" ? read.attachments : read.baseAttachments
            #expect(manifests?.map(\.name) == ["p.png", "q.png"] && manifests?.first?.chunks == [ContentHash(Self.a)!])
            #expect(try PushRequest.decodeBody(Self.body(key, set)).changes[1] == read)
        }
        let refs = try #require(PushRequest.fastDecode(Self.body("chunkRefs", #"["\#(Self.a)","\#(Self.a)"]"#))?.changes[1])
        #expect(refs.chunkRefs == [ContentHash(Self.a)!, ContentHash(Self.a)!])
        for key in ["attachments", "baseAttachments", "chunkRefs"] {
            #expect(PushRequest.fastDecode(Self.body(key, "null")) == nil)
            guard case .failure(let error) = Self.reference(Self.body(key, "null")) else {
                Issue.record("null \(key) accepted")
                continue
            }
            #expect(error.code == .invalidJSON && error.field == "changes[1].\(key)")
        }
    }

    /// A change carries at most ``AttachmentRules/maxChunkAddressesPerChange`` chunk addresses over its three fields:
    /// one more is `invalid_field` naming the change, by both paths.
    @Test func aChangeCarriesABoundedNumberOfChunkAddresses() throws {
        let limit = AttachmentRules.maxChunkAddressesPerChange
        let hash = #""\#(Self.a)""#
        let manifest = Self.manifest(("[\(hash)]", "[\(hash),\(hash)]")).replacingOccurrences(of: "\"size\":3", with: "\"size\":1048577")
        func refs(_ count: Int) -> String { "[" + Array(repeating: hash, count: count).joined(separator: ",") + "]" }
        let atLimit = Data(
            #"{"changes":[{"clientID":"1","origin":"11","editID":"6","text":"x","attachments":[\#(manifest)],"baseAttachments":[\#(manifest)],"chunkRefs":\#(refs(limit - 4))}]}"#.utf8)
        let read = try #require(PushRequest.fastDecode(atLimit))
        #expect(AttachmentRules.chunkAddressCount(attachments: read.changes[0].attachments, baseAttachments: read.changes[0].baseAttachments, chunkRefs: read.changes[0].chunkRefs) == limit)
        #expect(try PushRequest.decodeBody(atLimit) == read)
        // The fast writer writes it back as JSONEncoder does (as many bytes, and the same change), and it fits the default body limit beside a text and a
        // base text of the largest size, each fully escaped (6 bytes a byte).
        let written = read.changes[0].encodedJSON()
        #expect(written.count == (try WireJSON.encoder().encode(read.changes[0])).count)
        #expect(try JSONDecoder().decode(NoteChange.self, from: written) == read.changes[0])
        #expect(atLimit.count < SyncLimits().maxBodyBytes - 2 * SyncLimits().maxNoteBytes * 6)
        let over = Data(
            #"{"changes":[{"clientID":"1","origin":"11","editID":"6","text":"x","attachments":[\#(manifest)],"baseAttachments":[\#(manifest)],"chunkRefs":\#(refs(limit - 3))}]}"#.utf8)
        #expect(PushRequest.fastDecode(over) == nil)
        guard case .failure(let error) = Self.reference(over) else {
            Issue.record("JSONDecoder accepted \(limit + 1) chunk addresses")
            return
        }
        #expect(error.code == .invalidField && error.field == "changes[0]" && error.message.contains("\(limit)"), "\(error)")
        #expect(Result { () throws(APIErrorBody) in try PushRequest.decodeBody(over) } == .failure(error))
    }

    /// `unknown_chunk` is a per-change code, never a push's response status.
    @Test func unknownChunkIsAPerChangeCode() {
        #expect(APIErrorCode.unknownChunk.rawValue == "unknown_chunk")
        #expect(APIErrorCode.allKnown.last == .unknownChunk)
        #expect(APIErrorCode.perChange.contains(.unknownChunk))
    }

    @Test func setsAreSortedByNameBytesAndComparedWhateverTheOrder() throws {
        let hash = try #require(ContentHash(Self.a))
        func named(_ name: String) -> AttachmentManifest {
            AttachmentManifest(name: name, size: 1, mediaType: "text/plain", chunks: [hash], sha256: hash)
        }
        let set = [named("b"), named("B"), named("é"), named("a")]
        #expect(AttachmentRules.sorted(set).map(\.name) == ["B", "a", "b", "é"])
        #expect(AttachmentRules.sameSet(set, set.reversed()))
        #expect(!AttachmentRules.sameSet(set, Array(set.dropLast())))
        #expect(AttachmentRules.chunks(of: set) == [hash])
        #expect(AttachmentRules.violation(in: set) == nil)
    }
}
