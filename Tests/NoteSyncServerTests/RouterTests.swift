import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import MiniFlake
import NIOCore
import NoteSyncProtocol
import Synchronization
import Testing
import TestSupport

@testable import NoteSyncServer

/// Every endpoint and every request-level error code through the real router (HummingbirdTesting `.router`).
@Suite("Router")
struct RouterTests {
    func withRouter(
        _ server: TestServer, _ body: @Sendable (APIClient, any TestClientProtocol) async throws -> Void
    ) async throws {
        try await server.application.test(.router) { client in
            try await body(APIClient(http: client), client)
        }
    }

    @Test func healthAndInfo() async throws {
        let server = try TestServer.make(limits: SyncLimits(maxBodyBytes: 1 << 20, maxBatchChanges: 50))
        try await withRouter(server) { api, client in
            let health = try await api.call(.health)
            #expect(health.status == 200)
            #expect(try JSONDecoder().decode(HealthResponse.self, from: health.body) == HealthResponse(status: "ok", database: "sqlite"))
            #expect(health.headers["content-type"] == "application/json")
            #expect(health.headers["x-request-id"]?.isEmpty == false)

            let info = try api.decode(ServerInfo.self, try await api.call(.info))
            #expect(info.limits == server.services.sync.limits)
            #expect(info.protocolVersion == 1)
            #expect(info.name == "notesyncd")

            // Every route is registered: none answers 404 for its own method.
            for endpoint in Endpoint.allCases {
                let response = try await client.execute(uri: endpoint.path, method: HTTPRequest.Method(endpoint.method.rawValue)!)
                #expect(response.status != .notFound, "\(endpoint)")
                #expect(response.status != .methodNotAllowed, "\(endpoint)")
            }
        }
    }

    @Test func unknownPathsAndMethods() async throws {
        let server = try TestServer.make()
        try await withRouter(server) { _, client in
            let missing = try await client.execute(uri: "/v1/nope", method: .get)
            #expect(missing.status == .notFound)
            #expect(missing.errorCode == .notFound)
            #expect(missing.headers[.contentType] == "application/json")
            let root = try await client.execute(uri: "/", method: .post)
            #expect(root.errorCode == .notFound)

            let wrongMethod = try await client.execute(uri: Endpoint.signUp.path, method: .get)
            #expect(wrongMethod.status == .methodNotAllowed)
            #expect(wrongMethod.errorCode == .methodNotAllowed)
            #expect(wrongMethod.headers[HTTPField.Name("Allow")!] == "POST")
            let put = try await client.execute(uri: Endpoint.push.path, method: .put)
            #expect(put.status == .methodNotAllowed)
            #expect(put.errorCode == .methodNotAllowed)
            let patch = try await client.execute(uri: "/v1/elsewhere", method: .patch)
            #expect(patch.errorCode == .notFound)
            // Sessions: POST and DELETE live on different paths.
            let deleteSessions = try await client.execute(uri: Endpoint.signIn.path, method: .delete)
            #expect(deleteSessions.errorCode == .methodNotAllowed)
            // Paths are exact, though Hummingbird's router skips empty path components.
            for path in ["/v1/info/", "/v1//info", "/healthz/"] {
                let response = try await client.execute(uri: path, method: .get)
                #expect(response.status == .notFound, "\(path)")
                #expect(response.errorCode == .notFound, "\(path)")
            }
            let slashed = try await client.execute(uri: Endpoint.signUp.path + "/", method: .get)
            #expect(slashed.errorCode == .notFound)
        }
    }

