import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing

@Suite struct StrictDecodingTests {
    func decodePush(_ json: String) throws(APIErrorBody) -> PushRequest {
        try WireJSON.decodeRequest(PushRequest.self, from: Data(json.utf8))
    }

    static let change = #"{"clientID":"8230135127431905281","origin":"5044031582654955520","editID":"8230135127431906305","text":"hi"}"#

    @Test func acceptsAWellFormedChange() throws {
        let request = try decodePush(#"{"changes":[\#(Self.change)]}"#)
        #expect(request.changes.count == 1)
        #expect(request.changes[0].deleted == false)
        #expect(request.changes[0].clientID.rawValue == 8_230_135_127_431_905_281)
    }

    @Test func refusesAnUnknownTopLevelField() {
        #expect { try decodePush(#"{"changes":[],"force":true}"#) } throws: { error in
            (error as? APIErrorBody)?.code == .unknownField && (error as? APIErrorBody)?.field == "force"
        }
    }

    @Test func refusesAnUnknownFieldInAChangeAndNamesIt() {
        let body = #"{"changes":[\#(Self.change),{"clientID":"1","origin":"1","editID":"2","text":"","delted":true}]}"#
        #expect { try decodePush(body) } throws: { error in
            let body = error as? APIErrorBody
            return body?.code == .unknownField && body?.field == "changes[1].delted"
        }
    }

    @Test(arguments: [
        #""clientID":"0""#, #""clientID":"-4""#, #""clientID":"abc""#, #""clientID":"99999999999999999999""#,
        #""clientID":9007199254740993"#, #""clientID":0"#, #""clientID":-1"#, #""clientID":1.5"#,
    ])
    func refusesInvalidIDs(_ clientID: String) {
        let body = #"{"changes":[{\#(clientID),"origin":"1","editID":"2","text":""}]}"#
        #expect { try decodePush(body) } throws: { error in
            (error as? APIErrorBody)?.code == .invalidID
        }
    }

    @Test func smallJSONIntegerIDsAreExact() throws {
        // Exactly representable integers are accepted (the MiniFlake codec's rule); strings are what clients send.
        let request = try decodePush(#"{"changes":[{"clientID":12,"origin":"1","editID":"2","text":""}]}"#)
        #expect(request.changes[0].clientID.rawValue == 12)
    }

    @Test(arguments: ["", "{", "[]", "null", #"{"changes":{}}"#, #"{"changes":[{"clientID":"1"}]}"#, #"{"changes":[{"clientID":"1","origin":"1","editID":"2","text":5}]}"#])
    func refusesMalformedJSON(_ body: String) {
        #expect { try decodePush(body) } throws: { error in (error as? APIErrorBody)?.code == .invalidJSON }
    }

    @Test func namesTheMissingField() {
        #expect { try decodePush(#"{"changes":[{"clientID":"1","origin":"1","text":""}]}"#) } throws: { error in
            (error as? APIErrorBody)?.field == "changes[0].editID"
        }
    }

    @Test func responsesAreLenient() throws {
        // A newer server may add fields; an older client must still read the answer.
        let json = #"{"results":[{"clientID":"1","editID":"2","status":"created","serverID":"3","version":1,"replayed":false,"shard":7}],"extra":1}"#
        let response = try JSONDecoder().decode(PushResponse.self, from: Data(json.utf8))
        #expect(response.results[0].status == .created)
    }

    @Test func changeRoundTrips() throws {
        let change = NoteChange(
            clientID: try FlakeID(validating: 42), origin: try FlakeID(validating: 7), serverID: try FlakeID(validating: 9),
            editID: try FlakeID(validating: 43), text: "a\nb", deleted: true, baseVersion: 3, baseText: "a")
        let data = try WireJSON.encoder().encode(PushRequest(changes: [change]))
        #expect(try WireJSON.decodeRequest(PushRequest.self, from: data) == PushRequest(changes: [change]))
        #expect(String(decoding: data, as: UTF8.self).contains(#""serverID":"9""#))
    }
}

@Suite struct CursorAndTimeTests {
    @Test func cursorRoundTrips() throws {
        for value: Int64 in [0, 1, 42, Int64.max] {
            let cursor = SyncCursor(sequence: value)
            #expect(SyncCursor(text: cursor.text) == cursor)
        }
        for bad in ["", "c", "42", "c-1", "c01", "c 1", "d1", "c99999999999999999999"] {
            #expect(SyncCursor(text: bad) == nil, "\(bad)")
        }
        #expect(SyncCursor(sequence: 3) < SyncCursor(sequence: 4))
    }

    @Test func wireTimeFormatsKnownInstants() {
        #expect(WireTime.format(unixMilliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(WireTime.format(unixMilliseconds: 1_519_862_400_000) == "2018-03-01T00:00:00.000Z")
        #expect(WireTime.format(unixMilliseconds: 951_782_400_123) == "2000-02-29T00:00:00.123Z")
        #expect(WireTime.format(unixMilliseconds: 1_519_862_400_000 + (1 << 41) - 1) == "2087-11-05T15:47:35.551Z")
        // Past the four-digit years the fast path writes.
        #expect(WireTime.format(unixMilliseconds: 253_402_300_799_999) == "9999-12-31T23:59:59.999Z")
        #expect(WireTime.format(unixMilliseconds: 253_402_300_800_000) == "10000-01-01T00:00:00.000Z")
        #expect(WireTime.format(unixMilliseconds: -62_167_219_200_000) == "0000-01-01T00:00:00.000Z")
    }

    @Test func wireTimeMatchesFoundationAndRoundTrips() {
        var seed: UInt64 = UInt64(Date().timeIntervalSince1970 * 1000)
        let start = seed
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        for _ in 0..<2000 {
            seed &+= 0x9E37_79B9_7F4A_7C15
            var z = seed
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            let ms = Int64((z ^ (z >> 31)) % 4_102_444_800_000)  // 1970 ... 2100
            let text = WireTime.format(unixMilliseconds: ms)
            #expect(WireTime.parse(text) == ms, "seed \(start): \(ms)")
            #expect(formatter.string(from: Date(timeIntervalSince1970: Double(ms) / 1000)) == text, "seed \(start): \(ms)")
        }
        #expect(WireTime.parse("2026-13-01T00:00:00.000Z") == nil)
        #expect(WireTime.parse("2026-02-30T00:00:00.000Z") == nil)
        #expect(WireTime.parse("2026-01-01 00:00:00.000Z") == nil)
    }
}

@Suite struct ProtocolTableTests {
    @Test func endpointsAreUniqueAndFindable() {
        let keys = Endpoint.allCases.map { "\($0.method.rawValue) \($0.path)" }
        #expect(Set(keys).count == keys.count)
        for endpoint in Endpoint.allCases {
            #expect(Endpoint.matching(method: endpoint.method.rawValue, path: endpoint.path) == endpoint)
            #expect(endpoint.path == "/healthz" || endpoint.path.hasPrefix("/v1/"))
        }
        #expect(Endpoint.matching(method: "PUT", path: "/v1/notes/push") == nil)
    }

    @Test func errorCodesAreUniqueAndClientErrorsAreNever5xx() {
        let raw = APIErrorCode.allKnown.map(\.rawValue)
        #expect(Set(raw).count == raw.count)
        for code in APIErrorCode.allKnown where code != .internalError && code != .unavailable {
            #expect((400..<500).contains(code.httpStatus), "\(code)")
        }
    }

    @Test func credentialRules() {
        #expect(CredentialRules.canonicalUsername("Alice") == "alice")
        #expect(CredentialRules.canonicalUsername("al") == nil)
        #expect(CredentialRules.canonicalUsername("al ice") == nil)
        #expect(CredentialRules.canonicalUsername("élise") == nil)
        #expect(CredentialRules.canonicalUsername(String(repeating: "a", count: 65)) == nil)
        #expect(CredentialRules.isAcceptablePassword("12345678"))
        #expect(!CredentialRules.isAcceptablePassword("1234567"))
        #expect(!CredentialRules.isAcceptablePassword(String(repeating: "é", count: 37)))  // 74 bytes
    }
}
