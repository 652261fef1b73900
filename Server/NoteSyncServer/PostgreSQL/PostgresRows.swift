import MiniFlake
import NIOCore
import NoteSyncProtocol
import PostgresNIO

/// How the PostgreSQL store reads and writes note and applied-edit rows: their columns, their decoding, and the one
/// statement that writes a push. A column of a note is spelt here and in the migrations, nowhere else.
enum PostgresRows {
    /// The columns of a note row, in the order of ``NoteRow``.
    static let noteColumns =
        "server_id, account_id, client_id, origin, version, text, deleted, conflict_of, change_seq, created_at, updated_at, edited_at, "
        + "tags, pinned, archived, edit_id, attachments, chunk_refs"

    /// ``noteColumns``, each qualified by a table's alias (`n.server_id, n.account_id, ...`).
    static func noteColumns(of alias: String) -> String {
        noteColumns.split(separator: ", ").map { "\(alias).\($0)" }.joined(separator: ", ")
    }

    typealias NoteRow = (
        Int64, Int64, Int64, Int64, Int64, ByteBuffer, Bool, Int64?, Int64, Int64, Int64, Int64?, String, Bool, Bool, Int64?,
        String, String
    )

    /// A row of a pull (``PostgresNoteStore``): the account's change sequence and note count, how many rows the page
    /// read before its byte bound, then ``noteColumns``; the last two are NULL in the one row of a page without notes
    /// (a `LEFT JOIN`).
    typealias PullRow = (
        Int64, Int64, Int64?, Int64?, Int64?, Int64?, Int64?, Int64?, ByteBuffer?, Bool?, Int64?, Int64?, Int64?, Int64?, Int64?,
        String?, Bool?, Bool?, Int64?, String?, String?
    )

    /// A pull's row: the account's change sequence and note count, the rows read, and the note, if it has one.
    static func pulled(_ row: PullRow) throws -> (sequence: Int64, noteCount: Int64, rowsRead: Int64, note: StoredNote?) {
        let (
            sequence, noteCount, rowsRead, serverID, accountID, clientID, origin, version, text, deleted, conflictOf, changeSeq, createdAt,
            updatedAt, editedAt, tags, pinned, archived, editID, attachments, chunkRefs
        ) = row
        guard let serverID, let accountID, let clientID, let origin, let version, let text, let deleted, let changeSeq, let createdAt,
            let updatedAt, let tags, let pinned, let archived, let attachments, let chunkRefs
        else { return (sequence, noteCount, rowsRead ?? 0, nil) }
        return (
            sequence, noteCount, rowsRead ?? 0,
            try note(
                (
                    serverID, accountID, clientID, origin, version, text, deleted, conflictOf, changeSeq, createdAt, updatedAt, editedAt,
                    tags, pinned, archived, editID, attachments, chunkRefs
                ))
        )
    }

    /// The note of a ``NoteRow``.
    static func note(_ row: NoteRow) throws -> StoredNote {
        let (
            serverID, accountID, clientID, origin, version, text, deleted, conflictOf, changeSeq, createdAt, updatedAt, editedAt, tags,
            pinned, archived, editID, attachments, chunkRefs
        ) = row
        return StoredNote(
            accountID: try flake(accountID), serverID: try flake(serverID), clientID: try flake(clientID),
            origin: try flake(origin), version: version, text: String(buffer: text), deleted: deleted,
            conflictOf: try conflictOf.map(flake), changeSeq: changeSeq, createdAt: createdAt, updatedAt: updatedAt,
            editedAt: editedAt, tags: TagsColumn.tags(tags), pinned: pinned, archived: archived, editID: try editID.map(flake),
            attachments: try AttachmentsColumn.attachments(attachments), chunkRefs: ChunkRefsColumn.hashes(chunkRefs)
        )
    }

    /// The columns of an applied-edit row, in the order of ``AppliedEditRow``.
    static let appliedEditColumns =
        "edit_id, status, server_id, version, conflict_server_id, conflict_client_id, created_at, client_id, origin, pusher, text, "
        + "tags, pinned, archived"

    typealias AppliedEditRow = (
        Int64, String, Int64?, Int64?, Int64?, Int64?, Int64, Int64, Int64, Int64, ByteBuffer?, String?, Bool?, Bool?
    )

