import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import Yams

/// Checks Docs/openapi.yaml against the wire module: every route, every error code, every status, and every
/// example decoded with the shared types. A route or code added to the code but not the document fails here.
@Suite struct OpenAPIDocumentTests {
    static let documentURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Docs/openapi.yaml")

    static func document() throws -> [String: Any] {
        let text = try String(contentsOf: documentURL, encoding: .utf8)
        return try #require(try Yams.load(yaml: text) as? [String: Any])
    }

    @Test func everyEndpointIsDocumentedAndNothingElse() throws {
        let paths = try #require(try Self.document()["paths"] as? [String: Any])
        var documented: Set<String> = []
        for (path, value) in paths {
            let operations = try #require(value as? [String: Any])
            for method in operations.keys where ["get", "post", "put", "patch", "delete"].contains(method) {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        let implemented = Set(Endpoint.allCases.map { "\($0.method.rawValue) \($0.path)" })
        #expect(documented == implemented, "only in the document: \(documented.subtracting(implemented)); only in code: \(implemented.subtracting(documented))")
    }

    @Test func operationIDsAreTheEndpointNames() throws {
        let paths = try #require(try Self.document()["paths"] as? [String: Any])
        for endpoint in Endpoint.allCases {
            let operations = try #require(paths[endpoint.path] as? [String: Any])
            let operation = try #require(operations[endpoint.method.rawValue.lowercased()] as? [String: Any])
            #expect(operation["operationId"] as? String == endpoint.rawValue)
            let responses = try #require(operation["responses"] as? [String: Any])
            #expect(responses[String(endpoint.successStatus)] != nil, "\(endpoint) lacks its \(endpoint.successStatus)")
            let isPublic = (operation["security"] as? [Any])?.isEmpty == true
            #expect(isPublic == !endpoint.requiresAuthentication, "\(endpoint) security")
            if endpoint.requiresAuthentication { #expect(responses["401"] != nil, "\(endpoint) lacks 401") }
        }
    }

    @Test func errorCodesMatch() throws {
        let components = try #require(try Self.document()["components"] as? [String: Any])
        let schemas = try #require(components["schemas"] as? [String: Any])
        let codeSchema = try #require(schemas["ErrorCode"] as? [String: Any])
        let documented = try #require(codeSchema["enum"] as? [String])
        #expect(documented == APIErrorCode.allKnown.map(\.rawValue))
        let statusSchema = try #require(schemas["ChangeStatus"] as? [String: Any])
        #expect(statusSchema["enum"] as? [String] == ChangeStatus.allCases.map(\.rawValue))
    }

    @Test func everyExampleDecodesWithTheSharedTypes() throws {
        let components = try #require(try Self.document()["components"] as? [String: Any])
        let examples = try #require(components["examples"] as? [String: Any])
        let decoders: [String: (Data) throws -> Any] = [
            "HealthResponse": { try JSONDecoder().decode(HealthResponse.self, from: $0) },
            "ServerInfo": { try JSONDecoder().decode(ServerInfo.self, from: $0) },
            "SignUpRequest": { try JSONDecoder().decode(SignUpRequest.self, from: $0) },
            "AccountResponse": { try JSONDecoder().decode(AccountResponse.self, from: $0) },
            "SignInRequest": { try JSONDecoder().decode(SignInRequest.self, from: $0) },
            "SignInResponse": { try JSONDecoder().decode(SignInResponse.self, from: $0) },
            "PushRequest": { try JSONDecoder().decode(PushRequest.self, from: $0) },
            "PushResponse": { try JSONDecoder().decode(PushResponse.self, from: $0) },
            "PullResponse": { try JSONDecoder().decode(PullResponse.self, from: $0) },
            "ErrorUnauthorized": { try JSONDecoder().decode(APIErrorBody.self, from: $0) },
            "ErrorTooManyAttempts": { try JSONDecoder().decode(APIErrorBody.self, from: $0) },
            "ErrorWrongPassword": { try JSONDecoder().decode(APIErrorBody.self, from: $0) },
            "AccountUsageResponse": { try JSONDecoder().decode(AccountResponse.self, from: $0) },
            "SessionListResponse": { try JSONDecoder().decode(SessionListResponse.self, from: $0) },
            "RevokeSessionRequest": { try JSONDecoder().decode(RevokeSessionRequest.self, from: $0) },
            "RevokedSessionsResponse": { try JSONDecoder().decode(RevokedSessionsResponse.self, from: $0) },
            "ChangePasswordRequest": { try JSONDecoder().decode(ChangePasswordRequest.self, from: $0) },
            "DeleteAccountRequest": { try JSONDecoder().decode(DeleteAccountRequest.self, from: $0) },
            "SignUpWithInviteRequest": { try JSONDecoder().decode(SignUpRequest.self, from: $0) },
            "ErrorInvalidInvite": { try JSONDecoder().decode(APIErrorBody.self, from: $0) },
            "NoteVersionsResponse": { try JSONDecoder().decode(NoteVersionsResponse.self, from: $0) },
            "MissingChunksRequest": { try JSONDecoder().decode(MissingChunksRequest.self, from: $0) },
            "MissingChunksResponse": { try JSONDecoder().decode(MissingChunksResponse.self, from: $0) },
            "ChunkStoredResponse": { try JSONDecoder().decode(ChunkStoredResponse.self, from: $0) },
            "AttachmentManifest": { try AttachmentManifest.decode($0) },
            "SignUpEncryptedRequest": { try JSONDecoder().decode(SignUpRequest.self, from: $0) },
            "SignInEncryptedResponse": { try JSONDecoder().decode(SignInResponse.self, from: $0) },
            "PreloginRequest": { try JSONDecoder().decode(PreloginRequest.self, from: $0) },
            "PreloginResponse": { try JSONDecoder().decode(PreloginResponse.self, from: $0) },
            "AccountKeysResponse": { try JSONDecoder().decode(AccountKeysResponse.self, from: $0) },
            "RotateKeysRequest": { try JSONDecoder().decode(RotateKeysRequest.self, from: $0) },
            "RotateKeysResponse": { try JSONDecoder().decode(RotateKeysResponse.self, from: $0) },
        ]
        #expect(Set(examples.keys) == Set(decoders.keys), "every example needs a decoder here, and vice versa")
        for (name, example) in examples {
            let value = try #require((example as? [String: Any])?["value"], "\(name) has no value")
            let data = try JSONSerialization.data(withJSONObject: value)
            let decode = try #require(decoders[name])
            #expect(throws: Never.self, "example \(name)") { _ = try decode(data) }
        }
    }

    @Test func examplesKeepIDsAsStrings() throws {
        // A JSON number for an ID would lose precision in JavaScript; the document must never show one.
        let text = try String(contentsOf: Self.documentURL, encoding: .utf8)
        let idField = try Regex(#"(clientID|serverID|editID|origin|accountID|sessionID|conflictOf): [0-9]"#)
        #expect(text.firstMatch(of: idField) == nil)
    }
}
