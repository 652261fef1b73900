import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

// The records a store keeps. Only this module builds them (the stores, the planners and the services; its tests
// import it `@testable`), so most have no hand-written initializer: the memberwise one, in the order the fields are
// declared, with the defaults the fields declare.

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
    /// Where the account stands with end-to-end encryption (plaintext for every account made before it).
    public var encryption: EncryptionState = .plaintext
    /// The account key's current generation; 0 for a plaintext account.
    public var keyGeneration: UInt32 = 0
    /// The keys of an encrypted account, written with it by ``NoteStore/createAccount(_:)`` (and an invite's
    /// sign-up) in the same transaction. Reads leave it nil: ``EncryptionStore/encryptionKeys(accountID:)`` reads
    /// them.
    public var keys: AccountKeys?
}

/// The key material the server keeps for an encrypted account (`account_keys`): opaque blobs it can check the form
/// of but never open (SECURITY.md, "What the server stores").
public struct AccountKeys: Sendable, Equatable {
    /// The public Argon2id parameters (salt and cost) the account's devices derive the AuthKey and WrapKey with.
    public var kdf: KDFParameters
    /// The current generation wrapped by the password's WrapKey.
    public var wrappedKey: WrappedAccountKey
    /// Generation 1 wrapped by the recovery key.
    public var recoveryWrappedKey: WrappedAccountKey
    /// The recovery key's public key (hand-overs of later generations are sealed to it).
    public var recoveryPublicKey: DevicePublicKey
    /// The password's public key (hand-overs of later generations are sealed to it).
    public var passwordPublicKey: DevicePublicKey
}

/// Who a stored key hand-over is sealed to (`key_handovers.recipient`).
public enum HandoverRecipient: Sendable, Hashable {
    /// A session's device public key.
    case session(FlakeID)
    /// The recovery key's public key.
    case recoveryKey
    /// The password's public key.
    case password
}

/// The key material of a range of generations (``EncryptionStore/keyChain(accountID:sessionID:generations:)``).
public struct KeyChain: Sendable, Equatable {
    /// Generation `g` wrapped by `g + 1`, for each `g` of the range that has a newer generation, ascending.
    public var older: [WrappedAccountKey] = []
    /// Hand-overs sealed to the asking session, ascending by the generation they bring.
    public var handovers: [(generation: UInt32, handover: KeyHandover)] = []
    /// Hand-overs sealed to the password's public key, ascending.
    public var passwordHandovers: [(generation: UInt32, handover: KeyHandover)] = []
    /// Hand-overs sealed to the recovery key's public key, ascending.
    public var recoveryHandovers: [(generation: UInt32, handover: KeyHandover)] = []

    public init() {}

