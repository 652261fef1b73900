import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

/// Expects hand-written JSON to be `reference` (what `JSONEncoder` writes) but for the order of its keys, which
/// `JSONEncoder` varies from run to run: the same JSON object, and the same length (the same escapes).
func expectSameJSON(_ written: Data, as reference: Data, _ context: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws {
    let object = try JSONSerialization.jsonObject(with: written) as? NSDictionary
    let referenceObject = try JSONSerialization.jsonObject(with: reference) as? NSDictionary
    #expect(object != nil && object == referenceObject, "\(context)", sourceLocation: sourceLocation)
    #expect(
        written.count == reference.count,
        "\(context):\n\(String(decoding: written, as: UTF8.self))\n\(String(decoding: reference, as: UTF8.self))", sourceLocation: sourceLocation)
}

@Suite("Pull codec")
struct PullCodecTests {
    /// Every key of every hand-coded message is found by its table and written as `"name":`.
    @Test func keyTablesMatchTheCodingKeys() {
        func check<Key: WireKey>(_ type: Key.Type) {
            let table = KeyTable<Key>()
            var bits: UInt32 = 0
            for key in Key.allCases {
                let match = Array(key.rawValue.utf8).withUnsafeBytes { table.match($0) }
                #expect(match?.key == key)
                #expect(bits & (match?.bit ?? 0) == 0, "one bit per key")
                bits |= match?.bit ?? 0
                #expect(table.quoted(key) == Array("\"\(key.rawValue)\":".utf8))
                #expect(Array((key.rawValue + "x").utf8).withUnsafeBytes { table.match($0) } == nil)
            }
        }
        check(NoteChange.CodingKeys.self)
        check(PushRequest.CodingKeys.self)
        check(ChangeResult.CodingKeys.self)
        check(NoteRecord.CodingKeys.self)
        check(PullResponse.CodingKeys.self)
        check(APIErrorBody.CodingKeys.self)
        check(AttachmentManifest.CodingKeys.self)
    }

    static func write(_ response: PullResponse) -> Data {
        var writer = PullResponse.Writer(count: response.changes.count, textBytes: 0)
        for record in response.changes { writer.note(record) }
        return writer.finish(cursor: response.cursor, hasMore: response.hasMore, remaining: response.remaining)
    }

    @Test func matchesJSONEncoderOnRandomNotes() throws {
        let alphabet: [String] = ["a", "é", "e\u{301}", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1F}", "\u{7F}", "/", "👩‍👩‍👧", "\u{2028}", " ", "z"]
        for seed in propertySeeds(200) {
            var rng = SplitMix64(seed: seed)
            let records = (0..<Int(rng.next() % 6)).map { index in
                NoteRecord(
                    serverID: id(Int64(rng.next() >> 1) | 1), clientID: id(Int64(1 + rng.next() % 1000)),
                    origin: id(Int64(rng.next() >> 2) | 1), version: Int64(1 + rng.next() % 9),
                    text: (0..<Int(rng.next() % 20)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }.joined(),
                    deleted: rng.next() % 2 == 0, conflictOf: rng.next() % 3 == 0 ? id(Int64(index + 7)) : nil,
                    updatedAt: WireTime.format(unixMilliseconds: testEpoch + Int64(rng.next() % 3) * 1_000_003),
                    editedAt: rng.next() % 3 == 0 ? nil : WireTime.format(unixMilliseconds: testEpoch - Int64(rng.next() % 3) * 7_000_001),
                    tags: rng.next() % 4 == 0 ? nil : PushCodecTests.randomTags(&rng),
                    pinned: rng.next() % 4 == 0 ? nil : rng.next() % 2 == 0,
                    archived: rng.next() % 4 == 0 ? nil : rng.next() % 2 == 0,
                    attachments: rng.next() % 3 == 0 ? nil : PushCodecTests.randomAttachments(&rng))
            }
            let response = PullResponse(
                changes: records, cursor: SyncCursor(sequence: Int64(rng.next() % 100)), hasMore: rng.next() % 2 == 0,
                remaining: rng.next() % 3 == 0 ? nil : Int(rng.next() % 2_000_000))
            let fast = Self.write(response)
            let decoded = try JSONDecoder().decode(PullResponse.self, from: fast)
            #expect(decoded == response, "seed \(seed)")
            for (a, b) in zip(decoded.changes, response.changes) {
                #expect(Array(a.text.utf8) == Array(b.text.utf8), "seed \(seed)")
            }
            // Same JSON object as JSONEncoder's (key order aside), and the same length: the same escapes.
            let reference = try WireJSON.encoder().encode(response)
            try expectSameJSON(fast, as: reference, "seed \(seed)")
            // The client's hand-written decoder reads both without falling back, to the same value.
            for body in [fast, reference] {
                let client = try #require(PullResponse.fast(body), "seed \(seed): \(String(decoding: body, as: UTF8.self))")
                #expect(client == response, "seed \(seed)")
                for (a, b) in zip(client.changes, response.changes) {
                    #expect(Array(a.text.utf8) == Array(b.text.utf8), "seed \(seed)")
                }
            }
        }
    }

