import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// Attachments on notes through the real router (issue 33 phase 2): a push naming a chunk the account lacks is
/// answered `unknown_chunk` for that change, a note's attachments come back from pull and history, and hostile
/// attachment fields are refused with a 400 JSON body naming the field, leaving nothing stored.
@Suite("Attachments over HTTP")
struct AttachmentRouteTests {
    static let photo = ChunkStoreConformance.bytes(3000, seed: 60)

    static func manifestJSON(name: String = "photo.png", _ replacing: (String, String)? = nil) -> String {
        let hash = ChunkStoreConformance.address(photo).hex
        let json = #"{"name":"\#(name)","size":\#(photo.count),"mediaType":"image/png","chunkSize":1048576,"chunks":["\#(hash)"],"sha256":"\#(hash)"}"#
        return replacing.map { json.replacingOccurrences(of: $0.0, with: $0.1) } ?? json
    }

    static func push(_ fields: String, edit: Int = 5) -> String {
        #"{"changes":[{"clientID":"1","origin":"11","editID":"\#(edit)","text":"x"\#(fields.isEmpty ? "" : "," + fields)}]}"#
    }

    @Test func aPushNamingAnAbsentChunkIsRejectedUnknownChunkUntilTheChunkIsUploaded() async throws {
        let server = try TestServer.make()
        try await server.application.test(.router) { client in
            let api = APIClient(http: client)
            let token = try await api.account("alice").token
            let refused = try api.decode(PushResponse.self, try await api.call(.push, token: token, rawJSON: Self.push(#""attachments":[\#(Self.manifestJSON())]"#)))
            #expect(refused.results[0].status == .rejected && refused.results[0].error?.code == .unknownChunk)
            #expect(refused.results[0].error?.message.contains(ChunkStoreConformance.address(Self.photo).hex) == true)
            #expect(try await api.pullAll(token).isEmpty, "nothing stored")
            // Upload the chunk, push again: the note holds the attachment, and pull and history serve it.
            let uploaded = try await client.execute(
                uri: Endpoint.putChunk.path(hash: ChunkStoreConformance.address(Self.photo)), method: .put,
                headers: [.authorization: "Bearer \(token)", .contentType: ChunkRules.mediaType], body: ByteBuffer(bytes: Self.photo))
            #expect(uploaded.status == .created)
            let created = try api.decode(PushResponse.self, try await api.call(.push, token: token, rawJSON: Self.push(#""attachments":[\#(Self.manifestJSON())]"#, edit: 6)))
            #expect(created.results[0].status == .created)
            let manifest = try AttachmentManifest.decode(Data(Self.manifestJSON().utf8))
            let notes = try await api.pullAll(token)
            #expect(notes.map(\.attachments) == [[manifest]])
            let versions = try await api.allVersions(token, try #require(created.results[0].serverID))
            #expect(versions.map(\.attachments) == [[manifest]])
        }
    }

    /// A device that knows of no attachment sends none (the client sends `attachments` only when the note or its
    /// base has some): the answer carries the note's set, or that device would never learn of it (notes-sim seed 52:
    /// its cursor was past the version that added them).
    @Test func aChangeWithoutAttachmentsLearnsTheNotesAttachmentsFromTheAnswer() async throws {
        let server = try TestServer.make()
        try await server.application.test(.router) { client in
            let api = APIClient(http: client)
            let token = try await api.account("alice").token
            let uploaded = try await client.execute(
                uri: Endpoint.putChunk.path(hash: ChunkStoreConformance.address(Self.photo)), method: .put,
                headers: [.authorization: "Bearer \(token)", .contentType: ChunkRules.mediaType], body: ByteBuffer(bytes: Self.photo))
            #expect(uploaded.status == .created)
            let created = try api.decode(PushResponse.self, try await api.call(.push, token: token, rawJSON: Self.push(#""attachments":[\#(Self.manifestJSON())]"#)))
            let serverID = try #require(created.results[0].serverID)
            let manifest = try AttachmentManifest.decode(Data(Self.manifestJSON().utf8))
            // Another device's edit of the text, based on version 1, sending no attachments.
            let edit = #"{"changes":[{"clientID":"1","origin":"11","serverID":"\#(serverID)","editID":"7","text":"y","baseVersion":1,"baseText":"x"}]}"#
            let answer = try api.decode(PushResponse.self, try await api.call(.push, token: token, rawJSON: edit))
            #expect(answer.results[0].status == .updated)
            #expect(answer.results[0].attachments == [manifest], "the note keeps its attachment, and the answer says so")
            #expect(try await api.pullAll(token).map(\.attachments) == [[manifest]])
        }
    }

    /// Each hostile attachment field: 400 with a stable code naming the field, and not one change of the batch
    /// stored.
    @Test(arguments: [
        (#""attachments":[\#(manifestJSON(name: "../x"))]"#, APIErrorCode.invalidField, "changes[0].attachments[0].name"),
        (#""attachments":[\#(manifestJSON()),\#(manifestJSON())]"#, .invalidField, "changes[0].attachments[1].name"),
        (#""attachments":[\#(manifestJSON(("\"size\":3000", "\"size\":3000000")))]"#, .invalidField, "changes[0].attachments[0].chunks"),
        (#""attachments":[\#(manifestJSON(("\"size\":3000", "\"size\":3000,\"owner\":7")))]"#, .unknownField, "changes[0].attachments[0].owner"),
        (#""attachments":null"#, .invalidJSON, "changes[0].attachments"),
        (#""baseAttachments":{}"#, .invalidJSON, "changes[0].baseAttachments"),
        (#""chunkRefs":["ABC"]"#, .invalidHash, "changes[0].chunkRefs[0]"),
        (#""attachments":[\#((0...AttachmentRules.maxAttachmentsPerNote).map { manifestJSON(name: "f\($0)") }.joined(separator: ","))]"#, .invalidField, "changes[0].attachments"),
    ])
    func hostileAttachmentFieldsAreRefusedWithNothingStored(_ fields: String, _ code: APIErrorCode, _ field: String) async throws {
        let server = try TestServer.make()
        try await server.application.test(.router) { client in
            let api = APIClient(http: client)
            let token = try await api.account("alice").token
            // A valid change first in the batch: the whole push is refused, so it is not stored either.
            let body = #"{"changes":[{"clientID":"2","origin":"11","editID":"4","text":"fine"},"# + Self.push(fields).dropFirst(#"{"changes":["#.count)
            let response = try await api.call(.push, token: token, rawJSON: String(body))
            #expect(response.status == 400, "\(String(decoding: response.body.prefix(300), as: UTF8.self)) for \(body.prefix(200))")
            #expect(response.headers["content-type"] == "application/json")
            let error = try JSONDecoder().decode(APIErrorBody.self, from: response.body)
            #expect(error.code == code && error.field == field.replacingOccurrences(of: "changes[0]", with: "changes[1]"), "\(error)")
            #expect(try await api.pullAll(token).isEmpty)
        }
    }
}
