import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import MiniFlake
import NoteSyncProtocol
import Synchronization
import Testing
import TestSupport

@testable import NoteSyncServer

/// Issue 15's hostile client, item by item, and the classes the items belong to: every request field with every
/// wrong type, null and absent; every ID form; every limit at, below and one past its boundary; every route with
/// every method; other accounts' tokens. Each item's test failed on the code before the fix (named in its comment).
@Suite("Hardening: a hostile client finds nothing")
struct HardeningTests {
    static let sampleChange = #"{"clientID":"12","origin":"7","editID":"9","text":"x"}"#

    /// A push body with one change whose JSON is `change`.
    static func pushBody(_ change: String) -> String { #"{"changes":["# + change + "]}" }

    // MARK: - Item 1: NUL in passwords (and other strings a C API sees)

    /// Failed before: sign-up took "password\0AAAA", and bcrypt verified "password\0BBBB" and "password" against it.
    @Test func nulInAPasswordIsRefusedAtSignUpAndSignIn() async throws {
        let server = try TestServer.make()
        let api = server.client
        for password in ["password\u{0}AAAA", "\u{0}password", "password\u{0}"] {
            let signUp = try await api.call(.signUp, json: SignUpRequest(username: "mallory", password: password))
            #expect(signUp.status == 400 && signUp.errorCode == .invalidField, "\(password.debugDescription)")
            #expect(signUp.errorBody()?.field == "password")
        }
        try await api.signUp("alice", "password")
        for password in ["password\u{0}BBBB", "password\u{0}"] {
            let signIn = try await api.call(.signIn, json: SignInRequest(username: "alice", password: password))
            #expect(signIn.status == 400 && signIn.errorCode == .invalidField, "\(password.debugDescription)")
            #expect(signIn.errorBody()?.field == "password")
        }
        #expect(try await api.call(.signIn, json: SignInRequest(username: "alice", password: "password")).status == 200)
        // The password rule counts UTF-8 bytes: 36 "é" are 72 bytes, 37 are 74.
        #expect(try await api.call(.signUp, json: SignUpRequest(username: "eve", password: String(repeating: "é", count: 36))).status == 201)
        #expect(try await api.call(.signUp, json: SignUpRequest(username: "eva", password: String(repeating: "é", count: 37))).status == 400)
        #expect(try await api.call(.signUp, json: SignUpRequest(username: "emil", password: "😀😀")).status == 201)  // 8 bytes
        #expect(try await api.call(.signUp, json: SignUpRequest(username: "emma", password: "1234567")).status == 400)
    }

    /// Failed before: a device name holding NUL was stored (SQLite) or made PostgreSQL fail the sign-in with a 500.
    @Test func controlCharactersInADeviceNameAreRefused() async throws {
        let server = try TestServer.make()
        let api = server.client
        try await api.signUp("alice")
        for name in ["phone\u{0}", "line\nbreak", "bell\u{7}", "del\u{7F}", "c1\u{85}"] {
            let answer = try await api.call(.signIn, json: SignInRequest(username: "alice", password: "correct horse", deviceName: name))
            #expect(answer.status == 400 && answer.errorCode == .invalidField, "\(name.debugDescription)")
            #expect(answer.errorBody()?.field == "deviceName")
        }
        let limit = String(repeating: "d", count: SignInRequest.maxDeviceNameLength)
        #expect(try await api.call(.signIn, json: SignInRequest(username: "alice", password: "correct horse", deviceName: limit)).status == 200)
        #expect(try await api.call(.signIn, json: SignInRequest(username: "alice", password: "correct horse", deviceName: limit + "d")).status == 400)
        #expect(try await api.call(.signIn, json: SignInRequest(username: "alice", password: "correct horse", deviceName: "Ålice’s 📱")).status == 200)
    }

    // MARK: - Item 4: strictness

    /// Failed before: `null` for an optional field was taken as absent, by the fast reader and by Codable.
    @Test(arguments: ["serverID", "deleted", "baseVersion", "baseText"])
    func nullForAnOptionalPushFieldIsInvalidJSON(_ field: String) async throws {
        let server = try TestServer.make()
        let api = server.client
        let session = try await api.account("alice")
        let body = Self.pushBody(#"{"clientID":"12","origin":"7","editID":"9","text":"x",""# + field + #"":null}"#)
        #expect(PushRequest.fastDecode(Data(body.utf8)) == nil, "the fast reader must give up on null")
        let answer = try await api.call(.push, token: session.token, rawJSON: body)
        #expect(answer.status == 400)
        #expect(answer.errorCode == .invalidJSON)
        #expect(answer.errorBody()?.field == "changes[0].\(field)")
        #expect(try await api.pullAll(session.token).isEmpty)
    }

    /// Failed before: `null` for `deviceName` or `origin` was taken as absent.
    @Test(arguments: ["deviceName", "origin"])
    func nullForAnOptionalSignInFieldIsInvalidJSON(_ field: String) async throws {
        let server = try TestServer.make()
        let api = server.client
        try await api.signUp("alice")
        let answer = try await api.call(.signIn, rawJSON: #"{"username":"alice","password":"correct horse",""# + field + #"":null}"#)
        #expect(answer.status == 400)
        #expect(answer.errorCode == .invalidJSON)
        #expect(answer.errorBody()?.field == field)
    }

    /// Every ID form, in every ID field of a push: only the canonical decimal string (or a JSON integer up to 2^53)
    /// is an ID. Failed before for leading zeros ("00012" was accepted and echoed as "12").
    @Test(arguments: ["clientID", "origin", "serverID", "editID"])
    func onlyCanonicalIDsAreIDs(_ field: String) async throws {
        let server = try TestServer.make()
        let api = server.client
        let session = try await api.account("alice")
        let refused = [
            #""00012""#, #""0""#, #""-5""#, #""+5""#, #"" 12""#, #""12 ""#, #""""#, #""1e3""#, #""0x10""#,
            #""9223372036854775808""#, #""99999999999999999999""#, "0", "-1", "9007199254740993", "1.5", "true", "[]", "{}",
        ]
        for value in refused {
            var fields = ["clientID": #""12""#, "origin": #""7""#, "editID": #""9""#]
            fields[field] = value
            let object = fields.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",")
            let body = Self.pushBody("{" + object + #","text":"x"}"#)
            #expect(PushRequest.fastDecode(Data(body.utf8)) == nil, "\(field)=\(value)")
            let answer = try await api.call(.push, token: session.token, rawJSON: body)
            #expect(answer.status == 400, "\(field)=\(value): \(answer.text)")
            #expect([APIErrorCode.invalidID, .invalidJSON].contains(answer.errorCode), "\(field)=\(value)")
            #expect(answer.errorBody()?.field == "changes[0].\(field)", "\(field)=\(value)")
        }
        #expect(try await api.pullAll(session.token).isEmpty)
        // The canonical forms, at the ends of the range, are IDs.
        for value in [#""1""#, #""9223372036854775807""#] where field != "serverID" {
            var fields = ["clientID": #""12""#, "origin": #""7""#, "editID": #""9""#]
            fields[field] = value
            let object = fields.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",")
            let answer = try await api.call(.push, token: session.token, rawJSON: Self.pushBody("{" + object + #","text":"y"}"#))
            #expect(answer.status == 200, "\(field)=\(value): \(answer.text)")
        }
    }

    /// Every field of a change with every wrong type, null and (for required ones) absence: all refused with the
    /// field named, nothing stored, and the fast reader never accepting what Codable refuses.
    @Test func everyPushFieldWithEveryWrongType() async throws {
        let server = try TestServer.make()
        let api = server.client
        let session = try await api.account("alice")
        let good: [String: String] = [
            "clientID": #""12""#, "origin": #""7""#, "serverID": #""4""#, "editID": #""9""#, "text": #""x""#, "deleted": "false",
            "baseVersion": "1", "baseText": #""b""#,
        ]
        let wrong = ["null", "true", "1", "-1", "1.5", #""s""#, "[]", "{}", #""""#]
        for field in good.keys.sorted() {
            for value in wrong where value != good[field] {
                if field == "baseVersion" && ["1", "-1"].contains(value) { continue }  // integers: range, not type
                if field == "deleted" && value == "true" { continue }  // a boolean
                if ["clientID", "origin", "serverID", "editID"].contains(field) && value == "1" { continue }  // a JSON integer up to 2^53 is an ID
                if ["text", "baseText"].contains(field) && [#""s""#, #""""#].contains(value) { continue }  // strings
                var fields = good
                fields[field] = value
                let object = fields.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",")
                let body = Self.pushBody("{" + object + "}")
                #expect(PushRequest.fastDecode(Data(body.utf8)) == nil, "\(field)=\(value)")
                let answer = try await api.call(.push, token: session.token, rawJSON: body)
                #expect(answer.status == 400, "\(field)=\(value): \(answer.text)")
                #expect(answer.errorCode == .invalidJSON || answer.errorCode == .invalidID, "\(field)=\(value): \(answer.text)")
                if value != "1.5" {
                    // Foundation's JSONDecoder reports a fraction where an integer belongs without a coding path, so
                    // that answer cannot name the field.
                    #expect(answer.errorBody()?.field == "changes[0].\(field)", "\(field)=\(value): \(answer.text)")
                }
            }
        }
        for field in ["clientID", "origin", "editID", "text"] {
            var fields = good
            fields[field] = nil
            let object = fields.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",")
            let answer = try await api.call(.push, token: session.token, rawJSON: Self.pushBody("{" + object + "}"))
            #expect(answer.status == 400 && answer.errorCode == .invalidJSON, "without \(field)")
            #expect(answer.errorBody()?.field == "changes[0].\(field)")
        }
        #expect(try await api.pullAll(session.token).isEmpty)
    }

    /// Failed before: usernames were lowercased with Unicode rules first, so "\u{212A}elvin" (KELVIN SIGN) became
    /// "kelvin".
    @Test func usernamesAreCheckedOnTheBytesSent() async throws {
        let server = try TestServer.make()
        let api = server.client
        for username in ["\u{212A}elvin", "ſam", "İda", "ﬁona", "alice\u{0}", "al ice", "ab", String(repeating: "a", count: 65)] {
            let answer = try await api.call(.signUp, json: SignUpRequest(username: username, password: "correct horse"))
            #expect(answer.status == 400 && answer.errorCode == .invalidField, "\(username.debugDescription)")
        }
        #expect(CredentialRules.canonicalUsername("\u{212A}elvin") == nil)
        #expect(CredentialRules.canonicalUsername("Kelvin") == "kelvin")
        try await api.signUp("Kelvin")
        #expect(try await api.call(.signUp, json: SignUpRequest(username: "KELVIN", password: "correct horse")).errorCode == .usernameTaken)
        #expect(try await api.call(.signUp, json: SignUpRequest(username: "abc", password: "correct horse")).status == 201)
        #expect(try await api.call(.signUp, json: SignUpRequest(username: String(repeating: "z", count: 64), password: "correct horse")).status == 201)
        // At sign-in the Kelvin sign names no account.
        let signIn = try await api.call(.signIn, json: SignInRequest(username: "\u{212A}elvin", password: "correct horse"))
        #expect(signIn.errorCode == .invalidCredentials)
    }

    /// Failed before: `limit=10^30` answered `invalid_limit` where the protocol clamps positive limits. `since=`
    /// (empty) is `invalid_cursor`, as the OpenAPI document now says.
    @Test func pullLimitsAndCursorsAtTheirBoundaries() async throws {
        let server = try TestServer.make(limits: SyncLimits(maxPageSize: 3, defaultPageSize: 2))
        let api = server.client
        let session = try await api.account("alice")
        _ = try await api.push(session.token, (1...5).map { change($0, edit: $0, text: "n\($0)\n") })
        func page(_ query: [(String, String)]) async throws -> WireResponse {
            try await api.call(.pull, token: session.token, query: query)
        }
        for (limit, count) in [("1", 1), ("2", 2), ("3", 3), ("4", 3), ("1000000000000000000000000000000", 3), ("0003", 3)] {
            let answer = try await page([("limit", limit)])
            #expect(answer.status == 200, "limit=\(limit): \(answer.text)")
            #expect(try api.decode(PullResponse.self, answer).changes.count == count, "limit=\(limit)")
        }
        #expect(try api.decode(PullResponse.self, try await page([])).changes.count == 2)
        for limit in ["0", "-1", "", "+3", " 3", "3.0", "1e3", "three", "000"] {
            let answer = try await page([("limit", limit)])
            #expect(answer.status == 400 && answer.errorCode == .invalidLimit, "limit=\(limit)")
        }
        for since in ["", "c", "c-1", "c01", "5", "C0", "c5 ", "c99"] {
            let answer = try await page([("since", since)])
            #expect(answer.status == 400 && answer.errorCode == .invalidCursor, "since=\(since)")
        }
        #expect(try await page([("since", "c0")]).status == 200)
        #expect(try await page([("since", "c5")]).status == 200)
    }

    // MARK: - Over HTTP (the router): media types, public routes and methods

    /// Failed before: a push (or sign-up) without Content-Type was accepted; and `/healthz` and `/v1/info` answered
    /// 401 to a malformed Authorization header.
    @Test func mediaTypesAndAuthorizationOverHTTP() async throws {
        let server = try TestServer.make()
        try await server.application.test(.router) { client in
            let api = APIClient(http: client)
            let session = try await api.account("alice")
            let body = Data(Self.pushBody(Self.sampleChange).utf8)
            for contentType in [nil, "text/plain", "application/jsonx", "application/x-www-form-urlencoded", ""] as [String?] {
                let answer = try await api.call(.push, token: session.token, body: body, contentType: contentType)
                #expect(answer.status == 415 && answer.errorCode == .unsupportedMediaType, "\(contentType ?? "none")")
                #expect(answer.headers["x-request-id"]?.isEmpty == false)
            }
            #expect(try await api.pullAll(session.token).isEmpty)
            #expect(try await api.call(.push, token: session.token, body: body, contentType: "application/json; charset=utf-8").status == 200)

            for authorization in ["Basic YWxpY2U6cHc=", "garbage", "Bearer", "Bearer a b", "Bearer fn_forged"] {
                for uri in [Endpoint.health.path, Endpoint.info.path] {
                    let answer = try await client.executeRequest(uri: uri, method: .get, headers: [.authorization: authorization], body: nil)
                    #expect(answer.status == .ok, "\(uri) with \(authorization)")
                }
                let signIn = try await client.executeRequest(
                    uri: Endpoint.signIn.path, method: .post, headers: [.authorization: authorization, .contentType: "application/json"],
                    body: ByteBuffer(bytes: try WireJSON.encoder().encode(SignInRequest(username: "alice", password: "correct horse"))))
                #expect(signIn.status == .ok, "sign-in with \(authorization)")
                let account = try await client.executeRequest(uri: Endpoint.account.path, method: .get, headers: [.authorization: authorization], body: nil)
                #expect(account.status == .unauthorized && account.errorCode == .unauthorized, "account with \(authorization)")
            }
        }
    }

    /// Every route with every method: the route's own method answers, any other is 405 with `Allow`, an unknown
    /// path 404; all JSON with a request id.
    @Test func everyRouteWithEveryMethod() async throws {
        let server = try TestServer.make()
        try await server.application.test(.router) { client in
            let methods: [HTTPRequest.Method] = [.get, .post, .put, .patch, .delete, .head, .options]
            for endpoint in Endpoint.allCases {
                // A path may have several routes (POST /v1/sessions signs in, GET lists the sessions).
                let allowed = Endpoint.allCases.filter { $0.path == endpoint.path }.map(\.method.rawValue)
                for method in methods where !allowed.contains(method.rawValue) {
                    let answer = try await client.executeRequest(uri: endpoint.path, method: method, headers: [:], body: nil)
                    if method == .head && allowed.contains("GET") { continue }  // HEAD of a GET route is the GET's head
                    #expect(answer.status == .methodNotAllowed, "\(method) \(endpoint.path): \(answer.status)")
                    #expect(answer.headers[.allow] == allowed.joined(separator: ", "))
                    if method != .head { #expect(answer.errorCode == .methodNotAllowed) }
                    #expect(answer.headers[HTTPField.Name("X-Request-Id")!] != nil)
                }
            }
            for path in ["/", "/v1", "/v1/notes", "/v2/info", "/v1/info/", "/healthz/x", "/v1/notes/push/../changes"] {
                let answer = try await client.executeRequest(uri: path, method: .get, headers: [:], body: nil)
                #expect(answer.status == .notFound, "\(path)")
                #expect(answer.errorCode == .notFound, "\(path)")
            }
        }
    }

    /// Tokens of other accounts and revoked tokens reach nothing of the account.
    @Test func anotherAccountsTokenReachesOnlyItsOwnAccount() async throws {
        let server = try TestServer.make()
        let api = server.client
        let alice = try await api.account("alice")
        let bob = try await api.account("bob")
        let created = try await api.push(alice.token, [change(1, origin: 11, edit: 1, text: "alice\n")])
        let serverID = try #require(created[0].serverID)
        // Bob with Alice's server ID, client ID and edit ID: unknown note, never a replay of hers.
        let results = try await api.push(bob.token, [change(1, origin: 11, server: serverID, edit: 1, text: "bob\n", baseVersion: 1)])
        #expect(results[0].status == .rejected && results[0].error?.code == .unknownNote && !results[0].replayed)
        #expect(try await api.pullAll(bob.token).isEmpty)
        // Bob's cursor past his own changes is refused rather than showing Alice's.
        #expect(try await api.call(.pull, token: bob.token, query: [("since", "c1")]).errorCode == .invalidCursor)
        #expect(try api.decode(AccountResponse.self, try await api.call(.account, token: bob.token)).username == "bob")
        #expect(try await api.pullAll(alice.token).map(\.text) == ["alice\n"])
    }

    // MARK: - Item 6: failed sign-ins and lockouts are logged

    /// Failed before: failed sign-ins and lockouts were not logged at the default level (info).
    @Test func failedSignInsAndLockoutsAreLoggedOneLineEach() async throws {
        let lines = LogCapture()
        var logger = Logger(label: "notesyncd", factory: { _ in lines.handler() })
        logger.logLevel = .info
        let server = try InProcessServer(
            limits: SyncLimits(), tokenSeed: 1, throttle: SignInThrottle(maxFailures: 2), logger: logger)
        let api = server.client
        try await api.signUp("alice")
        let peer = WireRequest(.signIn, body: try WireJSON.encoder().encode(SignInRequest(username: "alice", password: "wrong password 1")))
        var request = peer
        request.remoteAddress = "203.0.113.9"
        request.requestID = "req-1"
        _ = await server.api.handle(request)
        request.requestID = "req-2"
        _ = await server.api.handle(request)
        request.requestID = "req-3"
        let locked = await server.api.handle(request)
        #expect(locked.status == 429)
        let failures = lines.lines.filter { $0.level == .warning }
        #expect(failures.count == 3)
        #expect(failures.prefix(2).allSatisfy { $0.message == "sign-in failed: wrong username or password" })
        #expect(failures.last?.message == "sign-in refused: too many failed attempts")
        for (line, requestID) in zip(failures, ["req-1", "req-2", "req-3"]) {
            #expect(line.metadata["username"] == "alice")
            #expect(line.metadata["remote_address"] == "203.0.113.9")
            #expect(line.metadata["request_id"] == .string(requestID))
            #expect(!line.rendered.contains("wrong password"), "the password is never logged")
        }
        // A malformed username is logged as "-", never as sent (no log injection).
        let hostile = WireRequest(.signIn, body: try WireJSON.encoder().encode(SignInRequest(username: "x\nFAKE LINE", password: "wrong password")))
        _ = await server.api.handle(hostile)
        #expect(lines.lines.last?.metadata["username"] == "-")
        #expect(!lines.lines.contains { $0.rendered.contains("FAKE LINE") })
    }
}

/// Log lines captured by a swift-log handler, with their rendered form (what StreamLogHandler would print).
final class LogCapture: Sendable {
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: Logger.Metadata
        var rendered: String
    }

    private let captured = Mutex<[Line]>([])
    var lines: [Line] { captured.withLock { $0 } }

    func handler() -> Handler { Handler(capture: self) }

    struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(
            level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String, file: String,
            function: String, line: UInt
        ) {
            let all = metadata.merging(explicit ?? [:]) { $1 }
            let rendered = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ") + " \(message)"
            capture.captured.withLock { $0.append(Line(level: level, message: "\(message)", metadata: all, rendered: rendered)) }
        }
    }
}