    static func appliedEdit(_ row: AppliedEditRow) throws -> AppliedEdit {
        let (
            editID, statusText, serverID, version, conflictServerID, conflictClientID, createdAt, clientID, origin, pusher, text, tags,
            pinned, archived
        ) = row
        guard let status = ChangeStatus(rawValue: statusText) else {
            throw PostgresStoreError("applied_edits.status holds an unknown status '\(statusText)'")
        }
        var conflict: ConflictCopy?
        if let conflictServerID, let conflictClientID {
            conflict = ConflictCopy(serverID: try flake(conflictServerID), clientID: try flake(conflictClientID))
        }
        return AppliedEdit(
            editID: try flake(editID), noteKey: NoteKey(clientID: try flake(clientID), origin: try flake(origin)),
            pusher: pusher == 0 ? nil : try flake(pusher), status: status, serverID: try serverID.map(flake),
            version: version, text: text.map { String(buffer: $0) }, conflict: conflict, tags: tags.map(TagsColumn.tags),
            pinned: pinned, archived: archived, createdAt: createdAt
        )
    }

    // MARK: - Versions

    /// The columns of a version row, in the order of ``VersionRow``.
    static let versionColumns =
        "account_id, server_id, version, text, deleted, tags, pinned, archived, edited_at, saved_at, device, edit_id, attachments, "
        + "chunk_refs"

    typealias VersionRow = (Int64, Int64, Int64, ByteBuffer, Bool, String, Bool, Bool, Int64, Int64, String?, Int64?, String, String)

    static func version(_ row: VersionRow) throws -> StoredVersion {
        let (accountID, serverID, version, text, deleted, tags, pinned, archived, editedAt, savedAt, device, editID, attachments, chunkRefs) =
            row
        return StoredVersion(
            accountID: try flake(accountID), serverID: try flake(serverID), version: version, text: String(buffer: text),
            deleted: deleted, tags: TagsColumn.tags(tags), pinned: pinned, archived: archived, editedAt: editedAt, savedAt: savedAt,
            device: device, editID: try editID.map(flake), attachments: try AttachmentsColumn.attachments(attachments),
            chunkRefs: ChunkRefsColumn.hashes(chunkRefs))
    }

    // MARK: - The push's write

