import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MiniFlake
import NoteSyncProtocol
import NotesClient
import Testing
import TestSupport

/// Issue 31, the server's side with the real binaries over HTTP, on SQLite and PostgreSQL: tags and flags pushed by
/// two devices merge, every version is kept and served by `GET /v1/notes/{serverID}/versions` page by page, the
/// daemon's `--history-days` reaches `GET /v1/info`, and the operator's `stats` and `check` see the history.
@Suite("note history, end to end", .serialized, .enabled(if: Binaries.exist(Binaries.notesyncd), "build notesyncd first (swift build)"))
struct HistoryEndToEndTests {
    static var backends: [String] { OperatorsEndToEndTests.backends }

    @Test(arguments: backends)
    func theVersionsRouteServesEveryVersionOverHTTP(_ backend: String) async throws {
        let directory = try NotesE2E.temporaryDirectory("history-\(backend)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try await OperatorsEndToEndTests.storeArguments(backend, directory: directory)
        let daemon = try await OperatorsEndToEndTests.start(store + ["--sign-up", "open", "--bcrypt-cost", "4", "--history-days", "30"], directory: directory)
        defer { daemon.child.stopBlocking() }
        let api = try OperatorsEndToEndTests.client(daemon.url)
        #expect(try api.decode(ServerInfo.self, try await api.call(.info)).history?.retentionDays == 30)

        try await api.signUp("alice", NotesE2E.password)
        let laptop = try await api.signIn("alice", NotesE2E.password, device: "laptop", origin: id(7001)).token
        let phone = try await api.signIn("alice", NotesE2E.password, device: "phone", origin: id(7002)).token
        let bob = try await api.account("bob")

        func note(_ edit: Int64, _ text: String, server: FlakeID? = nil, base: Int64? = nil, tags: [String]? = nil, baseTags: [String]? = nil,
                  pinned: Bool? = nil) -> NoteChange {
            NoteChange(
                clientID: id(1), origin: id(7001), serverID: server, editID: id(edit), text: text, baseVersion: base, tags: tags,
                pinned: pinned, baseTags: baseTags)
        }
        let created = try await api.push(laptop, [note(1, "draft\n", tags: ["home", "idea"])])
        let serverID = try #require(created.first?.serverID)
        for version in 2...12 {
            let results = try await api.push(laptop, [note(Int64(version), "draft \(version)\n", server: serverID, base: Int64(version - 1))])
            #expect(results.first?.status == .updated)
        }
        // Two devices change the tags from version 12 at once: the laptop adds one, the phone removes one and pins.
        _ = try await api.push(laptop, [note(20, "draft 12\n", server: serverID, base: 12, tags: ["home", "idea", "work"], baseTags: ["home", "idea"])])
        let phoneResult = try await api.push(
            phone, [note(21, "draft 12\n", server: serverID, base: 12, tags: ["idea"], baseTags: ["home", "idea"], pinned: true)])
        #expect(phoneResult.first?.status == .updated && phoneResult.first?.tags == ["idea", "work"])
        let record = try #require(try await api.pullAll(laptop).first)
        #expect(record.tags == ["idea", "work"] && record.pinned == true && record.archived == false)

        // Every version, oldest first, in pages of five over HTTP.
        let versions = try await api.allVersions(laptop, serverID, pageSize: 5)
        #expect(versions.map(\.version) == Array(1...14))
        #expect(versions.prefix(12).map(\.text) == ["draft\n"] + (2...12).map { "draft \($0)\n" })
        #expect(versions.map(\.device) == Array(repeating: "laptop", count: 13) + ["phone"])
        #expect(versions.last?.tags == ["idea", "work"] && versions.last?.pinned == true)
        let page = try await api.versions(phone, serverID, after: 10, limit: 2)
        #expect(page.versions.map(\.version) == [11, 12] && page.hasMore)

        // Another account's token: the same 404 as an unknown note.
        let foreign = try await api.send(NoteVersionsRequest(serverID: serverID).wireRequest(bearerToken: bob.token), nil)
        #expect(foreign.status == 404 && foreign.errorCode == .noteNotFound)
        let bad = try await api.send(
            WireRequest(method: .get, path: Endpoint.noteVersions.path(parameter: "12ab"), bearerToken: laptop), nil)
        #expect(bad.status == 400 && bad.errorCode == .invalidID)
        let usage = try api.decode(AccountResponse.self, try await api.call(.account, token: laptop)).usage
        #expect(usage?.historyBytes == Int64(versions.reduce(0) { $0 + $1.text.utf8.count }))

        // The operator sees the history.
        let stats = try await OperatorsEndToEndTests.notesyncd(["stats", "--json"] + store)
        #expect(stats.status == 0, "\(stats.output)")
        let statistics = try JSONDecoder().decode(StatsJSON.self, from: Data(stats.output.utf8))
        #expect(statistics.noteVersions == 14 && statistics.historyBytes == usage?.historyBytes)
        let check = try await OperatorsEndToEndTests.notesyncd(["check"] + store)
        #expect(check.status == 0 && check.output.hasPrefix("ok:"), "\(check.output)")
    }

    struct StatsJSON: Decodable {
        var noteVersions: Int
        var historyBytes: Int64
    }
}
