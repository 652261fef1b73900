import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@Suite struct TagRulesTests {
    @Test(arguments: [
        "work", "Work", "a", "x_y-z", "a/b/c", "v1.2", "2026", "日本語", "Ünïcödé", "cafe\u{301}", "हिंदी", "٣٤", "ǅx",
        String(repeating: "z", count: 64), String(repeating: "é", count: 32),
    ])
    func acceptsLettersDigitsAndTheFourPunctuationCharacters(_ tag: String) {
        #expect(TagRules.problem(tag) == nil, "\(tag)")
        #expect(TagRules.isValid(tag))
    }

    @Test(arguments: [
        "", "two words", "/a", "a/", ".a", "a.", "tab\t", "nul\u{0}", "emoji😀", "a+b", "a#b", "a,b", "a\nb", "\u{301}a",
        "-\u{301}", "ｆｕｌｌ!", String(repeating: "z", count: 65), String(repeating: "é", count: 33), "a\u{200D}b",
    ])
    func refusesEverythingElseWithTheRule(_ tag: String) {
        let problem = TagRules.problem(tag)
        #expect(problem != nil, "\(tag.debugDescription)")
        #expect(problem?.hasPrefix("A tag ") == true)
        #expect(problem?.contains("\n") != true, "one line: \(problem ?? "")")
    }

    @Test func tagsAreComparedByTheLowercaseOfTheirNFCForm() {
        #expect(TagRules.key("Work") == TagRules.key("WORK"))
        #expect(TagRules.key("café") == TagRules.key("CAFE\u{301}"))
        #expect(Array(TagRules.key("CAFE\u{301}").utf8) == Array("café".utf8), "NFC, byte for byte")
        #expect(TagRules.key("work") != TagRules.key("works"))
        #expect(TagRules.sameSet(["Work", "idea"], ["IDEA", "work"]))
        #expect(!TagRules.sameSet(["work"], ["work", "idea"]))
        #expect(!TagRules.sameSet(["work", "Work"], ["work", "idea"]))
    }

    @Test func aSetNamesEachTagOnceAndHoldsAtMostFifty() {
        #expect(TagRules.violation(in: []) == nil)
        #expect(TagRules.violation(in: ["a", "b"]) == nil)
        #expect(TagRules.violation(in: ["a", "B", "b"])?.index == 2)
        #expect(TagRules.violation(in: ["café", "x", "cafe\u{301}"])?.index == 2)
        #expect(TagRules.violation(in: ["ok", "not ok"])?.index == 1)
        let fifty = (0..<TagRules.maxTagsPerNote).map { "t\($0)" }
        #expect(TagRules.violation(in: fifty) == nil)
        let tooMany = TagRules.violation(in: fifty + ["t50"])
        #expect(tooMany?.index == nil && tooMany?.message.contains("\(TagRules.maxTagsPerNote)") == true)
    }

    @Test func theCanonicalOrderIsByKeyAsUTF8Bytes() {
        #expect(TagRules.sorted(["b", "A", "é", "a/b", "Z"]) == ["A", "a/b", "b", "Z", "é"])
        #expect(TagRules.sorted([]) == [])
    }

    @Test func theRuleInWordsNamesItsNumbers() {
        #expect(TagRules.rule.contains("1–64 UTF-8 bytes"))
        #expect(TagRules.rule.contains("at most 50"))
    }
}

@Suite struct HistoryWireTests {
    @Test func theVersionsRouteCarriesItsServerIDAndQuery() throws {
        let request = NoteVersionsRequest(serverID: id(8_230_135_131_718_483_968), after: 7, limit: 20).wireRequest(bearerToken: "t")
        #expect(request.method == .get)
        #expect(request.path == "/v1/notes/8230135131718483968/versions")
        #expect(request.queryValue(HistoryQuery.after) == "7" && request.queryValue(HistoryQuery.limit) == "20")
        #expect(Endpoint.matching(method: "GET", path: request.path) == .noteVersions)
        #expect(Endpoint.noteVersions.parameter(in: request.path) == "8230135131718483968")
        #expect(NoteVersionsRequest(serverID: id(5)).wireRequest(bearerToken: nil).queryValue(HistoryQuery.limit) == nil)
    }

    @Test(arguments: ["/v1/notes//versions", "/v1/notes/5/versions/", "/v1/notes/5", "/v1/notes/5/6/versions", "/v1/notes/5/version"])
    func otherPathsAreNotTheVersionsRoute(_ path: String) {
        #expect(Endpoint.noteVersions.parameter(in: path) == nil)
        #expect(Endpoint.matching(method: "GET", path: path) == nil)
    }

    @Test func fixedPathsMatchOnlyThemselves() {
        #expect(Endpoint.push.parameter(in: "/v1/notes/push") == "")
        #expect(Endpoint.push.parameter(in: "/v1/notes/push/") == nil)
        #expect(Endpoint.push.path(parameter: "x") == "/v1/notes/push")
        #expect(Endpoint.matching(method: "POST", path: "/v1/notes/push") == .push)
        #expect(Endpoint.matching(method: "GET", path: "/v1/notes/changes") == .pull)
    }

    @Test func versionPagesRoundTripAndReadLeniently() throws {
        let page = NoteVersionsResponse(
            versions: [
                NoteVersion(
                    version: 1, text: "a\n", deleted: false, tags: ["Work", "a/b"], pinned: true, archived: false,
                    editedAt: "2026-11-22T10:15:30.123Z", savedAt: "2026-11-22T10:15:31.000Z", device: "laptop"),
                NoteVersion(
                    version: 2, text: "", deleted: true, tags: [], pinned: false, archived: false,
                    editedAt: "2026-11-22T10:15:30.123Z", savedAt: "2026-11-22T10:15:31.000Z", device: nil),
            ], hasMore: true)
        let data = try WireJSON.encoder().encode(page)
        #expect(try JSONDecoder().decode(NoteVersionsResponse.self, from: data) == page)
        #expect(!String(decoding: data, as: UTF8.self).contains("\\/"), "slashes unescaped")
        // A newer server's extra field is ignored.
        let newer = #"{"versions":[],"hasMore":false,"next":"x"}"#
        #expect(try JSONDecoder().decode(NoteVersionsResponse.self, from: Data(newer.utf8)).versions.isEmpty)
    }

    @Test func serverInfoAndUsageFromOlderServersStillDecode() throws {
        let info = #"{"name":"notesyncd","version":"0.1.0","protocolVersion":1,"limits":{"maxBodyBytes":1,"maxNoteBytes":1,"maxBatchChanges":1,"maxPageSize":1,"defaultPageSize":1}}"#
        #expect(try JSONDecoder().decode(ServerInfo.self, from: Data(info.utf8)).history == nil)
        let usage = #"{"notes":1,"textBytes":2,"maxNotes":3,"maxTextBytes":4}"#
        #expect(try JSONDecoder().decode(StorageUsage.self, from: Data(usage.utf8)).historyBytes == nil)
        let withHistory = ServerInfo(version: "x", limits: .default, history: .default)
        #expect(try JSONDecoder().decode(ServerInfo.self, from: WireJSON.encoder().encode(withHistory)) == withHistory)
    }

    @Test func noteNotFoundIsA404() {
        #expect(APIErrorCode.noteNotFound.httpStatus == 404)
        #expect(APIErrorCode.allKnown.contains(.noteNotFound))
    }
}
