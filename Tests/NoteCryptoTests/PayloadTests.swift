import Foundation
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
}