    public static func == (a: KeyChain, b: KeyChain) -> Bool {
        a.older == b.older && a.handovers.elementsEqual(b.handovers, by: { $0 == $1 })
            && a.passwordHandovers.elementsEqual(b.passwordHandovers, by: { $0 == $1 })
            && a.recoveryHandovers.elementsEqual(b.recoveryHandovers, by: { $0 == $1 })
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
    /// The device's X25519 public key, when it gave one at sign-in (``SignInRequest/devicePublicKey``).
    public var devicePublicKey: DevicePublicKey?
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
    /// UTF-8 bytes of the texts of the notes' kept versions (``StoredVersion/text``), until the history retention
    /// prunes them.
    public var historyBytes: Int64
    /// Bytes of the account's attachment chunks (``ChunkStore``), each counted once however many notes refer to it.
    public var chunkBytes: Int64

    public init(
        noteCount: Int64 = 0, textBytes: Int64 = 0, replayTextBytes: Int64 = 0, historyBytes: Int64 = 0, chunkBytes: Int64 = 0
    ) {
        self.noteCount = noteCount
        self.textBytes = textBytes
        self.replayTextBytes = replayTextBytes
        self.historyBytes = historyBytes
        self.chunkBytes = chunkBytes
    }

    /// What the byte limit counts: the notes' texts, the replay texts, the history's texts and the chunks.
    public var storedBytes: Int64 { textBytes + replayTextBytes + historyBytes + chunkBytes }
}

/// The per-account limits a push enforces (the daemon's `--max-notes-per-account` and `--max-bytes-per-account`).
///
/// A change that would take an account over either limit is `rejected` with `quota_exceeded`; a change that does not
/// grow what it is over (a delete) is always accepted, so an account over a lowered limit can shrink. The byte limit
/// counts the notes' texts plus the texts kept for replays plus the texts of the versions the history keeps plus the
/// attachments' chunks (``AccountUsage/storedBytes``): every accepted change of a note keeps its text in the history,
/// so only a delete (whose version's text is empty) never grows it.
public struct AccountQuota: Sendable, Equatable {
    /// Most stored notes per account, tombstones included.
    public var maxNotes: Int64
    /// Most bytes per account: the notes' texts, the texts their applied edits keep for replays, the texts of the
    /// kept versions, and the chunks of their attachments.
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
}

/// The identity of a note inside one account: the creating device's client ID and that device's origin.
///
/// Two devices may mint the same client ID; their origins differ, so their notes never merge.
public struct NoteKey: Hashable, Sendable {
    public var clientID: FlakeID
    public var origin: FlakeID
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
    /// The note's tags, display forms in ``TagRules/sorted(_:)`` order, no two equal keys (a tombstone keeps the
    /// tags it had).
    public var tags: [String] = []
    public var pinned: Bool = false
    public var archived: Bool = false
    /// The edit ID of the change that wrote the current content (``NoteRecord/editID``); nil for notes last written
    /// before the server kept it.
    public var editID: FlakeID?
    /// The note's attachments, in ``AttachmentRules/sorted(_:)`` order (a tombstone keeps those it had); always empty
    /// for an encrypted account's note (they are in its envelope).
    public var attachments: [AttachmentManifest] = []
    /// Every chunk the note refers to, each once, in address order: a plaintext note's manifests' chunks, an
    /// encrypted note's pushed ``NoteChange/chunkRefs``. What the chunk collector keeps (``ChunkReferences``).
    public var chunkRefs: [ContentHash] = []

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
            editedAt: times.format(unixMilliseconds: editedAt ?? updatedAt), tags: tags, pinned: pinned, archived: archived,
            attachments: attachments, editID: editID
        )
    }
}

/// One kept version of a note (`note_versions`): its state right after a change the server accepted, with who saved
/// it and when. Written in the push's transaction, one per write of a note (``PushPlanner/Plan/versions``), pruned by
/// age (the daemon's `--history-days`, the note's newest kept version excepted), served by
/// `GET /v1/notes/{serverID}/versions`.
public struct StoredVersion: Sendable, Equatable {
    public var accountID: FlakeID
    public var serverID: FlakeID
    /// The note's version this row holds.
    public var version: Int64
    /// "" for a delete.
    public var text: String
    public var deleted: Bool
    /// Display forms in ``TagRules/sorted(_:)`` order.
    public var tags: [String]
    public var pinned: Bool
    public var archived: Bool
    /// When the content was edited, by the editing device's clock, Unix milliseconds (informational).
    public var editedAt: Int64
    /// When the server accepted the change, Unix milliseconds (server clock; the retention counts from it).
    public var savedAt: Int64
    /// The device name of the session that pushed it, if it gave one.
    public var device: String?
    /// The edit ID of the change that wrote it; nil for versions saved before the server kept it.
    public var editID: FlakeID?
    /// The attachments (``StoredNote/attachments``).
    public var attachments: [AttachmentManifest]
    /// The chunks it refers to (``StoredNote/chunkRefs``): a kept version keeps them from the chunk collector.
    public var chunkRefs: [ContentHash]
}

extension StoredVersion {
    /// The version a note is in right after a write (``StoredNote``'s state, saved at `savedAt` by `device`).
    public init(_ note: StoredNote, savedAt: Int64, device: String?) {
        self.init(
            accountID: note.accountID, serverID: note.serverID, version: note.version, text: note.text, deleted: note.deleted,
            tags: note.tags, pinned: note.pinned, archived: note.archived, editedAt: note.editedAt ?? savedAt,
            savedAt: savedAt, device: device, editID: note.editID, attachments: note.attachments, chunkRefs: note.chunkRefs)
    }

    /// The version as the history endpoint returns it, its times formatted through `times`.
    public func record(times: inout WireTime.Cache) -> NoteVersion {
        NoteVersion(
            version: version, text: text, deleted: deleted, tags: tags, pinned: pinned, archived: archived,
            editedAt: times.format(unixMilliseconds: editedAt), savedAt: times.format(unixMilliseconds: savedAt), device: device,
            editID: editID, attachments: attachments)
    }
}

