import Foundation
import GRDB
import NoteSyncProtocol

/// A note's attachments as the store keeps them (`notes.attachments` and `base_attachments`, the outbox's, the history
/// cache's): a JSON array of their manifests sorted by name, each written by ``AttachmentManifest/encodedJSON()`` (keys
/// sorted), '' for none. Equal sets are always stored as equal texts, so SQL compares them
/// (`attachments IS NOT base_attachments`), as ``StoredTags`` does for tags.
enum StoredAttachments {
    /// The stored form of `manifests` (any order: they are sorted by name here).
    static func text(_ manifests: [AttachmentManifest]) -> String {
        guard !manifests.isEmpty else { return "" }
        var data = Data("[".utf8)
        for (index, manifest) in canonical(manifests).enumerated() {
            if index > 0 { data.append(UInt8(ascii: ",")) }
            data.append(manifest.encodedJSON())
        }
        data.append(UInt8(ascii: "]"))
        return String(decoding: data, as: UTF8.self)
    }

    /// The manifests of a stored form ([] for '' and NULL, and for a value that is not a JSON array of manifests, which
    /// only a damaged database holds).
    static func manifests(_ text: String?) -> [AttachmentManifest] {
        guard let text, !text.isEmpty else { return [] }
        return (try? WireJSON.decoder().decode([AttachmentManifest].self, from: Data(text.utf8))) ?? []
    }

    /// `manifests` in the order the store keeps them, the server's (``AttachmentRules/sorted(_:)``: by name as UTF-8
    /// bytes; names are unique within a note).
    static func canonical(_ manifests: [AttachmentManifest]) -> [AttachmentManifest] {
        AttachmentRules.sorted(manifests)
    }
}

extension LocalStore.Transaction {
    /// The chunks of the attachments of every note (of any owner) whose attachments differ from what was last synced
    /// of them: what the chunk cache must keep until a sync sent them (``ChunkCache/prune(now:keeping:)``).
    func unsyncedAttachmentChunks() throws -> Set<ContentHash> {
        let rows = try String.fetchCursor(
            db.cachedStatement(sql: "SELECT attachments FROM notes WHERE attachments <> '' AND attachments IS NOT base_attachments"))
        var chunks = Set<ContentHash>()
        while let text = try rows.next() {
            for manifest in StoredAttachments.manifests(text) { chunks.formUnion(manifest.chunks) }
        }
        return chunks
    }
}
