import Foundation
import Testing

@testable import MiniFlake

@Suite("FlakeID: layout, parts, text forms")
struct FlakeIDTests {
    // MARK: Layout

    @Test("rawValue is ms << 22 | sequence << 10 | instance")
    func layoutFormula() throws {
        let id = try FlakeID(milliseconds: 275_453_898_485, sequence: 4095, instance: 1023)
        #expect(id.rawValue == 275_453_898_485 * 4_194_304 + 4095 * 1024 + 1023)
        #expect(id.milliseconds == 275_453_898_485)
        #expect(id.sequence == 4095)
        #expect(id.instance == 1023)
        #expect(id.unixMilliseconds == 275_453_898_485 + 1_519_862_400_000)
    }

    @Test("Random parts round-trip through the layout formula")
    func layoutProperty() throws {
        let seed = propertySeed()
        var random = SplitMix64(seed: seed)
        for _ in 0..<10_000 {
            let milliseconds = Int64.random(in: 0...FlakeID.maxMilliseconds, using: &random)
            let sequence = Int.random(in: 0...FlakeID.maxSequence, using: &random)
            let instance = Int.random(in: 1...FlakeID.maxInstance, using: &random)
            let id = try FlakeID(milliseconds: milliseconds, sequence: sequence, instance: instance)
            #expect(id.rawValue == (milliseconds << 22) | Int64(sequence << 10) | Int64(instance), replay(seed))
            #expect(id.rawValue > 0, replay(seed))
            #expect(id.milliseconds == milliseconds && id.sequence == sequence && id.instance == instance, replay(seed))
        }
    }

    @Test("The known epoch: ms 0 is 2018-03-01T00:00:00Z")
    func epoch() throws {
        let id = try FlakeID(milliseconds: 0, sequence: 0, instance: 1)
        #expect(id.rawValue == 1)
        #expect(id.date == Date(timeIntervalSince1970: 1_519_862_400))
        #expect(id.timestamp == "2018-03-01T00:00:00.000Z")
        #expect(FlakeID.epochUnixMilliseconds == 1_519_862_400_000)
    }

    @Test("The largest ID is Int64.max at 2087-11-05T15:47:35.551Z")
    func maximum() throws {
        let id = try FlakeID(
            milliseconds: FlakeID.maxMilliseconds, sequence: FlakeID.maxSequence, instance: FlakeID.maxInstance
        )
        #expect(id.rawValue == Int64.max)
        #expect(id.timestamp == "2087-11-05T15:47:35.551Z")
        #expect(id.base32 == "7ZZZZZZZZZZZZ")
        #expect(id.unixMilliseconds == 1_519_862_400_000 + (1 << 41) - 1)
        #expect(id.date == Date(timeIntervalSince1970: Double(id.unixMilliseconds) / 1000))
    }

    @Test("timestamp matches Foundation's ISO 8601 formatting for random IDs")
    func timestampProperty() throws {
        let seed = propertySeed()
        var random = SplitMix64(seed: seed)
        // Whole seconds from Foundation (a Double holds them exactly), milliseconds from the integer: Foundation's
        // fractional formatting truncates binary fractions (.714 prints as .713), which is why timestamp avoids it.
        let style = Date.ISO8601FormatStyle()
        for _ in 0..<2000 {
            let id = try FlakeID(validating: Int64.random(in: 1...Int64.max, using: &random))
            let seconds = style.format(Date(timeIntervalSince1970: Double(id.unixMilliseconds / 1000)))
            let fraction = String(id.unixMilliseconds % 1000 + 1000).dropFirst()
            let expected = "\(seconds.dropLast()).\(fraction)Z"
            #expect(id.timestamp == expected, replay(seed))
            #expect(id.timestamp.count == 24, replay(seed))
        }
        // Month, leap-day and year boundaries.
        for (unixMilliseconds, text) in [
            (Int64(1_582_934_400_000), "2020-02-29T00:00:00.000Z"),
            (1_583_020_799_999, "2020-02-29T23:59:59.999Z"),
            (1_609_459_199_999, "2020-12-31T23:59:59.999Z"),
            (4_102_444_800_000, "2100-01-01T00:00:00.000Z"),
        ] where unixMilliseconds - FlakeID.epochUnixMilliseconds <= FlakeID.maxMilliseconds {
            let id = try FlakeID(milliseconds: unixMilliseconds - FlakeID.epochUnixMilliseconds, sequence: 0, instance: 1)
            #expect(id.timestamp == text)
        }
    }