    @Test func signUpAndItsErrors() async throws {
        let server = try TestServer.make()
        try await withRouter(server) { api, _ in
            let created = try await api.call(.signUp, json: SignUpRequest(username: "Alice", password: "correct horse"))
            #expect(created.status == 201)
            let account = try api.decode(AccountResponse.self, created)
            #expect(account.username == "alice")

            let taken = try await api.call(.signUp, json: SignUpRequest(username: "ALICE", password: "another one"))
            #expect(taken.status == 409)
            #expect(taken.errorCode == .usernameTaken)

            let badName = try await api.call(.signUp, json: SignUpRequest(username: "a!", password: "correct horse"))
            #expect(badName.status == 400)
            #expect(badName.errorBody()?.code == .invalidField)
            #expect(badName.errorBody()?.field == "username")
            let shortPassword = try await api.call(.signUp, json: SignUpRequest(username: "bob", password: "short"))
            #expect(shortPassword.errorBody()?.field == "password")
            let longPassword = try await api.call(.signUp, json: SignUpRequest(username: "bob", password: String(repeating: "é", count: 37)))
            #expect(longPassword.errorBody()?.code == .invalidField)

            let notJSON = try await api.call(.signUp, rawJSON: "{nope")
            #expect(notJSON.status == 400)
            #expect(notJSON.errorCode == .invalidJSON)
            let empty = try await api.call(.signUp, body: nil, contentType: nil)
            #expect(empty.errorCode == .invalidJSON)
            let unknown = try await api.call(.signUp, rawJSON: #"{"username":"bob","password":"correct horse","admin":true}"#)
            #expect(unknown.errorCode == .unknownField)
            #expect(unknown.errorBody()?.field == "admin")
            let wrongType = try await api.call(.signUp, rawJSON: #"{"username":5,"password":"correct horse"}"#)
            #expect(wrongType.errorCode == .invalidJSON)
            let missing = try await api.call(.signUp, rawJSON: #"{"username":"bob"}"#)
            #expect(missing.errorCode == .invalidJSON)
            #expect(missing.errorBody()?.field == "password")

            let text = try await api.call(.signUp, body: Data(#"{"username":"bob","password":"correct horse"}"#.utf8), contentType: "text/plain")
            #expect(text.status == 415)
            #expect(text.errorCode == .unsupportedMediaType)
            let charset = try await api.call(
                .signUp, body: Data(#"{"username":"bob","password":"correct horse"}"#.utf8), contentType: "Application/JSON; charset=utf-8"
            )
            #expect(charset.status == 201)
            // No Content-Type at all is refused too (the protocol's rule; it used to be accepted).
            let noType = try await api.call(.signUp, body: Data(#"{"username":"carol","password":"correct horse"}"#.utf8), contentType: nil)
            #expect(noType.status == 415)
            #expect(noType.errorCode == .unsupportedMediaType)
        }
    }

    @Test func signInSessionsAndSignOut() async throws {
        let server = try TestServer.make()
        try await withRouter(server) { api, client in
            try await api.signUp("alice")
            let session = try await api.signIn("alice", device: "phone", origin: id(99))
            #expect(session.token.hasPrefix("fn_"))
            #expect(session.token.count == 46)
            #expect(session.username == "alice")
            let stored = try #require(try await server.store.session(byTokenHash: SessionToken.hash(session.token)))
            #expect(stored.deviceName == "phone")
            #expect(stored.origin == id(99))
            #expect(stored.id == session.sessionID)
            #expect(stored.tokenHash != session.token)

            let me = try api.decode(AccountResponse.self, try await api.call(.account, token: session.token))
            #expect(me.accountID == session.accountID)

            let wrongPassword = try await api.call(.signIn, json: SignInRequest(username: "alice", password: "wrong password"))
            let unknownUser = try await api.call(.signIn, json: SignInRequest(username: "mallory", password: "wrong password"))
            #expect(wrongPassword.status == 401)
            #expect(wrongPassword.errorCode == .invalidCredentials)
            #expect(unknownUser.errorCode == .invalidCredentials)
            #expect(wrongPassword.errorBody()?.message == unknownUser.errorBody()?.message)
            let invalidName = try await api.call(.signIn, json: SignInRequest(username: "!!", password: "wrong password"))
            #expect(invalidName.errorCode == .invalidCredentials)

            let longDevice = try await api.call(
                .signIn, json: SignInRequest(username: "alice", password: "correct horse", deviceName: String(repeating: "d", count: 101))
            )
            #expect(longDevice.errorBody()?.code == .invalidField)
            #expect(longDevice.errorBody()?.field == "deviceName")
            let okDevice = try await api.call(
                .signIn, json: SignInRequest(username: "alice", password: "correct horse", deviceName: String(repeating: "d", count: 100))
            )
            #expect(okDevice.status == 200)
            let badOrigin = try await api.call(.signIn, rawJSON: #"{"username":"alice","password":"correct horse","origin":"0"}"#)
            #expect(badOrigin.errorCode == .invalidID)

            // Sign out: 204 with no body, and the token stops working; other sessions keep working.
            let other = try await api.signIn("alice")
            let signOut = try await api.call(.signOut, token: session.token)
            #expect(signOut.status == 204)
            #expect(signOut.body.isEmpty)
            #expect(try await api.call(.account, token: session.token).errorCode == .unauthorized)
            #expect(try await api.call(.signOut, token: session.token).errorCode == .unauthorized)
            #expect(try await api.call(.account, token: other.token).status == 200)

            // Authorization header shapes.
            for header in ["Basic YWxpY2U6cHc=", "Bearer", "Bearer ", "Bearer a b", other.token, "bearer"] {
                let response = try await client.execute(uri: Endpoint.account.path, method: .get, headers: [.authorization: header])
                #expect(response.status == .unauthorized, "\(header)")
                #expect(response.errorCode == .unauthorized, "\(header)")
            }
            let lowercaseScheme = try await client.execute(uri: Endpoint.account.path, method: .get, headers: [.authorization: "bearer \(other.token)"])
            #expect(lowercaseScheme.status == .ok)
            let none = try await client.execute(uri: Endpoint.account.path, method: .get)
            #expect(none.errorCode == .unauthorized)
        }
    }

    @Test func signInThrottle() async throws {
        let server = try TestServer.make()
        try await withRouter(server) { api, _ in
            try await api.signUp("alice")
            for _ in 0..<5 {
                let failed = try await api.call(.signIn, json: SignInRequest(username: "alice", password: "wrong password"))
                #expect(failed.errorCode == .invalidCredentials)
                server.clock.advance(milliseconds: 1000)
            }
            // The sixth attempt is refused, even with the right password, until the first failure ages out.
            let refused = try await api.call(.signIn, json: SignInRequest(username: "ALICE", password: "correct horse"))
            #expect(refused.status == 429)
            #expect(refused.errorCode == .tooManyAttempts)
            #expect(refused.headers["retry-after"] == "895")
            // Other usernames are not affected.
            #expect(try await api.call(.signIn, json: SignInRequest(username: "bob", password: "wrong password")).errorCode == .invalidCredentials)
            server.clock.advance(milliseconds: 895_000)
            #expect(try await api.call(.signIn, json: SignInRequest(username: "alice", password: "correct horse")).status == 200)
        }
    }

    @Test func pushAndPullAndTheirErrors() async throws {
        let server = try TestServer.make(limits: SyncLimits(maxBodyBytes: 4096, maxNoteBytes: 100, maxBatchChanges: 3, maxPageSize: 2, defaultPageSize: 1))
        try await withRouter(server) { api, client in
            let token = try await api.account("alice").token
            let results = try await api.push(token, [change(1, edit: 1, text: "a\n"), change(2, edit: 2, text: "b\n"), change(3, edit: 3, text: String(repeating: "x", count: 101))])
            #expect(results.map(\.status) == [.created, .created, .rejected])
            #expect(results[2].error?.code == .noteTooLarge)

            // Paging: default page size 1, limits clamped to 2.
            let first = try await api.pull(token)
            #expect(first.changes.count == 1)
            #expect(first.hasMore)
            #expect(first.cursor == SyncCursor(sequence: 1))
            let clamped = try await api.pull(token, limit: 50)
            #expect(clamped.changes.count == 2)
            #expect(clamped.hasMore == false)
            #expect(clamped.cursor == SyncCursor(sequence: 2))
            let empty = try await api.pull(token, since: SyncCursor(sequence: 2))
            #expect(empty.changes.isEmpty && !empty.hasMore && empty.cursor == SyncCursor(sequence: 2))

            let tooMany = try await api.call(.push, token: token, json: PushRequest(changes: (1...4).map { change(Int64($0), edit: Int64(10 + $0), text: "") }))
            #expect(tooMany.status == 413)
            #expect(tooMany.errorCode == .batchTooLarge)

            let huge = try await api.call(.push, token: token, json: PushRequest(changes: [change(9, edit: 9, text: String(repeating: "y", count: 5000))]))
            #expect(huge.status == 413)
            #expect(huge.errorCode == .bodyTooLarge)
            // A lying Content-Length is caught while collecting too.
            let streamed = try await client.execute(
                uri: Endpoint.push.path, method: .post, headers: [.authorization: "Bearer \(token)", .contentType: "application/json"],
                body: ByteBuffer(bytes: Array(repeating: UInt8(ascii: " "), count: 5000))
            )
            #expect(streamed.status == .contentTooLarge)
            #expect(streamed.errorCode == .bodyTooLarge)

            let xml = try await api.call(.push, token: token, body: Data("<changes/>".utf8), contentType: "application/xml")
            #expect(xml.errorCode == .unsupportedMediaType)
            let hugeNumber = try await api.call(.push, token: token, rawJSON: #"{"changes":[{"clientID":12345678901234567,"origin":"7","editID":"1","text":""}]}"#)
            #expect(hugeNumber.errorCode == .invalidID)
            let zero = try await api.call(.push, token: token, rawJSON: #"{"changes":[{"clientID":"0","origin":"7","editID":"1","text":""}]}"#)
            #expect(zero.errorCode == .invalidID)
            #expect(zero.errorBody()?.field == "changes[0].clientID")
            let negative = try await api.call(.push, token: token, rawJSON: #"{"changes":[{"clientID":"5","origin":"-7","editID":"1","text":""}]}"#)
            #expect(negative.errorCode == .invalidID)
            let unknownField = try await api.call(.push, token: token, rawJSON: #"{"changes":[{"clientID":"5","origin":"7","editID":"1","text":"","delted":true}]}"#)
            #expect(unknownField.errorCode == .unknownField)
            let noAuth = try await api.call(.push, json: PushRequest(changes: []))
            #expect(noAuth.errorCode == .unauthorized)

            for bad in ["x", "c", "c-1", "c01", "5", "c1.5", "c99999999999999999999"] {
                let response = try await api.call(.pull, token: token, query: [(PullQuery.since, bad)])
                #expect(response.errorCode == .invalidCursor, "\(bad)")
            }
            let future = try await api.call(.pull, token: token, query: [(PullQuery.since, "c3")])
            #expect(future.errorCode == .invalidCursor)
            for bad in ["0", "-1", "abc", "", "1.5"] {
                let response = try await api.call(.pull, token: token, query: [(PullQuery.limit, bad)])
                #expect(response.status == 400, "\(bad)")
                #expect(response.errorCode == .invalidLimit, "\(bad)")
            }
        }
    }

    @Test func databaseDownIs503() async throws {
        let server = try TestServer.make()
        try await withRouter(server) { api, _ in
            let token = try await api.account("alice").token
            try await server.store.close()
            let health = try await api.call(.health)
            #expect(health.status == 503)
            #expect(health.errorCode == .unavailable)
            let pull = try await api.call(.pull, token: token)
            #expect(pull.status == 503)
            #expect(pull.errorCode == .unavailable)
        }
    }

    /// A request whose task is cancelled (an in-process caller that stopped, a server stopping) is answered 503
    /// `unavailable`, not 500: nothing failed, and it is not logged as a server fault.
    @Test func aCancelledRequestIsNotAServerFault() async throws {
        let server = try TestServer.make(store: FaultyStore(inner: try SQLiteNoteStore.inMemory()))
        try await withRouter(server) { api, _ in
            let token = try await api.account("alice").token
            let pull = WireRequest(method: .get, path: Endpoint.pull.path, bearerToken: token)
            let cancelled = Task {
                while !Task.isCancelled { await Task.yield() }
                return await server.api.handle(pull)
            }
            cancelled.cancel()
            let response = await cancelled.value
            #expect(response.status == 503)
            #expect(try JSONDecoder().decode(APIErrorBody.self, from: response.body).code == .unavailable)
        }
    }

    @Test func serverFaultIs500WithRequestID() async throws {
        let server = try TestServer.make(store: FaultyStore(inner: try SQLiteNoteStore.inMemory()))
        try await withRouter(server) { api, _ in
            let token = try await api.account("alice").token
            let response = try await api.call(.push, token: token, json: PushRequest(changes: [change(1, edit: 1, text: "x")]))
            #expect(response.status == 500)
            #expect(response.errorCode == .internalError)
            #expect(response.headers["x-request-id"]?.isEmpty == false)
            #expect(response.errorBody()?.message.contains("disk on fire") == false)  // causes are logged, not sent
        }
    }
}

/// A store whose pushes fail with an unexpected error (a server fault).
struct FaultyStore: ForwardingNoteStore {
    let inner: any NoteStore
    struct DiskOnFire: Error, CustomStringConvertible { var description: String { "disk on fire" } }

    func push(accountID: FlakeID, changes: [NoteChange], context: PushContext) async throws -> [ChangeResult] { throw DiskOnFire() }
    func pull(accountID: FlakeID, after sequence: Int64, limit: Int, maxBytes: Int) async throws -> PullPage {
        // As GRDB's pooled reads do (the daemon's file store): a cancelled task's read throws before it starts.
        try Task.checkCancellation()
        return try await inner.pull(accountID: accountID, after: sequence, limit: limit, maxBytes: maxBytes)
    }
}
