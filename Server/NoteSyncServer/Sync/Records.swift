import MiniFlake
import NoteSyncProtocol

/// An account as a ``NoteStore`` keeps it.
public struct AccountRecord: Sendable, Equatable {
    /// Minted by the server's generator.
    public var id: FlakeID
    /// The canonical (lowercased) username; unique.
    public var username: String
    /// The bcrypt hash of the password (never the password).
    public var passwordHash: String
    /// Unix milliseconds.
    public var createdAt: Int64
    /// When the operator disabled the account (`notesyncd users disable`), Unix milliseconds; nil while enabled. A
    /// disabled account cannot sign in and its sessions do not authenticate.
    public var disabledAt: Int64?

    public init(id: FlakeID, username: String, passwordHash: String, createdAt: Int64, disabledAt: Int64? = nil) {
        self.id = id
        self.username = username
        self.passwordHash = passwordHash
        self.createdAt = createdAt
        self.disabledAt = disabledAt
    }
}

/// A signed-in device: what a bearer token stands for.
public struct SessionRecord: Sendable, Equatable {
    /// Minted by the server's generator.
    public var id: FlakeID
    public var accountID: FlakeID
    /// Lowercase hex SHA-256 of the bearer token; the token itself is never stored.
    public var tokenHash: String
    /// At most ``SignInRequest/maxDeviceNameLength`` characters.
    public var deviceName: String?
    /// The installation ID the device reported when signing in.
    public var origin: FlakeID?
    /// When the device signed in, Unix milliseconds.
    public var createdAt: Int64
    /// When the session last made an authenticated request, Unix milliseconds, kept to the minute (see
    /// ``NoteStore/markSessionSeen(id:accountID:at:ifBefore:)``); nil until its first request after sign-in.
    public var lastSeenAt: Int64?

    public init(
        id: FlakeID, accountID: FlakeID, tokenHash: String, deviceName: String?, origin: FlakeID?, createdAt: Int64,
        lastSeenAt: Int64? = nil
    ) {
        self.id = id
        self.accountID = accountID
        self.tokenHash = tokenHash
        self.deviceName = deviceName
        self.origin = origin
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
    }
}

/// What an account stores, as the store keeps it: running totals updated by every push in its transaction, so a
/// quota check costs nothing per note.
public struct AccountUsage: Sendable, Equatable {
    /// Stored notes, tombstones included (a deleted note keeps a row so that other devices learn of the delete).
    public var noteCount: Int64
    /// UTF-8 bytes of the stored notes' texts (a tombstone's text is empty).
    public var textBytes: Int64
    /// UTF-8 bytes of the texts the account's applied edits keep for replays (``AppliedEdit/text``: the answers of
    /// `merged`, `conflict` and `kept` changes), until the retention purge removes them.
    public var replayTextBytes: Int64
    /// Bytes of the account's attachment chunks (``ChunkStore``), each counted once however many notes refer to it.
    public var chunkBytes: Int64

    public init(noteCount: Int64 = 0, textBytes: Int64 = 0, replayTextBytes: Int64 = 0, chunkBytes: Int64 = 0) {
        self.noteCount = noteCount
        self.textBytes = textBytes
        self.replayTextBytes = replayTextBytes
        self.chunkBytes = chunkBytes
    }

    /// What the byte limit counts: the notes' texts, the replay texts and the chunks.
    public var storedBytes: Int64 { textBytes + replayTextBytes + chunkBytes }
}

/// The per-account limits a push enforces (the daemon's `--max-notes-per-account` and `--max-bytes-per-account`).
///
/// A change that would take an account over either limit is `rejected` with `quota_exceeded`; a change that does not
/// grow what it is over (a delete, a shorter text) is always accepted, so an account over a lowered limit can shrink.
/// The byte limit counts the notes' texts, the texts kept for replays and the attachments' chunks
/// (``AccountUsage/storedBytes``).
public struct AccountQuota: Sendable, Equatable {
    /// Most stored notes per account, tombstones included.
    public var maxNotes: Int64
    /// Most bytes per account: the notes' texts, the texts their applied edits keep for replays, and the chunks of
    /// their attachments.
    public var maxTextBytes: Int64

    public init(maxNotes: Int64 = AccountQuota.default.maxNotes, maxTextBytes: Int64 = AccountQuota.default.maxTextBytes) {
        self.maxNotes = maxNotes
        self.maxTextBytes = maxTextBytes
    }

    /// 1,000,000 notes and 1 GiB of text: far beyond what a person writes, small enough that a hostile account cannot
    /// fill a server's disk.
    public static let `default` = AccountQuota(maxNotes: 1_000_000, maxTextBytes: 1 << 30)
    /// No limit (tests and tools that need none).
    public static let unlimited = AccountQuota(maxNotes: .max, maxTextBytes: .max)
}

/// The identity of an applied edit inside one account: its edit ID, the note it named and the installation that
/// pushed it (see ``AppliedEdit``).
public struct AppliedEditKey: Hashable, Sendable {
    public var editID: FlakeID
    public var noteKey: NoteKey
    /// The pushing installation, when known.
    public var pusher: FlakeID?
    public init(editID: FlakeID, noteKey: NoteKey, pusher: FlakeID?) {
        self.editID = editID
        self.noteKey = noteKey
        self.pusher = pusher
    }
}

/// The identity of a note inside one account: the creating device's client ID and that device's origin.
///
/// Two devices may mint the same client ID; their origins differ, so their notes never merge.
public struct NoteKey: Hashable, Sendable {
    public var clientID: FlakeID
    public var origin: FlakeID

    public init(clientID: FlakeID, origin: FlakeID) {
        self.clientID = clientID
        self.origin = origin
    }
}

