import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// Tags, flags and the history through the real router (HummingbirdTesting `.router`): the versions route with its
/// path parameter, its errors, and what the other answers now say.
@Suite("History and tags over HTTP")
struct HistoryRouteTests {
    func withRouter(_ server: TestServer, _ body: @Sendable (APIClient, any TestClientProtocol) async throws -> Void) async throws {
        try await server.application.test(.router) { client in
            try await body(APIClient(http: client), client)
        }
    }

    @Test func theVersionsRouteServesTheAccountsNotesOnly() async throws {
        let server = try TestServer.make()
        try await withRouter(server) { api, client in
            let alice = try await api.account("alice")
            let bob = try await api.account("bob")
            let created = try await api.push(alice.token, [tagged(1, edit: 1, text: "v1\n", tags: ["work"], pinned: true)])
            let note = try #require(created[0].serverID)
            for version in 2...7 {
                _ = try await api.push(alice.token, [change(1, server: note, edit: Int64(version), text: "v\(version)\n", baseVersion: Int64(version - 1))])
            }
            let all = try await api.allVersions(alice.token, note, pageSize: 3)
            #expect(all.map(\.version) == Array(1...7))
            #expect(all.map(\.text) == (1...7).map { "v\($0)\n" })
            #expect(all.allSatisfy { $0.tags == ["work"] && $0.pinned && !$0.archived && $0.device == "test" })
            #expect(all.allSatisfy { WireTime.parse($0.savedAt) != nil && WireTime.parse($0.editedAt) != nil })
            let page = try await api.versions(alice.token, note, after: 2, limit: 2)
            #expect(page.versions.map(\.version) == [3, 4] && page.hasMore)
            let info = try api.decode(ServerInfo.self, try await api.call(.info))
            #expect(info.history == HistoryLimits.default)
            // Default page: the server's.
            #expect(try await api.versions(alice.token, note).versions.count == 7)

            // Another account's note, an unknown note: 404 note_not_found, the same answer.
            let path = Endpoint.noteVersions.path(parameter: String(note.rawValue))
            for (token, serverID) in [(bob.token, note), (alice.token, id(424242))] {
                let response = try await client.execute(
                    uri: Endpoint.noteVersions.path(parameter: String(serverID.rawValue)), method: .get,
                    headers: [.authorization: "Bearer \(token)"])
                #expect(response.status == .notFound && response.errorCode == .noteNotFound)
            }
            // Bad parameters: 400 with the protocol's code; no token: 401; another method: 405 with Allow.
            for (uri, code) in [
                ("/v1/notes/abc/versions", APIErrorCode.invalidID), ("/v1/notes/0/versions", .invalidID),
                ("/v1/notes/0042/versions", .invalidID), (path + "?after=-1", .invalidField), (path + "?after=x", .invalidField),
                (path + "?limit=0", .invalidLimit),
            ] {
                let response = try await client.execute(uri: uri, method: .get, headers: [.authorization: "Bearer \(alice.token)"])
                #expect(response.status == .badRequest && response.errorCode == code, "\(uri)")
            }
            let anonymous = try await client.execute(uri: path, method: .get)
            #expect(anonymous.status == .unauthorized && anonymous.errorCode == .unauthorized)
            let post = try await client.execute(uri: path, method: .post, headers: [.authorization: "Bearer \(alice.token)"])
            #expect(post.status == .methodNotAllowed && post.headers[HTTPField.Name("Allow")!] == "GET")
            for uri in [path + "/", "/v1/notes//versions", "/v1/notes/\(note.rawValue)/version"] {
                let response = try await client.execute(uri: uri, method: .get, headers: [.authorization: "Bearer \(alice.token)"])
                #expect(response.status == .notFound && response.errorCode == .notFound, "\(uri)")
            }
        }
    }

    /// Old clients keep working: a change without tags or flags leaves them, and every pulled record carries them.
    @Test func recordsAlwaysCarryTagsAndFlagsAndOldClientsKeepThem() async throws {
        let server = try TestServer.make()
        try await withRouter(server) { api, _ in
            let alice = try await api.account("alice")
            let created = try await api.push(alice.token, [tagged(1, edit: 1, text: "a\n", tags: ["Work", "a/b"], archived: true), change(2, edit: 2, text: "b\n")])
            let old = try await api.push(alice.token, [change(1, server: created[0].serverID, edit: 3, text: "a2\n", baseVersion: 1)])
            #expect(old[0].status == .updated && old[0].tags == nil && old[0].archived == nil)
            let pull = try await api.call(.pull, token: alice.token)
            let text = String(decoding: pull.body, as: UTF8.self)
            #expect(text.contains(#""tags":["a/b","Work"],"pinned":false,"archived":true"#), "\(text)")
            #expect(text.contains(#""tags":[],"pinned":false,"archived":false"#), "\(text)")
            let records = try api.decode(PullResponse.self, pull).changes
            #expect(records.map(\.tags) == [[], ["a/b", "Work"]], "oldest change first: note 2, then note 1's edit")
            // A set breaking the rules is refused as a whole, naming the tag.
            let bad = try await api.call(.push, token: alice.token, rawJSON: #"{"changes":[{"clientID":"5","origin":"77","editID":"9","text":"x","tags":["ok","not ok"]}]}"#)
            #expect(bad.status == 400 && bad.errorCode == .invalidField && bad.errorBody()?.field == "changes[0].tags[1]")
            // The account reports its history's bytes.
            let account = try api.decode(AccountResponse.self, try await api.call(.account, token: alice.token))
            #expect(account.usage?.historyBytes == 7, "a\\n, b\\n, a2\\n")
        }
    }
}