    /// The page writer keeps the bytes of the last time it wrote: any time string, repeated or not, escaped or not, is
    /// still written as `JSONEncoder` writes it.
    @Test func timesAreWrittenAsJSONEncoderWritesThemWhateverTheyHold() throws {
        let times = ["2026-11-22T10:15:30.123Z", "2026-11-22T10:15:30.123Z", "a \"quoted\"\n time", "a \"quoted\"\n time", "", "2026-11-22T10:15:30.123Z"]
        let records = times.enumerated().map { index, time in
            NoteRecord(
                serverID: id(Int64(index + 1)), clientID: id(5), origin: id(6), version: 1, text: "t", deleted: false, updatedAt: time,
                editedAt: index % 2 == 0 ? time : times[(index + 3) % times.count])
        }
        let response = PullResponse(changes: records, cursor: SyncCursor(sequence: 9), hasMore: false)
        let reference = try WireJSON.encoder().encode(response)
        for written in [Self.write(response), response.encodedJSON()] {
            #expect(try JSONDecoder().decode(PullResponse.self, from: written) == response)
            try expectSameJSON(written, as: reference)
        }
    }

    @Test func byteBufferGrowsKeepsEveryByteAndHandsItsMemoryToData() {
        for seed in propertySeeds(50) {
            var rng = SplitMix64(seed: seed)
            let bytes = JSONBytes(capacity: 1)
            var expected: [UInt8] = []
            for _ in 0..<Int(rng.next() % 400) {
                let chunk = (0..<Int(rng.next() % 300)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                switch rng.next() % 3 {
                case 0: for byte in chunk { bytes.append(byte) }
                case 1: bytes += chunk
                default: chunk.withUnsafeBytes { bytes.append(contentsOf: $0) }
                }
                expected += chunk
            }
            #expect(bytes.count == expected.count, "seed \(seed)")
            let data = bytes.takeData()
            #expect(Array(data) == expected, "seed \(seed)")
            #expect(bytes.count == 0 && bytes.takeData().isEmpty, "seed \(seed)")
            bytes.append(7)
            #expect(Array(bytes.takeData()) == [7], "seed \(seed)")
            #expect(Array(data) == expected, "seed \(seed): the taken Data must not share the reused buffer")
        }
    }

    struct Writer: JSONByteWriting { let bytes = JSONBytes() }

    @Test func integersIncludingTheSmallestAreWrittenInFull() {
        let writer = Writer()
        for value: Int64 in [0, 7, -5, .max, .min] {
            writer.integer(value)
            writer.raw(",")
        }
        #expect(String(decoding: writer.bytes.takeData(), as: UTF8.self) == "0,7,-5,9223372036854775807,-9223372036854775808,")
    }
}

@Suite("Push codec")
struct PushCodecTests {
    static let alphabet: [String] = [
        "a", "é", "e\u{301}", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1F}", "\u{7F}", "/", "👩‍👩‍👧", "\u{2028}", " ", "z",
    ]

