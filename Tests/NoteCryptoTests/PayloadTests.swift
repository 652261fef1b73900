import Foundation
import NoteSyncProtocol
import Testing

@testable import NoteCrypto

@Suite struct PayloadTests {
    @Test("A payload encodes to its canonical JSON, which Foundation reads as the same note")
    func canonicalForm() throws {
        let payload = NotePayload(text: "Buy \"milk\"\n\t\u{1}\\ 日本 /", tags: ["a/b", "work"], pinned: true, seq: 3)
        let text = String(decoding: payload.bytes, as: UTF8.self)
        #expect(text == #"{"archived":false,"pinned":true,"seq":3,"tags":["a/b","work"],"text":"Buy \"milk\"\n\t\u0001\\ 日本 /"}"#)
        let foundation = try #require(try JSONSerialization.jsonObject(with: Data(payload.bytes)) as? [String: Any])
        #expect(foundation["text"] as? String == payload.text && foundation["tags"] as? [String] == payload.tags)
        #expect(foundation["seq"] as? Int == 3 && foundation["pinned"] as? Bool == true && foundation["archived"] as? Bool == false)
        #expect(try NotePayload(decoding: payload.bytes) == payload)
    }

    @Test("Every control character and seq bound round-trips", arguments: [UInt64(1), 2, 1 << 32, NotePayload.maximumSeq])
    func roundTrip(seq: UInt64) throws {
        let controls = String(decoding: (0..<0x20).map { UInt8($0) } + [0x7F], as: UTF8.self)
        let payload = NotePayload(text: controls + "end", tags: [controls, ""], pinned: false, archived: true, seq: seq)
        #expect(try NotePayload(decoding: payload.bytes) == payload)
    }

    @Test(
        "Anything but the canonical encoding is refused",
        arguments: [
            #"{"archived":false,"pinned":false,"seq":0,"tags":[],"text":""}"#,
            #"{"archived":false,"pinned":false,"seq":01,"tags":[],"text":""}"#,
            #"{"archived":false,"pinned":false,"seq":9007199254740993,"tags":[],"text":""}"#,
            #"{"archived":false,"pinned":false,"seq":1.0,"tags":[],"text":""}"#,
            #"{"archived":false,"pinned":false,"seq":-1,"tags":[],"text":""}"#,
            #"{"pinned":false,"archived":false,"seq":1,"tags":[],"text":""}"#,
            #"{"archived":false, "pinned":false,"seq":1,"tags":[],"text":""}"#,
            #"{"archived":false,"pinned":false,"seq":1,"tags":[],"text":"","extra":1}"#,
            #"{"archived":false,"pinned":false,"seq":1,"tags":[],"text":"\/"}"#,
            #"{"archived":false,"pinned":false,"seq":1,"tags":[],"text":"\u000a"}"#,
            #"{"archived":false,"pinned":false,"seq":1,"tags":[],"text":"\u0041"}"#,
            #"{"archived":false,"pinned":false,"seq":1,"tags":[],"text":"\u001F"}"#,
            #"{"archived":false,"pinned":false,"seq":1,"tags":["a",],"text":""}"#,
            #"{"archived":false,"pinned":false,"seq":1,"tags":[],"text":""} "#,
            #"{"archived":null,"pinned":false,"seq":1,"tags":[],"text":""}"#,
            #"{"archived":false,"pinned":false,"seq":1,"tags":[],"text":"unterminated}"#,
            "",
        ])
    func refusesNonCanonical(_ text: String) {
        #expect(throws: NoteCryptoError.self) { try NotePayload(decoding: Array(text.utf8)) }
    }

