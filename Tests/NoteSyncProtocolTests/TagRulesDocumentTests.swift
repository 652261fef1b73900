import Foundation
import NoteSyncProtocol
import Testing
import TestSupport

/// Issue 31: one tag rule. ``TagRules`` states it; the documents that restate it are checked against it here.
@Suite struct TagRulesDocumentTests {
    static func oneLine(_ text: String) -> String { text.split(whereSeparator: \.isWhitespace).joined(separator: " ") }

    @Test func protocolStatesTheRule() throws {
        let document = try CredentialRulesDocumentTests.document("PROTOCOL.md")
        let rows = try MarkdownTable.rows(after: "## Limits", in: document)
        let limits = Dictionary(rows.map { ($0["limit"] ?? "", $0["default"] ?? "") }, uniquingKeysWith: { first, _ in first })
        #expect(limits["tag"]?.hasPrefix("\(TagRules.nameBytes.lowerBound)–\(TagRules.nameBytes.upperBound) UTF-8 bytes: \(TagRules.rule)") == true, "\(limits["tag"] ?? "none")")
        #expect(limits["tags per note"] == "\(TagRules.maxTagsPerNote)")
        #expect(Self.oneLine(document).contains("**Tag rules** (`TagRules` in the wire module, which the server enforces and the client checks before sending): \(TagRules.rule)"))
    }

    @Test func openAPIStatesTheRule() throws {
        let components = try #require(try OpenAPIDocumentTests.document()["components"] as? [String: Any])
        let schemas = try #require(components["schemas"] as? [String: Any])
        let tag = try #require(schemas["Tag"] as? [String: Any])
        #expect(tag["minLength"] as? Int == TagRules.nameBytes.lowerBound)
        // A schema counts characters, each at least one byte: the byte bound bounds them too.
        #expect(tag["maxLength"] as? Int == TagRules.nameBytes.upperBound)
        #expect(Self.oneLine((tag["description"] as? String) ?? "").lowercased().contains(TagRules.rule.lowercased()))
        let set = try #require(schemas["TagSet"] as? [String: Any])
        #expect(set["maxItems"] as? Int == TagRules.maxTagsPerNote)
    }
}