    static func randomText(_ rng: inout SplitMix64) -> String {
        (0..<Int(rng.next() % 20)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }.joined()
    }

    /// Tags with distinct keys (each display form possibly another case of it): letters of several scripts, marks,
    /// digits, the four punctuation characters, and the longest name.
    static let tagPool: [String] = [
        "work", "idea", "é", "e\u{301}x", "a/b", "v1.2", "日本", "x_y-z", "Ünï", "हिंदी", "٣٤", String(repeating: "z", count: 64),
    ]

    /// A valid set of tags (possibly empty), in random order.
    static func randomTags(_ rng: inout SplitMix64) -> [String] {
        var pool = tagPool
        var tags: [String] = []
        for _ in 0..<Int(rng.next() % 5) {
            let tag = pool.remove(at: Int(rng.next() % UInt64(pool.count)))
            tags.append(rng.next() % 3 == 0 ? tag.uppercased() : tag)
        }
        return tags
    }

    /// Names with distinct values, escapes and the longest name among them.
    static let attachmentNamePool: [String] = [
        "photo.png", "Photo.png", "caf\u{e9}.txt", "a\"b\\c", "line\u{2028}sep", "\u{1F4F7} shot.jpeg", ".profile", "x y",
        String(repeating: "n", count: AttachmentManifest.maxNameBytes),
    ]

