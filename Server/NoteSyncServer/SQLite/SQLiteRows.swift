import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol

/// How the SQLite store reads and writes note and applied-edit rows. A column of a note is spelt here and in the
/// migrations, nowhere else.
///
/// Note texts are stored as UTF-8 BLOBs: binding a Swift string as TEXT stops at the first NUL character, which would
/// silently truncate a note. The empty text is stored as NULL (an empty blob binds as NULL in SQLite).
enum SQLiteRows {
    /// The columns of a note row, in the order ``note(_:at:)`` reads them and ``insertNote`` writes them.
    static let noteColumns =
        "server_id, account_id, client_id, origin, version, text, deleted, conflict_of, change_seq, created_at, updated_at, edited_at, "
        + "tags, pinned, archived, edit_id, attachments, chunk_refs"

    /// Inserts a note (``insertArguments(_:)``).
    static let insertNote = "INSERT INTO notes (\(noteColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

    /// The values of ``insertNote``, in ``noteColumns`` order.
    static func insertArguments(_ note: StoredNote) -> StatementArguments {
        [
            note.serverID.rawValue, note.accountID.rawValue, note.clientID.rawValue, note.origin.rawValue, note.version,
            textBlob(note.text), note.deleted, note.conflictOf?.rawValue, note.changeSeq, note.createdAt, note.updatedAt,
            note.editedAt, TagsColumn.text(note.tags), note.pinned, note.archived, note.editID?.rawValue,
            AttachmentsColumn.text(note.attachments), ChunkRefsColumn.text(note.chunkRefs),
        ]
    }

    /// Updates what a change changes in a stored note (``updateArguments(_:)``); its identity and creation stay.
    static let updateNote = """
        UPDATE notes SET version = ?, text = ?, deleted = ?, change_seq = ?, updated_at = ?, edited_at = ?, tags = ?, pinned = ?,
                         archived = ?, edit_id = ?, attachments = ?, chunk_refs = ?
        WHERE server_id = ? AND account_id = ?
        """

    /// The values of ``updateNote``.
    static func updateArguments(_ note: StoredNote) -> StatementArguments {
        [
            note.version, textBlob(note.text), note.deleted, note.changeSeq, note.updatedAt, note.editedAt, TagsColumn.text(note.tags),
            note.pinned, note.archived, note.editID?.rawValue, AttachmentsColumn.text(note.attachments),
            ChunkRefsColumn.text(note.chunkRefs), note.serverID.rawValue, note.accountID.rawValue,
        ]
    }

    /// Appends the notes a statement selects (``noteColumns`` first).
    static func fetchNotes(_ statement: Statement, _ arguments: StatementArguments, into notes: inout [StoredNote]) throws {
        _ = try fetchNotes(statement, arguments, into: &notes, maxBytes: Int.max)
    }

    /// Appends the rows' notes, stopping after the one whose text brings the texts read to `maxBytes` or beyond;
    /// returns whether it stopped there (rows were left).
    static func fetchNotes(
        _ statement: Statement, _ arguments: StatementArguments, into notes: inout [StoredNote], maxBytes: Int
    ) throws -> Bool {
        let rows = try Row.fetchCursor(statement, arguments: arguments)
        var bytes = 0
        while let row = try rows.next() {
            let note = try note(row, at: 0)
            notes.append(note)
            bytes += note.text.utf8.count
            if bytes >= maxBytes { return try rows.next() != nil }
        }
        return false
    }

    /// The note in the row's ``noteColumns`` starting at column `offset`.
    static func note(_ row: Row, at offset: Int) throws -> StoredNote {
        let conflictOf: Int64? = row[offset + 7]
        let editID: Int64? = row[offset + 15]
        return StoredNote(
            accountID: try flake(row[offset + 1]), serverID: try flake(row[offset]), clientID: try flake(row[offset + 2]),
            origin: try flake(row[offset + 3]), version: row[offset + 4], text: try text(row, offset + 5),
            deleted: row[offset + 6], conflictOf: try conflictOf.map(flake), changeSeq: row[offset + 8],
            createdAt: row[offset + 9], updatedAt: row[offset + 10], editedAt: row[offset + 11], tags: TagsColumn.tags(row[offset + 12]),
            pinned: row[offset + 13], archived: row[offset + 14], editID: try editID.map(flake),
            attachments: try AttachmentsColumn.attachments(row[offset + 16]), chunkRefs: ChunkRefsColumn.hashes(row[offset + 17])
        )
    }


