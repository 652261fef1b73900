import Foundation
import NoteSyncProtocol
import Testing
import TestSupport

/// Issue 28, item 4: one username rule. ``CredentialRules`` states it; the documents that restate it are checked
/// against it here (the help texts derive from ``CredentialRules/usernameRule``, checked in the server's tests).
@Suite struct CredentialRulesDocumentTests {
    static func document(_ name: String) throws -> String {
        try String(contentsOf: Binaries.packageRoot.appendingPathComponent("Docs/\(name)"), encoding: .utf8)
    }

    static let username = CredentialRules.usernameLength
    static let password = CredentialRules.passwordBytes

    @Test func protocolLimitsTableStatesTheRules() throws {
        let rows = try MarkdownTable.rows(after: "## Limits", in: try Self.document("PROTOCOL.md"))
        let limits = Dictionary(rows.map { ($0["limit"] ?? "", $0["default"] ?? "") }, uniquingKeysWith: { first, _ in first })
        #expect(limits["username"]?.hasPrefix("\(Self.username.lowerBound)–\(Self.username.upperBound) ") == true, "\(limits["username"] ?? "none")")
        #expect(limits["password"]?.hasPrefix("\(Self.password.lowerBound)–\(Self.password.upperBound) ") == true, "\(limits["password"] ?? "none")")
    }

    @Test func operationsStatesTheRules() throws {
        let text = try Self.document("OPERATIONS.md").split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(text.contains("A username is \(CredentialRules.usernameRule)"))
        #expect(text.contains("a password is \(CredentialRules.passwordRule)"))
    }

    @Test func openAPIBoundsAreTheRules() throws {
        let components = try #require(try OpenAPIDocumentTests.document()["components"] as? [String: Any])
        let schemas = try #require(components["schemas"] as? [String: Any])
        let signUp = try #require(schemas["SignUpRequest"] as? [String: Any])
        let properties = try #require(signUp["properties"] as? [String: Any])
        let username = try #require(properties["username"] as? [String: Any])
        #expect(username["pattern"] as? String == "^[A-Za-z0-9._-]{\(Self.username.lowerBound),\(Self.username.upperBound)}$")
        #expect((username["description"] as? String)?.hasPrefix("\(Self.username.lowerBound) to \(Self.username.upperBound) ") == true)
        let password = try #require(schemas["Password"] as? [String: Any])
        // A schema counts characters: up to 4 UTF-8 bytes each, so the byte bounds allow these character counts.
        #expect(password["minLength"] as? Int == (Self.password.lowerBound + 3) / 4)
        #expect(password["maxLength"] as? Int == Self.password.upperBound)
        #expect((password["description"] as? String)?.contains("\(Self.password.lowerBound) to \(Self.password.upperBound) bytes") == true)
    }
}