    // MARK: Parts validation

    @Test(
        "Out-of-range parts are rejected",
        arguments: [
            (Int64(-1), 0, 1, FlakeError.millisecondsOutOfRange(-1)),
            (FlakeID.maxMilliseconds + 1, 0, 1, .millisecondsOutOfRange(FlakeID.maxMilliseconds + 1)),
            (0, -1, 1, .sequenceOutOfRange(-1)),
            (0, 4096, 1, .sequenceOutOfRange(4096)),
            (0, 0, -1, .instanceOutOfRange(-1)),
            (0, 0, 1024, .instanceOutOfRange(1024)),
            (0, 0, 0, .zero),
        ]
    )
    func partsValidation(milliseconds: Int64, sequence: Int, instance: Int, error: FlakeError) {
        #expect(throws: error) { try FlakeID(milliseconds: milliseconds, sequence: sequence, instance: instance) }
    }

    @Test("init(validating:) accepts positive values only")
    func validating() throws {
        #expect(throws: FlakeError.zero) { try FlakeID(validating: 0) }
        #expect(throws: FlakeError.negative(-5)) { try FlakeID(validating: -5) }
        #expect(throws: FlakeError.negative(.min)) { try FlakeID(validating: .min) }
        #expect(try FlakeID(validating: 1).rawValue == 1)
        #expect(try FlakeID(validating: .max).rawValue == .max)
    }

    // MARK: Text

    @Test("Decimal, base32 and Codable round-trip for random IDs")
    func roundTripProperty() throws {
        let seed = propertySeed()
        var random = SplitMix64(seed: seed)
        let encoder = JSONEncoder()
        let decoder = JSONDecoder()
        for index in 0..<10_000 {
            // Half uniform over all positive values, half small (few digits, leading base32 zeros).
            let raw = index.isMultiple(of: 2)
                ? Int64.random(in: 1...Int64.max, using: &random)
                : Int64.random(in: 1...(1 << Int64.random(in: 1...62, using: &random)), using: &random)
            let id = try FlakeID(validating: raw)
            #expect(FlakeID(id.description) == id, replay(seed))
            #expect(try FlakeID(parsing: id.base32) == id, replay(seed))
            #expect(try FlakeID(parsing: id.base32.lowercased()) == id, replay(seed))
            #expect(id.base32.count == 13, replay(seed))
            if id.description.count != 13 {
                #expect(try FlakeID(parsing: id.description) == id, replay(seed))
            }
            let json = try encoder.encode([id])
            #expect(String(decoding: json, as: UTF8.self) == "[\"\(raw)\"]", replay(seed))
            #expect(try decoder.decode([FlakeID].self, from: json) == [id], replay(seed))
        }
    }

    @Test("Base32 lexical order is numeric order")
    func base32Order() throws {
        let seed = propertySeed()
        var random = SplitMix64(seed: seed)
        var ids: [FlakeID] = []
        for _ in 0..<5000 {
            let bits = Int64.random(in: 1...63, using: &random)
            let upper: Int64 = bits == 63 ? .max : (1 << bits)
            ids.append(try FlakeID(validating: Int64.random(in: 1...upper, using: &random)))
        }
        #expect(ids.sorted().map(\.base32) == ids.map(\.base32).sorted(), replay(seed))
        for (a, b) in zip(ids, ids.dropFirst()) {
            #expect((a < b) == (a.base32 < b.base32), replay(seed))
        }
    }