    /// A note text as it is stored.
    static func textBlob(_ text: String) -> Data {
        Data(text.utf8)
    }

    private static func text(_ row: Row, _ index: Int) throws -> String {
        try row.withUnsafeData(atIndex: index) { data in data.map { String(decoding: $0, as: UTF8.self) } ?? "" }
    }

    /// The columns of an applied-edit row, in the order ``appliedEdit(_:)`` reads them.
    static let appliedEditColumns =
        "edit_id, status, server_id, version, conflict_server_id, conflict_client_id, created_at, client_id, origin, pusher, text, "
        + "tags, pinned, archived"

    /// The applied edit in the row's ``appliedEditColumns``. `text` is a blob: NULL when the answer had no text.
    static func appliedEdit(_ row: Row) throws -> AppliedEdit {
        let status: String = row[1]
        guard let status = ChangeStatus(rawValue: status) else {
            throw DatabaseError(message: "applied_edits.status holds an unknown status '\(status)'")
        }
        let serverID: Int64? = row[2]
        let conflictServerID: Int64? = row[4]
        let conflictClientID: Int64? = row[5]
        var conflict: ConflictCopy?
        if let conflictServerID, let conflictClientID {
            conflict = ConflictCopy(serverID: try flake(conflictServerID), clientID: try flake(conflictClientID))
        }
        return AppliedEdit(
            editID: try flake(row[0]), noteKey: NoteKey(clientID: try flake(row[7]), origin: try flake(row[8])),
            pusher: (row[9] as Int64) == 0 ? nil : try flake(row[9]),
            status: status, serverID: try serverID.map(flake), version: row[3],
            text: row.hasNull(atIndex: 10) ? nil : try text(row, 10), conflict: conflict,
            tags: (row[11] as String?).map(TagsColumn.tags), pinned: row[12], archived: row[13], createdAt: row[6]
        )
    }

    // MARK: - Versions

    /// The columns of a version row, in the order ``version(_:)`` reads them and ``insertVersions(count:)`` writes them.
    static let versionColumns =
        "account_id, server_id, version, text, deleted, tags, pinned, archived, edited_at, saved_at, device, edit_id, attachments, "
        + "chunk_refs"

    /// Inserts `count` versions in one statement (``versionArguments(_:)`` of each, in order). The empty text binds as
    /// NULL and is stored as an empty blob.
    static func insertVersions(count: Int) -> String {
        let row = "(?, ?, ?, COALESCE(?, X''), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        return "INSERT INTO note_versions (\(versionColumns)) VALUES " + repeatElement(row, count: count).joined(separator: ", ")
    }

    /// The values of one row of ``insertVersions(count:)``.
    static func versionArguments(_ version: StoredVersion) -> [(any DatabaseValueConvertible)?] {
        [
            version.accountID.rawValue, version.serverID.rawValue, version.version, textBlob(version.text), version.deleted,
            TagsColumn.text(version.tags), version.pinned, version.archived, version.editedAt, version.savedAt, version.device,
            version.editID?.rawValue, AttachmentsColumn.text(version.attachments), ChunkRefsColumn.text(version.chunkRefs),
        ]
    }

    /// The version in the row's ``versionColumns``.
    static func version(_ row: Row) throws -> StoredVersion {
        let editID: Int64? = row[11]
        return StoredVersion(
            accountID: try flake(row[0]), serverID: try flake(row[1]), version: row[2], text: try text(row, 3), deleted: row[4],
            tags: TagsColumn.tags(row[5]), pinned: row[6], archived: row[7], editedAt: row[8], savedAt: row[9], device: row[10],
            editID: try editID.map(flake), attachments: try AttachmentsColumn.attachments(row[12]),
            chunkRefs: ChunkRefsColumn.hashes(row[13]))
    }
}
