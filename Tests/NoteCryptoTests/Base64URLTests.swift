import MiniFlake
import Testing

@testable import NoteCrypto

@Suite struct Base64URLTests {
    @Test("Encoding matches libsodium's for every length up to 300 bytes, and reads back")
    func encodingMatchesLibsodium() {
        var rng = SplitMix64(seed: 0xBA5E64)
        for length in 0...300 {
            let bytes = randomBytes(length, using: &rng)
            let text = Base64URL.encode(bytes)
            #expect(text == CryptoOracle.referenceEncode(bytes), "length \(length)")
            #expect(text.utf8.count == Base64URL.encodedCount(length))
            #expect(Base64URL.decode(text, maximumCount: length) == bytes, "length \(length)")
            #expect(Base64URL.decode(text, maximumCount: length - 1) == nil || length == 0, "length \(length): the maximum")
        }
    }

    @Test("Decoding accepts and refuses exactly what libsodium's strict decoder does (seeded)")
    func decodingMatchesLibsodium() {
        let characters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let strays = Array("=+/ \n.é\u{0}")
        for seed in propertySeeds(2000) {
            var rng = SplitMix64(seed: seed)
            let length = Int(rng.next() % 24)
            var text = String((0..<length).map { _ in characters[Int(rng.next() % 64)] })
            if rng.chance(0.2), !text.isEmpty {
                var array = Array(text)
                array[Int(rng.next() % UInt64(array.count))] = strays[Int(rng.next() % UInt64(strays.count))]
                text = String(array)
            }
            #expect(Base64URL.decode(text, maximumCount: 100) == CryptoOracle.referenceDecode(text), "\(text); \(replay(seed))")
        }
        // Every spelling of the last character of 2- and 3-character texts: only those with zero spare bits are read.
        for character in characters {
            for text in ["Q" + String(character), "QU" + String(character)] {
                #expect(Base64URL.decode(text, maximumCount: 10) == CryptoOracle.referenceDecode(text), "\(text)")
            }
        }
    }

    @Test("Bytes beyond ASCII are refused (libsodium 1.0.18's decoder reads each of them as '_')")
    func nonASCII() {
        // U+0080...U+00FF: two UTF-8 bytes each, both 0x80 or above; with "AA" the text has a valid length.
        for scalar in UInt32(0x80)...UInt32(0xFF) {
            let text = String(Character(Unicode.Scalar(scalar)!)) + "AA"
            #expect(Base64URL.decode(text, maximumCount: 10) == nil, "U+\(String(scalar, radix: 16))")
        }
        #expect(Base64URL.decode("_AAA", maximumCount: 10) == [0xFC, 0x00, 0x00])
        #expect(Base64URL.decode("éq9", maximumCount: 10) == nil)
        #expect(CryptoOracle.referenceDecode("éq9") == nil)
    }
}