/// One page of a note's history as a store read it (``NoteStore/versions(accountID:serverID:query:)``).
public struct VersionPage: Sendable, Equatable {
    /// The note's kept versions after the query's `after`, ascending, within the page's bounds.
    public var versions: [StoredVersion]
    /// More versions follow the page's last.
    public var hasMore: Bool
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
    /// The tags the original answer carried (``ChangeResult/tags``), nil when it carried none.
    public var tags: [String]?
    /// The pin the original answer carried, nil when it carried none.
    public var pinned: Bool?
    /// The archived flag the original answer carried, nil when it carried none.
    public var archived: Bool?
    /// Unix milliseconds.
    public var createdAt: Int64
}

/// One page of an account's changes, read in one consistent snapshot.
public struct PullPage: Sendable, Equatable {
    /// Notes with `changeSeq` greater than the requested one, ascending, at most the requested limit, and no more
    /// once their texts reach the requested bytes (at least one note).
    public var notes: [StoredNote]
    /// The account's change sequence in the same snapshot (0 for an account with no changes).
    public var currentSequence: Int64
    /// The account's notes (tombstones and conflict copies included) in the same snapshot.
    public var noteCount: Int64 = 0
    /// The page stopped at the requested bytes, before the requested limit.
    public var cutByBytes: Bool = false
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
    /// The pushing session's device name, kept with each version the push writes (``StoredVersion/device``).
    public var device: String?

    public init(
        limits: SyncLimits, now: Int64, pusher: FlakeID? = nil, quota: AccountQuota = .default, device: String? = nil,
        mintID: @escaping @Sendable () throws -> FlakeID
    ) {
        self.device = device
        self.limits = limits
        self.now = now
        self.pusher = pusher
        self.quota = quota
        self.mintID = mintID
    }
}

/// How both stores keep a set of tags in one text column (`notes.tags`, `note_versions.tags`, `applied_edits.tags`):
/// the display forms in ``TagRules/sorted(_:)`` order joined by "\n", '' for none (a tag never holds "\n"). A column,
/// not a table: a note's tags are read and written with its row, at no cost per tag.
enum TagsColumn {
    /// The column's text for a set (already in canonical order).
    static func text(_ tags: [String]) -> String {
        tags.joined(separator: "\n")
    }

    /// The set a column holds.
    static func tags(_ text: String) -> [String] {
        text.isEmpty ? [] : text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }
}

/// How both stores keep a note's attachments in one text column (`notes.attachments`, `note_versions.attachments`):
/// the manifests as a JSON array (each as ``AttachmentManifest/encodedJSON()`` writes it), '' for none. A column, not
/// a table, like the tags: read and written with the note's row.
enum AttachmentsColumn {
    /// The column's text for a set (already in canonical order).
    static func text(_ attachments: [AttachmentManifest]) -> String {
        guard !attachments.isEmpty else { return "" }
        return "[" + attachments.map { String(decoding: $0.encodedJSON(), as: UTF8.self) }.joined(separator: ",") + "]"
    }

    /// The set a column holds.
    ///
    /// - Throws: ``NoteStoreError/unreadable(_:)`` when the column is not a list of manifests.
    static func attachments(_ text: String) throws -> [AttachmentManifest] {
        guard !text.isEmpty else { return [] }
        do {
            return try WireJSON.decoder().decode([AttachmentManifest].self, from: Data(text.utf8))
        } catch {
            throw NoteStoreError.unreadable("a note's attachments: \(error)")
        }
    }
}

/// How both stores keep the chunks a note refers to in one text column (`notes.chunk_refs`,
/// `note_versions.chunk_refs`): the addresses in ascending order joined by "\n", '' for none. The chunk collector's
/// references (``ChunkReferences``) and `notesyncd check` read it.
enum ChunkRefsColumn {
    static func text(_ hashes: [ContentHash]) -> String {
        hashes.map(\.hex).joined(separator: "\n")
    }

    /// The addresses a column holds (a malformed one is skipped: the column is written only from checked hashes).
    static func hashes(_ text: String) -> [ContentHash] {
        text.isEmpty ? [] : text.split(separator: "\n").compactMap { ContentHash($0) }
    }
}