    @Test("Raw control characters, invalid UTF-8 and oversized payloads are refused")
    func refusesHostileBytes() {
        let prefix = Array(#"{"archived":false,"pinned":false,"seq":1,"tags":[],"text":""#.utf8)
        let suffix = Array(#""}"#.utf8)
        for body: [UInt8] in [[0x0A], [0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80]] {
            #expect(throws: NoteCryptoError.self) { try NotePayload(decoding: prefix + body + suffix) }
        }
        let big = NotePayload(text: String(repeating: "x", count: 100), seq: 1).bytes
        #expect(throws: NoteCryptoError.malformed(.notePayload, .tooLong(length: big.count, maximum: 50))) {
            try NotePayload(decoding: big, maximumByteCount: 50)
        }
    }

    @Test("A payload seals and opens inside an envelope")
    func sealsInAnEnvelope() throws {
        let ring = AccountKeyRing(Fixture.key())
        let payload = NotePayload(text: "secret", tags: ["t"], seq: 1)
        let envelope = try NoteEnvelope.seal(plaintext: payload.bytes, context: Fixture.context, key: ring.current)
        let opened = try NoteEnvelope.open(envelope, expecting: Fixture.context, keys: ring)
        #expect(try NotePayload(decoding: opened.plaintext) == payload)
    }

    // MARK: - Attachments (issue 33)

    static let hashA = ContentHash(String(repeating: "a", count: 64))!
    static let hashB = ContentHash(String(repeating: "0", count: 63) + "1")!
    static let keyText = String(repeating: "5e", count: 32)

    /// A sealed attachment (with its key) and a plaintext one (without), the second empty.
    static let attachments = [
        AttachmentManifest(
            name: "photo \"1\".png", size: 1_048_577, mediaType: "image/png", chunkSize: 1 << 20, chunks: [hashA, hashB], sha256: hashB,
            key: keyText),
        AttachmentManifest(name: "empty", size: 0, mediaType: "application/octet-stream", chunks: [], sha256: hashA),
    ]

    @Test("Attachments encode between archived and pinned, each manifest's keys sorted, and read back")
    func attachmentsCanonicalForm() throws {
        let payload = NotePayload(text: "t", tags: ["x"], attachments: Self.attachments, seq: 2)
        let text = String(decoding: payload.bytes, as: UTF8.self)
        let a = String(repeating: "a", count: 64), one = String(repeating: "0", count: 63) + "1"
        let expected =
            #"{"archived":false,"attachments":[{"chunkSize":1048576,"chunks":[""# + a + #"",""# + one + #""],"key":""# + Self.keyText
            + #"","mediaType":"image/png","name":"photo \"1\".png","sha256":""# + one + #"","size":1048577},"#
            + #"{"chunkSize":1048576,"chunks":[],"mediaType":"application/octet-stream","name":"empty","sha256":""# + a
            + #"","size":0}],"pinned":false,"seq":2,"tags":["x"],"text":"t"}"#
        #expect(text == expected)
        #expect(try NotePayload(decoding: payload.bytes) == payload)
        // What Foundation reads is the wire module's manifest, key and all.
        let object = try #require(try JSONSerialization.jsonObject(with: Data(payload.bytes)) as? [String: Any])
        let manifests = try JSONSerialization.data(withJSONObject: try #require(object["attachments"]))
        #expect(try JSONDecoder().decode([AttachmentManifest].self, from: manifests) == Self.attachments)
    }

    @Test("Without attachments a payload is byte for byte what it was before they existed")
    func noAttachmentsUnchanged() throws {
        let payload = NotePayload(text: "Buy milk\n", tags: ["a/b", "work"], pinned: true, attachments: [], seq: 3)
        #expect(payload.bytes == Array(#"{"archived":false,"pinned":true,"seq":3,"tags":["a/b","work"],"text":"Buy milk\n"}"#.utf8))
        #expect(try NotePayload(decoding: payload.bytes).attachments == [])
    }

    /// One manifest inside a payload, `H` standing for a valid hash and `h` for an uppercase one.
    static func payloadText(_ manifest: String) -> String {
        (#"{"archived":false,"attachments":["# + manifest + #"],"pinned":false,"seq":1,"tags":[],"text":""}"#)
            .replacingOccurrences(of: #""H""#, with: "\"" + String(repeating: "a", count: 64) + "\"")
            .replacingOccurrences(of: #""h""#, with: "\"" + String(repeating: "A", count: 64) + "\"")
    }

    @Test(
        "Anything but the canonical encoding of attachments is refused",
        arguments: [
            #"{"chunks":[],"chunkSize":1,"mediaType":"a/b","name":"n","sha256":"H","size":0}"#,
            #"{"chunkSize":01,"chunks":[],"mediaType":"a/b","name":"n","sha256":"H","size":0}"#,
            #"{"chunkSize":1,"chunks":[],"mediaType":"a/b","name":"n","sha256":"H","size":-1}"#,
            #"{"chunkSize":1,"chunks":[],"mediaType":"a/b","name":"n","sha256":"H","size":00}"#,
            #"{"chunkSize":1,"chunks":[],"mediaType":"a/b","name":"n","sha256":"H","size":9007199254740993}"#,
            #"{"chunkSize":1,"chunks":[],"key":null,"mediaType":"a/b","name":"n","sha256":"H","size":0}"#,
            #"{"chunkSize":1,"chunks":[],"mediaType":"a/b","name":"n","sha256":"h","size":0}"#,
            #"{"chunkSize":1,"chunks":["h"],"mediaType":"a/b","name":"n","sha256":"H","size":0}"#,
            #"{"chunkSize":1,"chunks":[],"mediaType":"a/b","name":"n","sha256":"H","size":0,"x":1}"#,
            #"{"chunkSize":1,"chunks":[],"mediaType":"a/b","name":"n","sha256":"H","size":0},"#,
            #"{"chunkSize":1,"chunks":[],"mediaType":"a/b","name":"n","sha256":"H","size":0.0}"#,
        ])
    func refusesNonCanonicalAttachments(_ manifest: String) throws {
        #expect(throws: NoteCryptoError.self) { try NotePayload(decoding: Array(Self.payloadText(manifest).utf8)) }
    }

    @Test("The canonical manifest those refusals depart from is read, and an empty list of attachments is not canonical")
    func readsTheCanonicalManifest() throws {
        let canonical = Self.payloadText(#"{"chunkSize":1,"chunks":[],"mediaType":"a/b","name":"n","sha256":"H","size":0}"#)
        #expect(try NotePayload(decoding: Array(canonical.utf8)).attachments.count == 1)
        #expect(throws: NoteCryptoError.self) {
            try NotePayload(decoding: Array(#"{"archived":false,"attachments":[],"pinned":false,"seq":1,"tags":[],"text":""}"#.utf8))
        }
    }

    @Test("A payload with a sealed attachment's key seals and opens inside an envelope")
    func attachmentsSealInAnEnvelope() throws {
        let ring = AccountKeyRing(Fixture.key())
        let payload = NotePayload(text: "secret", attachments: Self.attachments, seq: 1)
        let envelope = try NoteEnvelope.seal(plaintext: payload.bytes, context: Fixture.context, key: ring.current)
        #expect(try NotePayload(decoding: NoteEnvelope.open(envelope, expecting: Fixture.context, keys: ring).plaintext) == payload)
    }
}
