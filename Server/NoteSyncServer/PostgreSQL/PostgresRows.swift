import MiniFlake
import NIOCore
import NoteSyncProtocol
import PostgresNIO

/// How the PostgreSQL store reads note and applied-edit rows.
enum PostgresRows {
    static let noteColumns =
        "server_id, account_id, client_id, origin, version, text, deleted, conflict_of, change_seq, created_at, updated_at, edited_at"

    typealias NoteRow = (Int64, Int64, Int64, Int64, Int64, ByteBuffer, Bool, Int64?, Int64, Int64, Int64, Int64?)

    static func note(_ row: NoteRow) throws -> StoredNote {
        let (serverID, accountID, clientID, origin, version, text, deleted, conflictOf, changeSeq, createdAt, updatedAt, editedAt) = row
        return StoredNote(
            accountID: try flake(accountID), serverID: try flake(serverID), clientID: try flake(clientID),
            origin: try flake(origin), version: version, text: String(buffer: text), deleted: deleted,
            conflictOf: try conflictOf.map(flake), changeSeq: changeSeq, createdAt: createdAt, updatedAt: updatedAt,
            editedAt: editedAt
        )
    }

    /// The columns of an applied-edit row, in the order of ``AppliedEditRow``.
    static let appliedEditColumns =
        "edit_id, status, server_id, version, conflict_server_id, conflict_client_id, created_at, client_id, origin, pusher, text"

    typealias AppliedEditRow = (Int64, String, Int64?, Int64?, Int64?, Int64?, Int64, Int64, Int64, Int64, ByteBuffer?)

    static func appliedEdit(_ row: AppliedEditRow) throws -> AppliedEdit {
        let (editID, statusText, serverID, version, conflictServerID, conflictClientID, createdAt, clientID, origin, pusher, text) = row
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
            version: version, text: text.map { String(buffer: $0) }, conflict: conflict, createdAt: createdAt
        )
    }
}

/// A stored value the PostgreSQL store cannot read back (a server fault).
public struct PostgresStoreError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