    /// A random chunk address.
    static func randomHash(_ rng: inout SplitMix64) -> ContentHash {
        ContentHash(digest: (0..<32).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
    }

    /// A valid set of attachments (possibly empty), in random order: sizes of 0 to 3 chunks.
    static func randomAttachments(_ rng: inout SplitMix64) -> [AttachmentManifest] {
        var pool = attachmentNamePool
        return (0..<Int(rng.next() % 4)).map { _ in
            let name = pool.remove(at: Int(rng.next() % UInt64(pool.count)))
            let chunkSize = rng.next() % 2 == 0 ? ChunkRules.chunkSize : Int(1 + rng.next() % 100)
            let size = Int64(rng.next() % UInt64(3 * chunkSize + 1))
            let count = ChunkRules.chunkCount(size: size, chunkSize: chunkSize)
            return AttachmentManifest(
                name: name, size: size, mediaType: ["image/png", "text/plain", AttachmentManifest.defaultMediaType][Int(rng.next() % 3)],
                chunkSize: chunkSize, chunks: (0..<count).map { _ in randomHash(&rng) }, sha256: randomHash(&rng))
        }
    }

    static func randomRequest(_ rng: inout SplitMix64) -> PushRequest {
        PushRequest(changes: (0..<Int(rng.next() % 6)).map { _ in
            NoteChange(
                clientID: id(Int64(rng.next() >> 1) | 1), origin: id(Int64(1 + rng.next() % 1000)),
                serverID: rng.next() % 2 == 0 ? id(Int64(rng.next() >> 2) | 1) : nil, editID: id(Int64(rng.next() >> 1) | 1),
                text: randomText(&rng), deleted: rng.next() % 3 == 0,
                baseVersion: rng.next() % 2 == 0 ? Int64(rng.next() % 1000) - 1 : nil,
                baseText: rng.next() % 2 == 0 ? randomText(&rng) : nil,
                editedAt: rng.next() % 2 == 0 ? WireTime.format(unixMilliseconds: testEpoch + Int64(rng.next() % 1_000_000_000)) : nil,
                tags: rng.next() % 2 == 0 ? randomTags(&rng) : nil, pinned: rng.next() % 3 == 0 ? rng.next() % 2 == 0 : nil,
                archived: rng.next() % 3 == 0 ? rng.next() % 2 == 0 : nil,
                baseTags: rng.next() % 2 == 0 ? randomTags(&rng) : nil, basePinned: rng.next() % 3 == 0 ? rng.next() % 2 == 0 : nil,
                baseArchived: rng.next() % 3 == 0 ? rng.next() % 2 == 0 : nil,
                attachments: rng.next() % 2 == 0 ? randomAttachments(&rng) : nil,
                baseAttachments: rng.next() % 3 == 0 ? randomAttachments(&rng) : nil,
                chunkRefs: rng.next() % 4 == 0 ? (0..<Int(rng.next() % 4)).map { _ in randomHash(&rng) } : nil)
        })
    }

    /// What the JSONDecoder path answers: the request, or the protocol error.
    static func reference(_ body: Data) -> Result<PushRequest, APIErrorBody> {
        Result { () throws(APIErrorBody) in try WireJSON.decodeRequest(PushRequest.self, from: body) }
    }

    @Test func decodesWhatJSONEncoderWritesWithoutFallingBack() throws {
        for seed in propertySeeds(300) {
            var rng = SplitMix64(seed: seed)
            let request = Self.randomRequest(&rng)
            let body = try WireJSON.encoder().encode(request)
            let fast = try #require(PushRequest.fastDecode(body), "seed \(seed): \(String(decoding: body, as: UTF8.self))")
            #expect(fast == request, "seed \(seed)")
            for (a, b) in zip(fast.changes, request.changes) {
                #expect(Array(a.text.utf8) == Array(b.text.utf8) && a.baseText.map { Array($0.utf8) } == b.baseText.map { Array($0.utf8) })
            }
        }
    }

    /// Hand-written bodies, valid and not: the fast path never accepts what JSONDecoder refuses, never decodes
    /// another value, and `decodeRequest` answers every error exactly as JSONDecoder's path does.
    static let bodies: [String] = [
        #"{"changes":[]}"#, #" { "changes" : [ ] } "#, #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x"}]}"#,
        #"{"changes":[{"clientID":"0001","origin":"11","editID":"5","text":"x","serverID":null,"deleted":null,"baseVersion":null,"baseText":null}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"a\u00e9\ud83d\ude00\/\b\f\n\r\t\"\\"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"\ud83d"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"\ude00x"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"\x"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","baseVersion":-0}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","baseVersion":-7}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","baseVersion":07}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","baseVersion":1.0}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","baseVersion":1e2}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","baseVersion":9223372036854775808}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","deleted":"yes"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","editedAt":"2026-11-22T10:15:30.123Z"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","editedAt":null}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","editedAt":"2026-11-22T10:15:30Z"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","editedAt":"2026-02-30T10:15:30.123Z"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","editedAt":"yesterday"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","editedAt":1732270530123}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","deleted":true,"deleted":false}]}"#,
        #"{"changes":[{"clientID":1,"origin":"11","editID":"5","text":"x"}]}"#,
        #"{"changes":[{"clientID":"9223372036854775807","origin":"11","editID":"5","text":"x"}]}"#,
        #"{"changes":[{"clientID":"9223372036854775808","origin":"11","editID":"5","text":"x"}]}"#,
        #"{"changes":[{"clientID":"0","origin":"11","editID":"5","text":"x"}]}"#,
        #"{"changes":[{"clientID":"-3","origin":"11","editID":"5","text":"x"}]}"#,
        #"{"changes":[{"clientID":" 3","origin":"11","editID":"5","text":"x"}]}"#,
        #"{"changes":[{"clientID":"","origin":"11","editID":"5","text":"x"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":null}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","owner":"bob"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","te\u0078t":"x"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x"},]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x",}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x"}]} x"#,
        #"{"changes":[],"accountID":"2"}"#, #"{"changes":[],"changes":[]}"#, #"{"changes":null}"#, #"{"changes":{}}"#,
        #"{"changes":"#, "", "null", "[]", "{}", "{\"changes\":[{\"clientID\":\"1\",\"origin\":\"11\",\"editID\":\"5\",\"text\":\"a\u{1}\"}]}",
        // Tags and flags.
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":["work","a/b"],"pinned":true,"archived":false,"baseTags":[],"basePinned":false,"baseArchived":false}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":[ "W\u00f6rk" , "\u65e5\u672c" ]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":["Work","work"]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":["caf\u00e9","cafe\u0301"]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":["two words"]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":["/root"]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":["end."]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":[""]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":["\u0301a"]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","baseTags":["ok","not ok"]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":[7]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":"work"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":null}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":[null]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":["a",]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":[],"tags":[]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","pinned":null}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","archived":1}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","basePinned":"true"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":["\#(String(repeating: "a", count: 65))"]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":[\#((0..<51).map { "\"t\($0)\"" }.joined(separator: ","))]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":[\#((0..<50).map { "\"t\($0)\"" }.joined(separator: ","))]}]}"#,
        // Attachments and chunk references.
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}],"baseAttachments":[],"chunkRefs":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[ {"name":"p.png","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"} , {"name":"q.png","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"} ]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},{"name":"p.png","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":null}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","baseAttachments":null}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","chunkRefs":null}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[null]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","chunkRefs":[null]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":3,"key":"k","mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":null,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":-1,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":3.0,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":2000000,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"a/b","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"..","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":3,"mediaType":"png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":3,"mediaType":"image/png","chunkSize":0,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","attachments":[{"name":"p.png","size":3,"mediaType":"image/png","chunkSize":1048576,"chunkSize":1,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","chunkRefs":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","chunkRefs":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}]}"#,
        #"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","chunkRefs":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]}]}"#,
    ]

    @Test func agreesWithJSONDecoderOnHostileBodies() throws {
        var bodies = Self.bodies.map { Data($0.utf8) }
        // Invalid UTF-8 inside a text, and a truncation of a valid body at every length.
        bodies.append(Data(#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":""#.utf8) + Data([0xC3, 0x28]) + Data(#""}]}"#.utf8))
        let valid = Data(#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"a\né","baseVersion":3,"baseText":"b"}]}"#.utf8)
        for length in 0...valid.count { bodies.append(valid.prefix(length)) }
        for body in bodies {
            let text = String(decoding: body, as: UTF8.self)
            let reference = Self.reference(body)
            if let fast = PushRequest.fastDecode(body) {
                #expect((try? reference.get()) == fast, "fast path accepted what JSONDecoder decodes otherwise: \(text)")
            }
            let answered = Result { () throws(APIErrorBody) in try PushRequest.decodeBody(body) }
            #expect(answered == reference, "\(text)")
        }
    }

    /// A set of tags that breaks the rules is refused `invalid_field`, naming the tag (or the set), with the rule,
    /// by both paths; the fast path gives up on it and never accepts it.
    @Test(arguments: [
        (#"["ok","two words"]"#, "tags[1]"), (#"["Work","work"]"#, "tags[1]"), (#"["café","cafe\u0301"]"#, "tags[1]"),
        (#"["/a"]"#, "tags[0]"), (#"["a."]"#, "tags[0]"), (#"[""]"#, "tags[0]"), (#"["x\u0000"]"#, "tags[0]"),
        (#"["\#(String(repeating: "é", count: 33))"]"#, "tags[0]"),
        (#"[\#((0...TagRules.maxTagsPerNote).map { "\"t\($0)\"" }.joined(separator: ","))]"#, "tags"),
    ])
    func invalidTagsAreRefusedNamingTheTag(_ tags: String, _ field: String) throws {
        for key in ["tags", "baseTags"] {
            let body = Data(#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x"},{"clientID":"1","origin":"11","editID":"6","text":"x","\#(key)":\#(tags)}]}"#.utf8)
            #expect(PushRequest.fastDecode(body) == nil)
            guard case .failure(let error) = Self.reference(body) else {
                Issue.record("JSONDecoder accepted \(key) \(tags)")
                continue
            }
            let expected = "changes[1]." + field.replacingOccurrences(of: "tags", with: key)
            #expect(error.code == .invalidField && error.field == expected, "\(error)")
            #expect(error.message.hasPrefix(expected + ": A "), "the message states the rule: \(error.message)")
            #expect(Result { () throws(APIErrorBody) in try PushRequest.decodeBody(body) } == .failure(error))
        }
    }

    /// Tags and flags are optional, each on its own: absent stays nil (the server leaves that part as it is).
    @Test func tagsAndFlagsAreOptionalEachOnItsOwn() throws {
        let absent = Data(#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x"}]}"#.utf8)
        let change = try #require(PushRequest.fastDecode(absent)?.changes.first)
        #expect(change.tags == nil && change.pinned == nil && change.archived == nil)
        #expect(change.baseTags == nil && change.basePinned == nil && change.baseArchived == nil)
        let some = Data(#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","tags":[],"archived":true,"baseTags":["Work"]}]}"#.utf8)
        let read = try #require(PushRequest.fastDecode(some)?.changes.first)
        #expect(read.tags == [] && read.pinned == nil && read.archived == true && read.baseTags == ["Work"] && read.basePinned == nil)
        #expect(try PushRequest.decodeBody(some).changes.first == read)
    }

    /// `editedAt` is optional; one that is not a protocol time is refused, naming the field, by both paths.
    @Test func editTimesAreOptionalAndAMalformedOneIsRefused() throws {
        let good = Data(#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","editedAt":"2026-11-22T10:15:30.123Z"}]}"#.utf8)
        #expect(try PushRequest.decodeBody(good).changes[0].editedAt == "2026-11-22T10:15:30.123Z")
        #expect(PushRequest.fastDecode(good)?.changes[0].editedAt == "2026-11-22T10:15:30.123Z")
        let absent = Data(#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x"}]}"#.utf8)
        #expect(try PushRequest.decodeBody(absent).changes[0].editedAt == nil)
        for bad in ["2026-11-22", "2026-02-30T10:15:30.123Z", "soon"] {
            let body = Data(#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x"},{"clientID":"1","origin":"11","editID":"6","text":"x","editedAt":"\#(bad)"}]}"#.utf8)
            #expect(PushRequest.fastDecode(body) == nil)
            #expect(throws: APIErrorBody.self) { try PushRequest.decodeBody(body) }
            guard case .failure(let error) = Self.reference(body) else {
                Issue.record("JSONDecoder accepted editedAt \(bad)")
                continue
            }
            #expect(error.code == .invalidJSON && error.field == "changes[1].editedAt", "\(error)")
        }
    }

    @Test func encodesWhatJSONEncoderWrites() throws {
        let statuses = ChangeStatus.allCases
        for seed in propertySeeds(300) {
            var rng = SplitMix64(seed: seed)
            let results = (0..<Int(rng.next() % 6)).map { _ in
                ChangeResult(
                    clientID: id(Int64(rng.next() >> 1) | 1), editID: id(Int64(1 + rng.next() % 1000)),
                    status: statuses[Int(rng.next() % UInt64(statuses.count))],
                    serverID: rng.next() % 2 == 0 ? id(Int64(rng.next() >> 2) | 1) : nil,
                    version: rng.next() % 2 == 0 ? Int64(rng.next() % 100) : nil,
                    text: rng.next() % 2 == 0 ? Self.randomText(&rng) : nil,
                    tags: rng.next() % 3 == 0 ? Self.randomTags(&rng) : nil, pinned: rng.next() % 4 == 0 ? rng.next() % 2 == 0 : nil,
                    archived: rng.next() % 4 == 0 ? rng.next() % 2 == 0 : nil,
                    attachments: rng.next() % 3 == 0 ? Self.randomAttachments(&rng) : nil,
                    conflict: rng.next() % 3 == 0 ? ConflictCopy(serverID: id(Int64(rng.next() >> 3) | 1), clientID: id(7)) : nil,
                    replayed: rng.next() % 2 == 0,
                    error: rng.next() % 4 == 0
                        ? APIErrorBody(code: .noteTooLarge, message: Self.randomText(&rng), field: rng.next() % 2 == 0 ? "changes[1].text" : nil)
                        : nil)
            }
            let response = PushResponse(results: results)
            let fast = response.encodedJSON()
            let reference = try WireJSON.encoder().encode(response)
            try expectSameJSON(fast, as: reference, "seed \(seed)")
            #expect(try JSONDecoder().decode(PushResponse.self, from: fast) == response, "seed \(seed)")
            // The client's hand-written decoder reads both without falling back, to the same value.
            for body in [fast, reference] {
                #expect(PushResponse.fast(body) == response, "seed \(seed): \(String(decoding: body, as: UTF8.self))")
            }
        }
    }
}

/// The client's side of the hot bodies: push changes and bodies written by hand, push and pull answers read by hand
/// with `JSONDecoder` behind.
@Suite("Client codecs")
struct ClientCodecTests {
    @Test func changesAreWrittenAsJSONEncoderWritesThem() throws {
        for seed in propertySeeds(300) {
            var rng = SplitMix64(seed: seed)
            for change in PushCodecTests.randomRequest(&rng).changes {
                let fast = change.encodedJSON()
                let reference = try WireJSON.encoder().encode(change)
                try expectSameJSON(fast, as: reference, "seed \(seed)")
                let back = try JSONDecoder().decode(NoteChange.self, from: fast)
                #expect(back == change && Array(back.text.utf8) == Array(change.text.utf8), "seed \(seed)")
            }
        }
    }

    @Test func pushBodiesAreWhatJSONEncoderWrites() throws {
        for seed in propertySeeds(100) {
            var rng = SplitMix64(seed: seed)
            let request = PushCodecTests.randomRequest(&rng)
            let body = PushRequest.body(encodedChanges: request.changes.map { $0.encodedJSON() })
            #expect(try JSONDecoder().decode(PushRequest.self, from: body) == request, "seed \(seed)")
            #expect(body.count == PushRequest.envelopeBytes + request.changes.map { $0.encodedJSON().count }.reduce(0, +) + max(0, request.changes.count - 1))
            #expect(body.count == (try WireJSON.encoder().encode(request)).count, "seed \(seed)")
        }
    }

    /// Answers valid and not: the fast path never accepts what JSONDecoder refuses and never decodes another
    /// value; what it gives up on (a newer server's extra field, say) `decode` still reads through JSONDecoder.
    static let pushBodies: [String] = [
        #"{"results":[]}"#, #" { "results" : [ ] } "#,
        #"{"results":[{"clientID":"1","editID":"5","status":"created","serverID":"9","version":1,"replayed":false}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"created","serverID":null,"version":null,"text":null,"conflict":null,"error":null}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"conflict","serverID":"9","version":3,"text":"a\u00e9\ud83d\ude00\/\n","conflict":{"serverID":"12","clientID":"13"},"replayed":true}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"rejected","error":{"code":"note_too_large","message":"big","field":"changes[0].text"},"replayed":false}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"rejected","error":{"code":"x","message":"m","field":null}}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"rejected","error":{"code":"x"}}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"exploded"}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"created","hint":"new in v2"}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"created"}],"serverTime":"now"}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"created","version":2,"version":3}]}"#,
        #"{"results":[{"clientID":1,"editID":"5","status":"created"}]}"#,
        #"{"results":[{"clientID":"0","editID":"5","status":"created"}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"created","version":1.5}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"created","text":"\ud83d"}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"created","conflict":{"serverID":"12"}}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","serverID":"9","version":4,"tags":["Work","a/b"],"pinned":true,"archived":false,"replayed":false}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","tags":null,"pinned":null,"archived":null}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","tags":[1]}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","tags":["\ud83d"]}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","pinned":"yes"}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","serverID":"9","version":4,"attachments":[{"name":"p.png","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}],"replayed":false}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","serverID":"9","version":4,"attachments":null,"replayed":false}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","serverID":"9","version":4,"attachments":[],"replayed":false}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","serverID":"9","version":4,"attachments":[{"name":"p.png","size":"3","mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}],"replayed":false}]}"#,
        #"{"results":[{"clientID":"1","editID":"5","status":"merged","serverID":"9","version":4,"attachments":[{"name":"p.png","size":3,"note":"x","mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}],"replayed":false}]}"#,
        #"{"results":[{"clientID":"1","status":"created"}]}"#, #"{"results":[{}]}"#, #"{"results":null}"#, #"{"results":[],}"#,
        #"{"results":[]} x"#, "", "null", "[]", "{}",
    ]
    static let pullBodies: [String] = [
        #"{"changes":[],"cursor":"c0","hasMore":false}"#, #" { "hasMore" : true , "cursor" : "c7" , "changes" : [ ] } "#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x\ny","deleted":false,"updatedAt":"2026-11-23T01:00:00.000Z"}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"","deleted":true,"conflictOf":"4","updatedAt":"t"}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"","deleted":true,"conflictOf":null,"updatedAt":"t"}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"","deleted":true,"updatedAt":"t","owner":"7"}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"deleted":true,"updatedAt":"t"}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"","deleted":"no","updatedAt":"t"}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[],"cursor":"3","hasMore":false}"#, #"{"changes":[],"cursor":"c03","hasMore":false}"#,
        #"{"changes":[],"cursor":"c1","hasMore":false,"hasMore":true}"#, #"{"changes":[],"cursor":"c1"}"#,
        #"{"changes":[],"cursor":"c1","hasMore":false,"next":"later"}"#, "", "{}",
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","tags":["Work","日本"],"pinned":true,"archived":false}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","tags":[],"pinned":false,"archived":true}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","tags":null,"pinned":null,"archived":null}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","tags":"Work"}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","tags":["a","b",]}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","pinned":1}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","attachments":[{"name":"p.png","size":3,"mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","attachments":null}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","attachments":[]}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","attachments":[{"name":"p.png","size":"3","mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}],"cursor":"c3","hasMore":false}"#,
        #"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":"x","deleted":false,"updatedAt":"t","attachments":[{"name":"p.png","size":3,"note":"x","mediaType":"image/png","chunkSize":1048576,"chunks":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}]}],"cursor":"c3","hasMore":false}"#,
    ]

    @Test func answersAgreeWithJSONDecoder() throws {
        func check<T: WireFastDecodable & Equatable>(_ type: T.Type, _ bodies: [String]) {
            var datas = bodies.map { Data($0.utf8) }
            // Every truncation of the longest body, and invalid UTF-8 inside a text.
            if let longest = bodies.max(by: { $0.utf8.count < $1.utf8.count }) {
                for length in 0..<longest.utf8.count { datas.append(Data(longest.utf8.prefix(length))) }
            }
            datas.append(Data(#"{"changes":[{"serverID":"9","clientID":"1","origin":"11","version":2,"text":""#.utf8) + Data([0xC3, 0x28]) + Data(#"","deleted":false,"updatedAt":"t"}],"cursor":"c3","hasMore":false}"#.utf8))
            for body in datas {
                let text = String(decoding: body, as: UTF8.self)
                let reference = try? JSONDecoder().decode(T.self, from: body)
                if let fast = T.fast(body) {
                    #expect(reference == fast, "fast path accepted what JSONDecoder decodes otherwise: \(text)")
                }
                #expect((try? T.decode(body)) == reference, "\(text)")
            }
        }
        check(PushResponse.self, Self.pushBodies)
        check(PullResponse.self, Self.pullBodies)
        // A newer server's extra field is read, through JSONDecoder.
        let newer = Data(Self.pushBodies[9].utf8)
        #expect(PushResponse.fast(newer) == nil)
        #expect(try PushResponse.decode(newer).results.first?.status == .created)
        // The common shapes are read by the fast path.
        #expect(PushResponse.fast(Data(Self.pushBodies[4].utf8))?.results.first?.text == "aé😀/\n")
        #expect(PullResponse.fast(Data(Self.pullBodies[1].utf8)) == PullResponse(changes: [], cursor: SyncCursor(sequence: 7), hasMore: true))
    }
}

extension WireFastDecodable {
    /// The fast path alone, on `Data`.
    static func fast(_ data: Data) -> Self? { data.withUnsafeBytes { fastDecode($0) } }
}