    /// The one statement that writes a push's plan (``PostgresPushTransaction``): every insert, update and applied
    /// edit, and the account's sequence and totals; nil when there is nothing to write. Listeners hear of it
    /// (`NOTIFY`) when it wrote a note. A note's columns are written here and read by ``note(_:)``.
    static func write(_ plan: PushPlanner.Plan, accountID: FlakeID) -> PostgresQuery? {
        if plan.writes.isEmpty && plan.newEdits.isEmpty { return nil }
        let account = accountID.rawValue
        // Every insert, update and edit in one statement. Data-modifying CTEs always run to completion
        // whether or not the main statement reads them, and they touch disjoint rows.
        var new = NoteColumns()
        var changed = NoteColumns()
        for write in plan.writes {
            if write.isNew { new.append(write.note) } else { changed.append(write.note) }
        }
        var edits = EditColumns()
        for edit in plan.newEdits { edits.append(edit) }
        var versions = VersionColumns()
        for version in plan.versions { versions.append(version) }
        // Listeners learn of written notes only (a push that kept a replay text alone changed nothing to pull).
        let notify = plan.writes.isEmpty ? "" : "RETURNING pg_notify('\(PostgresChangeListener.channel)', id::text)"
        return """
            WITH inserted AS (
                INSERT INTO notes (server_id, account_id, client_id, origin, version, text, deleted, conflict_of,
                                   change_seq, created_at, updated_at, edited_at, tags, pinned, archived, edit_id,
                                   attachments, chunk_refs)
                SELECT s, \(account), c, o, v, t, d, NULLIF(cf, 0), q, ca, ua, NULLIF(ea, \(NoteColumns.noTime)), tg, pn, ar,
                       NULLIF(ei, 0), at, cr
                FROM unnest(\(new.serverID)::int8[], \(new.clientID)::int8[], \(new.origin)::int8[],
                            \(new.version)::int8[], \(new.text)::bytea[], \(new.deleted)::bool[],
                            \(new.conflictOf)::int8[], \(new.changeSeq)::int8[], \(new.createdAt)::int8[],
                            \(new.updatedAt)::int8[], \(new.editedAt)::int8[], \(new.tags)::text[], \(new.pinned)::bool[],
                            \(new.archived)::bool[], \(new.editID)::int8[], \(new.attachments)::text[],
                            \(new.chunkRefs)::text[])
                     AS u(s, c, o, v, t, d, cf, q, ca, ua, ea, tg, pn, ar, ei, at, cr)
            ), updated AS (
                UPDATE notes SET version = u.v, text = u.t, deleted = u.d, change_seq = u.q, updated_at = u.ua,
                                 edited_at = NULLIF(u.ea, \(NoteColumns.noTime)), tags = u.tg, pinned = u.pn, archived = u.ar,
                                 edit_id = NULLIF(u.ei, 0), attachments = u.at, chunk_refs = u.cr
                FROM unnest(\(changed.serverID)::int8[], \(changed.version)::int8[], \(changed.text)::bytea[],
                            \(changed.deleted)::bool[], \(changed.changeSeq)::int8[], \(changed.updatedAt)::int8[],
                            \(changed.editedAt)::int8[], \(changed.tags)::text[], \(changed.pinned)::bool[],
                            \(changed.archived)::bool[], \(changed.editID)::int8[], \(changed.attachments)::text[],
                            \(changed.chunkRefs)::text[])
                     AS u(s, v, t, d, q, ua, ea, tg, pn, ar, ei, at, cr)
                WHERE notes.server_id = u.s AND notes.account_id = \(account)
            ), edits AS (
                INSERT INTO applied_edits (account_id, edit_id, status, server_id, version, conflict_server_id,
                                           conflict_client_id, created_at, client_id, origin, pusher, text, tags, pinned,
                                           archived)
                SELECT \(account), e, st, NULLIF(s, 0), NULLIF(v, 0), NULLIF(cs, 0), NULLIF(cc, 0), ca, c, o, p,
                       CASE WHEN ht THEN tx END, CASE WHEN hg THEN tg END, CASE fp WHEN 2 THEN NULL ELSE fp = 1 END,
                       CASE fa WHEN 2 THEN NULL ELSE fa = 1 END
                FROM unnest(\(edits.editID)::int8[], \(edits.status)::text[], \(edits.serverID)::int8[],
                            \(edits.version)::int8[], \(edits.conflictServerID)::int8[],
                            \(edits.conflictClientID)::int8[], \(edits.createdAt)::int8[], \(edits.clientID)::int8[],
                            \(edits.origin)::int8[], \(edits.pusher)::int8[], \(edits.hasText)::bool[],
                            \(edits.text)::bytea[], \(edits.hasTags)::bool[], \(edits.tags)::text[], \(edits.pinned)::int8[],
                            \(edits.archived)::int8[])
                     AS u(e, st, s, v, cs, cc, ca, c, o, p, ht, tx, hg, tg, fp, fa)
            ), versions AS (
                INSERT INTO note_versions (\(unescaped: versionColumns))
                SELECT \(account), s, v, t, d, tg, pn, ar, ea, sa, CASE WHEN hd THEN dv END, NULLIF(ei, 0), at, cr
                FROM unnest(\(versions.serverID)::int8[], \(versions.version)::int8[], \(versions.text)::bytea[],
                            \(versions.deleted)::bool[], \(versions.tags)::text[], \(versions.pinned)::bool[],
                            \(versions.archived)::bool[], \(versions.editedAt)::int8[], \(versions.savedAt)::int8[],
                            \(versions.hasDevice)::bool[], \(versions.device)::text[], \(versions.editID)::int8[],
                            \(versions.attachments)::text[], \(versions.chunkRefs)::text[])
                     AS u(s, v, t, d, tg, pn, ar, ea, sa, hd, dv, ei, at, cr)
            )
            UPDATE accounts SET change_seq = \(plan.newSequence), note_count = \(plan.newUsage.noteCount),
                                text_bytes = \(plan.newUsage.textBytes), replay_text_bytes = \(plan.newUsage.replayTextBytes),
                                history_bytes = \(plan.newUsage.historyBytes)
            WHERE id = \(account) AND (change_seq <> \(plan.newSequence) OR replay_text_bytes <> \(plan.newUsage.replayTextBytes)
                                      OR history_bytes <> \(plan.newUsage.historyBytes))
            \(unescaped: notify)
            """
    }

    /// Notes as column arrays, for `unnest`. Absent values are 0 (IDs are positive), or ``noTime`` for an edit time,
    /// turned back into NULL in SQL.
    struct NoteColumns {
        var serverID: [Int64] = [], clientID: [Int64] = [], origin: [Int64] = [], version: [Int64] = []
        var text: [ByteBuffer] = [], deleted: [Bool] = [], conflictOf: [Int64] = [], changeSeq: [Int64] = []
        var createdAt: [Int64] = [], updatedAt: [Int64] = [], editedAt: [Int64] = []
        var tags: [String] = [], pinned: [Bool] = [], archived: [Bool] = [], editID: [Int64] = []
        var attachments: [String] = [], chunkRefs: [String] = []

