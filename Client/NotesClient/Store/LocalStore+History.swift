import GRDB
import MiniFlake
import NoteSyncProtocol

// The history cache (`note_versions`): the versions of a note the server sent, kept so that asking again is local
// and fetches only the versions after the last one kept.

extension LocalStore.Transaction {
    /// The versions of note `noteID` kept here for its server note `serverID`, oldest first. Versions kept for
    /// another server ID (the note was matched to another server note since) are not returned.
    func cachedVersions(ofNote noteID: Int64, serverID: FlakeID) throws -> [NoteHistory.Version] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT version, text, deleted, tags, pinned, archived, edited_at, saved_at, device, attachments FROM note_versions
                    WHERE note_id = ? AND server_id = ? ORDER BY version
                    """),
            arguments: [noteID, serverID.rawValue])
        var versions: [NoteHistory.Version] = []
        while let row = try rows.next() {
            versions.append(
                NoteHistory.Version(
                    version: row[0], text: row.text(at: 1), isDeleted: row[2], tags: StoredTags.names(row[3]), isPinned: row[4],
                    isArchived: row[5], editedAt: row[6], savedAt: row[7], device: row[8],
                    attachments: StoredAttachments.manifests(row[9])))
        }
        return versions
    }

    /// The last version of note `noteID` kept here for `serverID`; nil when none is.
    func lastCachedVersion(ofNote noteID: Int64, serverID: FlakeID) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT MAX(version) FROM note_versions WHERE note_id = ? AND server_id = ?"),
            arguments: [noteID, serverID.rawValue])
    }

    /// Keeps versions of note `noteID` fetched for `serverID` (one prepared statement for them all), and forgets
    /// those kept for another server ID.
    func cacheVersions(_ versions: [NoteHistory.Version], ofNote noteID: Int64, serverID: FlakeID) throws {
        try db.cachedStatement(sql: "DELETE FROM note_versions WHERE note_id = ? AND server_id <> ?")
            .execute(arguments: [noteID, serverID.rawValue])
        let insert = try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO note_versions (note_id, server_id, version, text, deleted, tags, pinned, archived,
                edited_at, saved_at, device, attachments) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for version in versions {
            try insert.execute(arguments: [
                noteID, serverID.rawValue, version.version, version.text.stored, version.isDeleted, StoredTags.text(version.tags),
                version.isPinned, version.isArchived, version.editedAt, version.savedAt, version.device,
                StoredAttachments.text(version.attachments),
            ])
        }
    }
}