    @Test("Base32 known values, case-insensitivity and Crockford aliases")
    func base32Aliases() throws {
        #expect(try FlakeID(validating: 1).base32 == "0000000000001")
        #expect(try FlakeID(validating: 32).base32 == "0000000000010")
        #expect(try FlakeID(parsing: "000000000000Z").rawValue == 31)
        #expect(try FlakeID(parsing: "000000000000z").rawValue == 31)
        #expect(try FlakeID(parsing: "7zzzzzzzzzzzz").rawValue == .max)
        #expect(try FlakeID(parsing: "000000000000I").rawValue == 1)
        #expect(try FlakeID(parsing: "000000000000i").rawValue == 1)
        #expect(try FlakeID(parsing: "000000000000L").rawValue == 1)
        #expect(try FlakeID(parsing: "000000000000l").rawValue == 1)
        #expect(try FlakeID(parsing: "OOOOOOOOOOOO1").rawValue == 1)
        #expect(try FlakeID(parsing: "ooooooooooo10").rawValue == 32)
        // Every alphabet character decodes to its position.
        for (value, character) in "0123456789ABCDEFGHJKMNPQRSTVWXYZ".enumerated() {
            #expect(try FlakeID(parsing: "000000000001\(character)").rawValue == Int64(32 + value))
        }
    }

    @Test("A 13-digit decimal is read as base32")
    func thirteenDigitsAreBase32() throws {
        #expect(try FlakeID(parsing: "0000000000010").rawValue == 32)
        #expect(try FlakeID(parsing: "1000000000000").rawValue == 1 << 60)
        #expect(try FlakeID(parsing: "0000000000ABC").rawValue == 10 * 1024 + 11 * 32 + 12)
        // Every ID made after 2018-03-01T00:40Z has at least 14 digits.
        let fortyMinutes = try FlakeID(milliseconds: 40 * 60_000, sequence: 0, instance: 0)
        #expect(fortyMinutes.description.count == 14)
        #expect(fortyMinutes.rawValue >= 10_000_000_000_000)
        #expect(FlakeID("1000000000000")?.rawValue == 1_000_000_000_000)  // LosslessStringConvertible: decimal only
    }

    @Test(
        "Malformed input is rejected with the right error",
        arguments: [
            ("", FlakeError.empty),
            ("   \n", .empty),
            ("abc", .malformed("abc")),
            ("-5", .negative(-5)),
            ("-0", .zero),
            ("0", .zero),
            ("000", .zero),
            ("+5", .malformed("+5")),
            ("-", .malformed("-")),
            ("--5", .malformed("--5")),
            ("1 2", .malformed("1 2")),
            ("12.5", .malformed("12.5")),
            ("99999999999999999999", .overflow("99999999999999999999")),
            ("9223372036854775808", .overflow("9223372036854775808")),
            ("-9223372036854775808", .negative(.min)),
            ("-9223372036854775809", .overflow("-9223372036854775809")),
            ("99999999999999999999x", .malformed("99999999999999999999x")),
            ("000000000ABC", .malformed("000000000ABC")),  // 12 characters
            ("00000000000ABC", .malformed("00000000000ABC")),  // 14 characters
            ("0000-0000-ABC", .malformed("0000-0000-ABC")),  // hyphens are not accepted
            ("000000000000U", .malformed("000000000000U")),  // U is not in the alphabet
            ("8000000000000", .overflow("8000000000000")),  // bit 63 set
            ("ZZZZZZZZZZZZZ", .overflow("ZZZZZZZZZZZZZ")),
            ("0000000000000", .zero),
            ("٣", .malformed("٣")),  // non-ASCII digit
        ]
    )
    func malformed(text: String, error: FlakeError) throws {
        #expect(throws: error) { try FlakeID(parsing: text) }
        if text.utf8.count != 13 {  // 13 digits are base32 for init(parsing:), decimal for init?(_:)
            #expect(FlakeID(text) == nil)
        }
    }

    @Test("Parsing trims surrounding whitespace; LosslessStringConvertible does not")
    func whitespace() throws {
        #expect(try FlakeID(parsing: "  123\n").rawValue == 123)
        #expect(try FlakeID(parsing: "\t7ZZZZZZZZZZZZ ").rawValue == .max)
        #expect(FlakeID(" 123") == nil)
        #expect(FlakeID("123") == FlakeID(rawValue: 123))
        #expect(FlakeID("7ZZZZZZZZZZZZ") == nil)
    }