/// A note as a ``NoteStore`` keeps it: its state at its latest change.
public struct StoredNote: Sendable, Equatable {
    public var accountID: FlakeID
    /// The canonical ID, minted by the server.
    public var serverID: FlakeID
    public var clientID: FlakeID
    public var origin: FlakeID
    /// 1 when created, +1 per accepted change.
    public var version: Int64
    /// "" for a tombstone.
    public var text: String
    public var deleted: Bool
    /// For a conflict copy: the server ID of the note it was split from.
    public var conflictOf: FlakeID?
    /// The account change sequence of the note's latest change; unique within the account.
    public var changeSeq: Int64
    /// Unix milliseconds (server clock; informational only, never used for ordering).
    public var createdAt: Int64
    /// Unix milliseconds (server clock; informational only, never used for ordering).
    public var updatedAt: Int64
    /// When the current content was edited, Unix milliseconds by the editing device's clock (the pushed
    /// ``NoteChange/editedAt``, else the server's time). Informational only, never used for ordering. Nil for notes
    /// written before the server stored it: ``updatedAt`` stands in.
    public var editedAt: Int64?

    public init(
        accountID: FlakeID, serverID: FlakeID, clientID: FlakeID, origin: FlakeID, version: Int64, text: String,
        deleted: Bool, conflictOf: FlakeID?, changeSeq: Int64, createdAt: Int64, updatedAt: Int64, editedAt: Int64? = nil
    ) {
        self.accountID = accountID
        self.serverID = serverID
        self.clientID = clientID
        self.origin = origin
        self.version = version
        self.text = text
        self.deleted = deleted
        self.conflictOf = conflictOf
        self.changeSeq = changeSeq
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.editedAt = editedAt
    }

    /// The note's `(clientID, origin)` key.
    public var key: NoteKey { NoteKey(clientID: clientID, origin: origin) }

    /// The note as a pull returns it.
    public var record: NoteRecord {
        var times = WireTime.Cache()
        return record(times: &times)
    }

    /// The note as a pull returns it, its times formatted through `times` (a page's notes share them). The one place
    /// a stored note becomes a wire record: a field of a note reaches the wire here.
    public func record(times: inout WireTime.Cache) -> NoteRecord {
        NoteRecord(
            serverID: serverID, clientID: clientID, origin: origin, version: version, text: text, deleted: deleted,
            conflictOf: conflictOf, updatedAt: times.format(unixMilliseconds: updatedAt),
            editedAt: times.format(unixMilliseconds: editedAt ?? updatedAt)
        )
    }
}

/// The stored outcome of an accepted change, keyed within the account by its edit ID and the note it named.
///
/// A change whose edit ID and note key (client ID, origin) are already here is a replay: the server answers with
/// this outcome and writes nothing. The note key is part of the identity because an edit ID is unique only per
/// installation: two devices sharing a MiniFlake instance number can mint the same edit ID in the same millisecond,
/// and one device's edit must never be taken for a replay of the other's.
public struct AppliedEdit: Sendable, Equatable {
    public var editID: FlakeID
    /// The note the change named (its client ID and origin as pushed).
    public var noteKey: NoteKey
    /// The installation that pushed it (see ``PushContext/pusher``).
    public var pusher: FlakeID?
    /// Never ``ChangeStatus/rejected`` (rejected changes store nothing).
    public var status: ChangeStatus
    /// Absent only for `unchanged` when a delete named no stored note.
    public var serverID: FlakeID?
    /// The note's version right after the change.
    public var version: Int64?
    /// The text the original answer carried (`merged`, `conflict`, `kept`), nil when it carried none: a replay
    /// answers exactly the original result, whatever the note holds now.
    public var text: String?
    /// For `conflict`: the copy that took the pushed text.
    public var conflict: ConflictCopy?
    /// Unix milliseconds.
    public var createdAt: Int64

    public init(
        editID: FlakeID, noteKey: NoteKey, pusher: FlakeID? = nil, status: ChangeStatus, serverID: FlakeID?,
        version: Int64?, text: String? = nil, conflict: ConflictCopy?, createdAt: Int64
    ) {
        self.editID = editID
        self.noteKey = noteKey
        self.pusher = pusher
        self.status = status
        self.serverID = serverID
        self.version = version
        self.text = text
        self.conflict = conflict
        self.createdAt = createdAt
    }
}

/// One page of an account's changes, read in one consistent snapshot.
public struct PullPage: Sendable, Equatable {
    /// Notes with `changeSeq` greater than the requested one, ascending, at most the requested limit.
    public var notes: [StoredNote]
    /// The account's change sequence in the same snapshot (0 for an account with no changes).
    public var currentSequence: Int64

    public init(notes: [StoredNote], currentSequence: Int64) {
        self.notes = notes
        self.currentSequence = currentSequence
    }
}

/// What a store needs besides the batch to apply a push: the limits, the server time and the ID source.
public struct PushContext: Sendable {
    public var limits: SyncLimits
    /// Server time in Unix milliseconds, stamped on written notes (never used for ordering).
    public var now: Int64
    /// Mints server IDs (new notes, conflict copies and their client IDs).
    public var mintID: @Sendable () throws -> FlakeID
    /// The pushing installation (its session's origin, else the session ID): part of an applied edit's identity,
    /// because edit IDs are unique only per installation.
    public var pusher: FlakeID?
    /// The account's limits (see ``AccountQuota``).
    public var quota: AccountQuota

    public init(
        limits: SyncLimits, now: Int64, pusher: FlakeID? = nil, quota: AccountQuota = .default,
        mintID: @escaping @Sendable () throws -> FlakeID
    ) {
        self.limits = limits
        self.now = now
        self.pusher = pusher
        self.quota = quota
        self.mintID = mintID
    }
}