        /// Stands for an absent edit time (no ``WireTime`` comes near it).
        static let noTime = Int64.min

        mutating func append(_ note: StoredNote) {
            serverID.append(note.serverID.rawValue)
            clientID.append(note.clientID.rawValue)
            origin.append(note.origin.rawValue)
            version.append(note.version)
            text.append(ByteBuffer(string: note.text))
            deleted.append(note.deleted)
            conflictOf.append(note.conflictOf?.rawValue ?? 0)
            changeSeq.append(note.changeSeq)
            createdAt.append(note.createdAt)
            updatedAt.append(note.updatedAt)
            editedAt.append(note.editedAt ?? Self.noTime)
            tags.append(TagsColumn.text(note.tags))
            pinned.append(note.pinned)
            archived.append(note.archived)
            editID.append(note.editID?.rawValue ?? 0)
            attachments.append(AttachmentsColumn.text(note.attachments))
            chunkRefs.append(ChunkRefsColumn.text(note.chunkRefs))
        }
    }

    /// Versions as column arrays, for `unnest`; an absent device is an empty one with `hasDevice` false.
    struct VersionColumns {
        var serverID: [Int64] = [], version: [Int64] = [], text: [ByteBuffer] = [], deleted: [Bool] = []
        var tags: [String] = [], pinned: [Bool] = [], archived: [Bool] = [], editedAt: [Int64] = [], savedAt: [Int64] = []
        var hasDevice: [Bool] = [], device: [String] = [], editID: [Int64] = []
        var attachments: [String] = [], chunkRefs: [String] = []

        mutating func append(_ version: StoredVersion) {
            serverID.append(version.serverID.rawValue)
            self.version.append(version.version)
            text.append(ByteBuffer(string: version.text))
            deleted.append(version.deleted)
            tags.append(TagsColumn.text(version.tags))
            pinned.append(version.pinned)
            archived.append(version.archived)
            editedAt.append(version.editedAt)
            savedAt.append(version.savedAt)
            hasDevice.append(version.device != nil)
            device.append(version.device ?? "")
            editID.append(version.editID?.rawValue ?? 0)
            attachments.append(AttachmentsColumn.text(version.attachments))
            chunkRefs.append(ChunkRefsColumn.text(version.chunkRefs))
        }
    }

    /// Applied edits as column arrays, for `unnest`. Absent values are 0 (IDs and versions are positive); an absent
    /// text (or set of tags) is an empty one with `hasText` (`hasTags`) false; a flag is 1 (true), 0 (false) or 2
    /// (absent).
    struct EditColumns {
        var editID: [Int64] = [], status: [String] = [], serverID: [Int64] = [], version: [Int64] = []
        var conflictServerID: [Int64] = [], conflictClientID: [Int64] = [], createdAt: [Int64] = []
        var clientID: [Int64] = [], origin: [Int64] = [], pusher: [Int64] = []
        var hasText: [Bool] = [], text: [ByteBuffer] = []
        var hasTags: [Bool] = [], tags: [String] = [], pinned: [Int64] = [], archived: [Int64] = []

        mutating func append(_ edit: AppliedEdit) {
            editID.append(edit.editID.rawValue)
            status.append(edit.status.rawValue)
            serverID.append(edit.serverID?.rawValue ?? 0)
            version.append(edit.version ?? 0)
            conflictServerID.append(edit.conflict?.serverID.rawValue ?? 0)
            conflictClientID.append(edit.conflict?.clientID.rawValue ?? 0)
            createdAt.append(edit.createdAt)
            clientID.append(edit.noteKey.clientID.rawValue)
            origin.append(edit.noteKey.origin.rawValue)
            pusher.append(edit.pusher?.rawValue ?? 0)
            hasText.append(edit.text != nil)
            text.append(ByteBuffer(string: edit.text ?? ""))
            hasTags.append(edit.tags != nil)
            tags.append(edit.tags.map(TagsColumn.text) ?? "")
            pinned.append(edit.pinned.map { $0 ? 1 : 0 } ?? 2)
            archived.append(edit.archived.map { $0 ? 1 : 0 } ?? 2)
        }
    }
}

/// A stored value the PostgreSQL store cannot read back (a server fault).
public struct PostgresStoreError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