    @Test("Error payloads are cut to 40 characters")
    func truncation() {
        let long = String(repeating: "x", count: 100)
        #expect(throws: FlakeError.malformed(String(repeating: "x", count: 39) + "…")) { try FlakeID(parsing: long) }
        let digits = String(repeating: "9", count: 60)
        #expect(throws: FlakeError.overflow(String(repeating: "9", count: 39) + "…")) { try FlakeID(parsing: digits) }
    }

    @Test("Every error has a stable snake_case code and a sentence")
    func errorCodes() {
        let cases: [(FlakeError, String)] = [
            (.empty, "empty"), (.malformed("x"), "malformed"), (.zero, "zero"), (.negative(-1), "negative"),
            (.overflow("9"), "overflow"), (.imprecise(1 << 60), "imprecise"),
            (.millisecondsOutOfRange(-1), "milliseconds_out_of_range"), (.sequenceOutOfRange(-1), "sequence_out_of_range"),
            (.instanceOutOfRange(1024), "instance_out_of_range"), (.timeRangeExhausted, "time_range_exhausted"),
            (.instancesExhausted, "instances_exhausted"),
        ]
        for (error, code) in cases {
            #expect(error.code == code)
            #expect(error.description.hasSuffix("."))
            #expect(!error.description.contains("\n"))
        }
        #expect(FlakeError.instanceOutOfRange(1024).description.contains("1024"))
    }

    // MARK: Codable

    @Test("JSON integers are accepted up to 2^53 and rejected above")
    func jsonIntegers() throws {
        let decoder = JSONDecoder()
        #expect(try decoder.decode([FlakeID].self, from: Data("[123]".utf8)) == [FlakeID(rawValue: 123)])
        #expect(try decoder.decode([FlakeID].self, from: Data("[9007199254740992]".utf8)).first?.rawValue == 1 << 53)
        for (json, error) in [
            ("[9007199254740993]", FlakeError.imprecise(9_007_199_254_740_993)),
            ("[9223372036854775807]", .imprecise(.max)),
            ("[0]", .zero),
            ("[-5]", .negative(-5)),
            ("[\"abc\"]", .malformed("abc")),
            ("[\"\"]", .empty),
            ("[\" 123\"]", .malformed(" 123")),  // strict on the wire
            ("[\"0000000000001\"]", .malformed("0000000000001")),  // canonical decimal only on the wire: no leading zero
            ("[\"7ZZZZZZZZZZZZ\"]", .malformed("7ZZZZZZZZZZZZ")),  // no base32 on the wire
            ("[\"+5\"]", .malformed("+5")),
            ("[1.5]", .malformed("1.5")),
            ("[1e20]", .overflow(String(1e20))),
        ] as [(String, FlakeError?)] {
            guard let error else {
                #expect(try decoder.decode([FlakeID].self, from: Data(json.utf8)) == [FlakeID(rawValue: 1)])
                continue
            }
            do {
                _ = try decoder.decode([FlakeID].self, from: Data(json.utf8))
                Issue.record("\(json) decoded")
            } catch DecodingError.dataCorrupted(let context) {
                #expect(context.debugDescription.contains(error.description), "\(json)")
                #expect(context.underlyingError as? FlakeError == error, "\(json)")
                #expect(context.codingPath.count == 1, "\(json)")
            } catch {
                Issue.record("\(json): unexpected \(error)")
            }
        }
    }

    @Test("Wrong JSON types are typeMismatch or valueNotFound")
    func jsonTypes() throws {
        let decoder = JSONDecoder()
        #expect { try decoder.decode([FlakeID].self, from: Data("[true]".utf8)) } throws: { error in
            guard case DecodingError.typeMismatch = error else { return false }
            return true
        }
        #expect { try decoder.decode([FlakeID].self, from: Data("[null]".utf8)) } throws: { error in
            guard case DecodingError.valueNotFound = error else { return false }
            return true
        }
        #expect(try decoder.decode([FlakeID?].self, from: Data("[null]".utf8)) == [nil])
    }
}

extension FlakeID {
    /// Test shorthand; the value must be positive.
    init(rawValue: Int64) {
        self.init(uncheckedRawValue: rawValue)
    }
}
