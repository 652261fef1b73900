import MiniFlake

// Every 64-bit ID on the wire is a `FlakeID`, encoded as a decimal string (JavaScript loses precision above 2^53).
// Requests are decoded strictly (unknown fields are refused, see `UnknownFieldError`); responses leniently.

// MARK: - Accounts and sessions

/// `POST /v1/accounts` body.
public struct SignUpRequest: Codable, Sendable, Equatable {
    /// See ``CredentialRules/usernameLength``; compared case-insensitively.
    public var username: String
    /// 8–72 UTF-8 bytes.
    public var password: String
    /// An invite code from the server's operator (``InviteCode``): required when the server's sign-up policy is
    /// `invite`, ignored when it is `open`. Absent from the JSON when nil (`null` is refused, like every field).
    public var invite: String?
    /// Present for an end-to-end encrypted account: its keys (generation 1). `password` is then the AuthKey (64
    /// lowercase hexadecimal characters), never the password itself. Absent: a plaintext account.
    public var encryption: EncryptionSetup?

    public init(username: String, password: String, invite: String? = nil, encryption: EncryptionSetup? = nil) {
        self.username = username
        self.password = password
        self.invite = invite
        self.encryption = encryption
    }

    public enum CodingKeys: String, WireKey { case username, password, invite, encryption }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        username = try c.decode(String.self, forKey: .username)
        password = try c.decode(String.self, forKey: .password)
        invite = try c.decodeIfPresentRefusingNull(String.self, forKey: .invite)
        encryption = try c.decodeIfPresentRefusingNull(EncryptionSetup.self, forKey: .encryption)
    }
}

/// An account as the server describes it.
public struct AccountResponse: Codable, Sendable, Equatable {
    public var accountID: FlakeID
    public var username: String
    /// What the account stores and may store: in `GET /v1/account` answers (absent from sign-up's and from older
    /// servers).
    public var usage: StorageUsage?
    /// The account's encryption state: in `GET /v1/account` and sign-up answers (absent from older servers, which
    /// have plaintext accounts only).
    public var encryption: EncryptionState?
    /// While the account is `converting`: how many of its notes the server still holds in the clear (in
    /// `GET /v1/account` answers; absent otherwise).
    public var plaintextNotes: Int64?

    public enum CodingKeys: String, WireKey { case accountID, username, usage, encryption, plaintextNotes }

    public init(
        accountID: FlakeID, username: String, usage: StorageUsage? = nil, encryption: EncryptionState? = nil, plaintextNotes: Int64? = nil
    ) {
        self.accountID = accountID
        self.username = username
        self.usage = usage
        self.encryption = encryption
        self.plaintextNotes = plaintextNotes
    }
}

/// `POST /v1/sessions` body: sign in and register this device.
public struct SignInRequest: Codable, Sendable, Equatable {
    public var username: String
    public var password: String
    /// A label for the device shown to the account owner (at most 100 characters, no control characters).
    public var deviceName: String?
    /// The installation's origin ID (stable across sign-outs); recorded with the session.
    public var origin: FlakeID?
    /// This installation's X25519 public key (NoteCrypto's device public key, 43 characters): kept with the session,
    /// so a rotation can seal the account's next key generation to this device.
    public var devicePublicKey: String?

    public init(username: String, password: String, deviceName: String? = nil, origin: FlakeID? = nil, devicePublicKey: String? = nil) {
        self.username = username
        self.password = password
        self.deviceName = deviceName
        self.origin = origin
        self.devicePublicKey = devicePublicKey
    }

    /// Longest accepted device name, in characters.
    public static let maxDeviceNameLength = 100

    public enum CodingKeys: String, WireKey {
        case username, password, deviceName, origin, devicePublicKey
        public var isID: Bool { self == .origin }
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        username = try c.decode(String.self, forKey: .username)
        password = try c.decode(String.self, forKey: .password)
        deviceName = try c.decodeIfPresentRefusingNull(String.self, forKey: .deviceName)
        origin = try c.decodeIfPresentRefusingNull(FlakeID.self, forKey: .origin)
        devicePublicKey = try c.decodeIfPresentRefusingNull(String.self, forKey: .devicePublicKey)
    }
}

/// `POST /v1/sessions` answer.
public struct SignInResponse: Codable, Sendable, Equatable {
    /// The bearer token: send as `Authorization: Bearer <token>`. The server stores only its hash.
    public var token: String
    public var accountID: FlakeID
    public var username: String
    /// The session (device registration) this token belongs to.
    public var sessionID: FlakeID
    /// Present for an account that is not plaintext: its key parameters and current wrapped key.
    public var encryption: SignInEncryption?

    public init(token: String, accountID: FlakeID, username: String, sessionID: FlakeID, encryption: SignInEncryption? = nil) {
        self.token = token
        self.accountID = accountID
        self.username = username
        self.sessionID = sessionID
        self.encryption = encryption
    }
}

// MARK: - Devices, password, account

/// Usage and limits of an account's storage, in `GET /v1/account`.
public struct StorageUsage: Codable, Sendable, Equatable {
    /// Stored notes, deleted ones (tombstones) included.
    public var notes: Int64
    /// UTF-8 bytes of the stored notes' texts.
    public var textBytes: Int64
    /// UTF-8 bytes of the texts the server keeps to answer replays (the `text` of `merged`, `conflict` and `kept`
    /// results, kept for the daemon's `--edit-retention-days`). Absent from servers older than this field.
    public var replayTextBytes: Int64?
    /// UTF-8 bytes of the texts of the notes' versions the server keeps (`GET /v1/notes/{serverID}/versions`, for
    /// the daemon's `--history-days`). Absent from servers older than this field.
    public var historyBytes: Int64?
    /// Bytes of the account's attachment chunks, each counted once. Absent from servers older than this field.
    public var chunkBytes: Int64?
    /// The most notes the account may store (a change needing more is rejected `quota_exceeded`).
    public var maxNotes: Int64
    /// The most bytes the account may store: ``textBytes`` plus ``replayTextBytes`` plus ``historyBytes`` plus
    /// ``chunkBytes``.
    public var maxTextBytes: Int64

    public enum CodingKeys: String, WireKey {
        case notes, textBytes, replayTextBytes, historyBytes, chunkBytes, maxNotes, maxTextBytes
    }

    public init(
        notes: Int64, textBytes: Int64, replayTextBytes: Int64? = nil, historyBytes: Int64? = nil, chunkBytes: Int64? = nil,
        maxNotes: Int64, maxTextBytes: Int64
    ) {
        self.notes = notes
        self.textBytes = textBytes
        self.replayTextBytes = replayTextBytes
        self.historyBytes = historyBytes
        self.chunkBytes = chunkBytes
        self.maxNotes = maxNotes
        self.maxTextBytes = maxTextBytes
    }
}

/// One signed-in device of the account, in `GET /v1/sessions`.
public struct SessionInfo: Codable, Sendable, Equatable {
    /// Revoke it with `POST /v1/sessions/revoke`.
    public var sessionID: FlakeID
    /// The name the device gave at sign-in, if any.
    public var deviceName: String?
    /// The installation ID the device gave at sign-in, if any.
    public var origin: FlakeID?
    /// When it signed in (``WireTime`` form).
    public var signedInAt: String
    /// When it last made a request, to the minute (``WireTime`` form); absent until its first request after sign-in.
    public var lastSeenAt: String?
    /// True for the session of the token that asked.
    public var current: Bool
    /// The device public key it gave at sign-in, if any: what a rotation seals the next key generation to.
    public var publicKey: String?

    public enum CodingKeys: String, WireKey { case sessionID, deviceName, origin, signedInAt, lastSeenAt, current, publicKey }

    public init(
        sessionID: FlakeID, deviceName: String?, origin: FlakeID?, signedInAt: String, lastSeenAt: String?, current: Bool,
        publicKey: String? = nil
    ) {
        self.sessionID = sessionID
        self.deviceName = deviceName
        self.origin = origin
        self.signedInAt = signedInAt
        self.lastSeenAt = lastSeenAt
        self.current = current
        self.publicKey = publicKey
    }
}

/// `GET /v1/sessions` answer.
public struct SessionListResponse: Codable, Sendable, Equatable {
    /// Most recently signed in first; at most ``maxListed``.
    public var sessions: [SessionInfo]

    /// The most sessions one answer lists.
    public static let maxListed = 1000

    public enum CodingKeys: String, WireKey { case sessions }
    public init(sessions: [SessionInfo]) { self.sessions = sessions }
}

/// `POST /v1/sessions/revoke` body: sign a device of this account out.
public struct RevokeSessionRequest: Codable, Sendable, Equatable {
    public var sessionID: FlakeID

    public init(sessionID: FlakeID) { self.sessionID = sessionID }

    public enum CodingKeys: String, WireKey {
        case sessionID
        public var isID: Bool { true }
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        sessionID = try c.decode(FlakeID.self, forKey: .sessionID)
    }
}

/// How many sessions a request signed out (`POST /v1/sessions/revoke-others`, `POST /v1/account/password`).
public struct RevokedSessionsResponse: Codable, Sendable, Equatable {
    public var revokedSessions: Int

    public enum CodingKeys: String, WireKey { case revokedSessions }
    public init(revokedSessions: Int) { self.revokedSessions = revokedSessions }
}

/// `POST /v1/account/password` body.
public struct ChangePasswordRequest: Codable, Sendable, Equatable {
    /// The password now (checked like a sign-in, and throttled with them).
    public var currentPassword: String
    /// The new password (``CredentialRules/passwordBytes``).
    public var newPassword: String
    /// Required for an end-to-end encrypted account (both passwords are then AuthKeys): the key re-wrapped by the new
    /// password, optionally with a rotation. Refused for a plaintext account.
    public var encryption: PasswordChangeEncryption?

    public init(currentPassword: String, newPassword: String, encryption: PasswordChangeEncryption? = nil) {
        self.currentPassword = currentPassword
        self.newPassword = newPassword
        self.encryption = encryption
    }

    public enum CodingKeys: String, WireKey { case currentPassword, newPassword, encryption }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        currentPassword = try c.decode(String.self, forKey: .currentPassword)
        newPassword = try c.decode(String.self, forKey: .newPassword)
        encryption = try c.decodeIfPresentRefusingNull(PasswordChangeEncryption.self, forKey: .encryption)
    }
}

/// `POST /v1/account/delete` body.
public struct DeleteAccountRequest: Codable, Sendable, Equatable {
    /// The account's password (checked like a sign-in, and throttled with them).
    public var password: String

    public init(password: String) { self.password = password }

    public enum CodingKeys: String, WireKey { case password }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        password = try c.decode(String.self, forKey: .password)
    }
}

// MARK: - Push

/// One note's change, as a client pushes it.
///
/// A note is identified in an account by `(clientID, origin)`: the client ID the creating device minted, and that
/// device's installation ID. `serverID` is the server's canonical ID when the client knows it (it forgets it on
/// sign-out). The base (`baseVersion`, `baseText`) is what the client last synced of this note; with it the server
/// tells a fast-forward from a concurrent edit, and merges or keeps both instead of overwriting.
///
/// Tags and flags (`tags`, `pinned`, `archived`) travel beside the text, each with its own base (`baseTags`,
/// `basePinned`, `baseArchived`: what this device last synced of the note). A field left out leaves that part of the
/// note as the server has it, so a client that knows nothing of tags keeps working. The server merges each three-way
/// against its base (`TagMerge`, `FlagMerge`): `tags` without `baseTags` has the empty set as its base (a note never
/// synced here: nothing the server has is removed); `pinned` or `archived` without its base wins.
///
/// Attachments (`attachments`, `baseAttachments`) travel the same way and merge with `AttachmentMerge`; every chunk
/// they refer to must already be stored for the account (else the change is rejected `unknown_chunk`). An encrypted
/// account's manifests are inside the note envelope instead: its changes carry `chunkRefs`, the addresses the sealed
/// attachments use, which the server checks the same way and keeps for garbage collection.
public struct NoteChange: Codable, Sendable, Equatable {
    /// The note's client ID (minted on the creating device).
    public var clientID: FlakeID
    /// The installation ID of the device that created the note.
    public var origin: FlakeID
    /// The server ID, when the client has one for the account it is signed in to.
    public var serverID: FlakeID?
    /// Unique per local edit; a replay of the same edit ID has the effect of one push (idempotency).
    public var editID: FlakeID
    /// The note's full text after the edit ("" for a delete).
    public var text: String
    /// Whether this change deletes the note.
    public var deleted: Bool
    /// The server version the client last synced, if it knows one (forgotten on sign-out).
    public var baseVersion: Int64?
    /// The text the client last synced (kept across sign-out); nil for a note never synced.
    public var baseText: String?
    /// When the edit was made, by the editing device's clock (``WireTime`` form): informational, shown to people,
    /// never used for ordering or deciding anything. Absent (older clients): the server stores its own time.
    public var editedAt: String?
    /// The note's tags after the edit (display forms, any order, a valid set under ``TagRules``); nil leaves the
    /// server's tags as they are.
    public var tags: [String]?
    /// Whether the note is pinned after the edit; nil leaves it as the server has it.
    public var pinned: Bool?
    /// Whether the note is archived after the edit; nil leaves it as the server has it.
    public var archived: Bool?
    /// The tags this device last synced of the note; nil with `tags` present means the empty set.
    public var baseTags: [String]?
    /// The pin this device last synced of the note; nil with `pinned` present lets this change's value win.
    public var basePinned: Bool?
    /// The archived flag this device last synced of the note; nil with `archived` present lets this change's value
    /// win.
    public var baseArchived: Bool?
    /// The note's attachments after the edit (a valid set under ``AttachmentRules``, any order); nil leaves the
    /// server's attachments as they are. Plaintext accounts only (an encrypted account's are in the envelope).
    public var attachments: [AttachmentManifest]?
    /// The attachments this device last synced of the note; nil with `attachments` present means the empty set.
    public var baseAttachments: [AttachmentManifest]?
    /// Encrypted accounts only: every chunk address the note's sealed attachments use (any order, duplicates
    /// allowed). Nil leaves the server's references as they are; `[]` says the note has no attachments.
    public var chunkRefs: [ContentHash]?

    public init(
        clientID: FlakeID, origin: FlakeID, serverID: FlakeID? = nil, editID: FlakeID, text: String,
        deleted: Bool = false, baseVersion: Int64? = nil, baseText: String? = nil, editedAt: String? = nil,
        tags: [String]? = nil, pinned: Bool? = nil, archived: Bool? = nil,
        baseTags: [String]? = nil, basePinned: Bool? = nil, baseArchived: Bool? = nil,
        attachments: [AttachmentManifest]? = nil, baseAttachments: [AttachmentManifest]? = nil, chunkRefs: [ContentHash]? = nil
    ) {
        self.attachments = attachments
        self.baseAttachments = baseAttachments
        self.chunkRefs = chunkRefs
        self.clientID = clientID
        self.origin = origin
        self.serverID = serverID
        self.editID = editID
        self.text = text
        self.deleted = deleted
        self.baseVersion = baseVersion
        self.baseText = baseText
        self.editedAt = editedAt
        self.tags = tags
        self.pinned = pinned
        self.archived = archived
        self.baseTags = baseTags
        self.basePinned = basePinned
        self.baseArchived = baseArchived
    }

    public enum CodingKeys: String, WireKey {
        case clientID, origin, serverID, editID, text, deleted, baseVersion, baseText, editedAt
        case tags, pinned, archived, baseTags, basePinned, baseArchived
        case attachments, baseAttachments, chunkRefs
        public var isID: Bool { self == .clientID || self == .origin || self == .serverID || self == .editID }
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        clientID = try c.decode(FlakeID.self, forKey: .clientID)
        origin = try c.decode(FlakeID.self, forKey: .origin)
        serverID = try c.decodeIfPresentRefusingNull(FlakeID.self, forKey: .serverID)
        editID = try c.decode(FlakeID.self, forKey: .editID)
        text = try c.decode(String.self, forKey: .text)
        deleted = try c.decodeIfPresentRefusingNull(Bool.self, forKey: .deleted) ?? false
        baseVersion = try c.decodeIfPresentRefusingNull(Int64.self, forKey: .baseVersion)
        baseText = try c.decodeIfPresentRefusingNull(String.self, forKey: .baseText)
        editedAt = try c.decodeIfPresentRefusingNull(String.self, forKey: .editedAt)
        if let editedAt, WireTime.parse(editedAt) == nil {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: c.codingPath + [CodingKeys.editedAt],
                    debugDescription: "not a time in the form 2026-11-22T10:15:30.123Z"))
        }
        tags = try c.decodeTagsIfPresent(forKey: .tags)
        pinned = try c.decodeIfPresentRefusingNull(Bool.self, forKey: .pinned)
        archived = try c.decodeIfPresentRefusingNull(Bool.self, forKey: .archived)
        baseTags = try c.decodeTagsIfPresent(forKey: .baseTags)
        basePinned = try c.decodeIfPresentRefusingNull(Bool.self, forKey: .basePinned)
        baseArchived = try c.decodeIfPresentRefusingNull(Bool.self, forKey: .baseArchived)
        attachments = try c.decodeAttachmentsIfPresent(forKey: .attachments)
        baseAttachments = try c.decodeAttachmentsIfPresent(forKey: .baseAttachments)
        chunkRefs = try c.decodeIfPresentRefusingNull([ContentHash].self, forKey: .chunkRefs)
        let addresses = AttachmentRules.chunkAddressCount(attachments: attachments, baseAttachments: baseAttachments, chunkRefs: chunkRefs)
        if addresses > AttachmentRules.maxChunkAddressesPerChange {
            let message = AttachmentRules.tooManyChunkAddresses(addresses)
            throw DecodingError.dataCorrupted(
                .init(codingPath: c.codingPath, debugDescription: message, underlyingError: FieldRuleError(message: message)))
        }
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(clientID, forKey: .clientID)
        try c.encode(origin, forKey: .origin)
        try c.encodeIfPresent(serverID, forKey: .serverID)
        try c.encode(editID, forKey: .editID)
        try c.encode(text, forKey: .text)
        try c.encode(deleted, forKey: .deleted)
        try c.encodeIfPresent(baseVersion, forKey: .baseVersion)
        try c.encodeIfPresent(baseText, forKey: .baseText)
        try c.encodeIfPresent(editedAt, forKey: .editedAt)
        try c.encodeIfPresent(tags, forKey: .tags)
        try c.encodeIfPresent(pinned, forKey: .pinned)
        try c.encodeIfPresent(archived, forKey: .archived)
        try c.encodeIfPresent(baseTags, forKey: .baseTags)
        try c.encodeIfPresent(basePinned, forKey: .basePinned)
        try c.encodeIfPresent(baseArchived, forKey: .baseArchived)
        try c.encodeIfPresent(attachments, forKey: .attachments)
        try c.encodeIfPresent(baseAttachments, forKey: .baseAttachments)
        try c.encodeIfPresent(chunkRefs, forKey: .chunkRefs)
    }
}

/// `POST /v1/notes/push` body.
public struct PushRequest: Codable, Sendable, Equatable {
    /// Applied in order; each gets its own result. At most `maxBatchChanges`.
    public var changes: [NoteChange]

    public init(changes: [NoteChange]) { self.changes = changes }

    public enum CodingKeys: String, WireKey { case changes }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.strictContainer(keyedBy: CodingKeys.self)
        changes = try c.decode([NoteChange].self, forKey: .changes)
    }
}

/// What the server did with one change.
public enum ChangeStatus: String, Codable, Sendable, CaseIterable {
    /// A new note: `serverID` and `version` 1.
    case created
    /// The change had no server ID and `(clientID, origin)` was already a note of this account (e.g. a re-push after
    /// sign-in): its existing server ID is returned, no duplicate. The note now holds the pushed text (it already did,
    /// or the client's base was current and the edit was applied).
    case reconciled
    /// A fast-forward edit: the client's base was the current version.
    case updated
    /// Nothing to do: the note already had this text (or was already deleted, or a delete named no stored note).
    case unchanged
    /// The note had changed since the client's base and the edits did not overlap: `text` holds the merge.
    case merged
    /// The edits overlapped: the server's text stays (`text`), the pushed text became a new note, `conflict`.
    case conflict
    /// The note is now a tombstone.
    case deleted
    /// A delete was refused because the note changed since the client's base (an edit wins over a delete): `text`.
    case kept
    /// The change was refused: `error` says why. Nothing was stored for it.
    case rejected
    /// Encrypted accounts only: the note changed since the change's base (`baseVersion` is not its current version,
    /// or a change without a server ID found a note with another text). The server cannot merge what it cannot read:
    /// nothing was stored; `serverID` and `version` are the note's now. Pull, merge on the device, and push the merge
    /// based on that version.
    case stale
}

/// The IDs of a conflict copy.
public struct ConflictCopy: Codable, Sendable, Equatable {
    public var serverID: FlakeID
    public var clientID: FlakeID

    public enum CodingKeys: String, WireKey { case serverID, clientID }

    public init(serverID: FlakeID, clientID: FlakeID) {
        self.serverID = serverID
        self.clientID = clientID
    }
}

/// The result of one change, at the same index as the change.
public struct ChangeResult: Codable, Sendable, Equatable {
    public var clientID: FlakeID
    public var editID: FlakeID
    public var status: ChangeStatus
    /// The note's server ID (absent for `rejected`, and for `unchanged` when a delete named no stored note).
    public var serverID: FlakeID?
    /// The note's version after this change.
    public var version: Int64?
    /// The note's text after this change, when it differs from the pushed text (`merged`, `conflict`, `kept`).
    public var text: String?
    /// The note's tags after this change (display forms, in ``TagRules/sorted(_:)`` order), when the change carried
    /// `tags` and the note's differ from them: merged with another device's change, or (`conflict`, `kept`) the
    /// note's own. Absent when the note holds the pushed set, and from older servers.
    public var tags: [String]?
    /// The note's pin after this change, when the change carried `pinned` and the note's differs from it.
    public var pinned: Bool?
    /// The note's archived flag after this change, when the change carried `archived` and the note's differs from it.
    public var archived: Bool?
    /// The note's attachments after this change (in ``AttachmentRules/sorted(_:)`` order), when the change carried
    /// `attachments` and the note's differ from them: merged with another device's change (`AttachmentMerge`), or
    /// (`conflict`, `kept`) the note's own; and when the change carried no `attachments` but the note has some (a
    /// device that knows of none sends none: it learns the set here). Absent when the note holds the pushed set, and
    /// from older servers.
    public var attachments: [AttachmentManifest]?
    /// Present for `conflict`: the note that now holds the pushed text.
    public var conflict: ConflictCopy?
    /// True when this edit ID had already been applied: the stored outcome is returned again, nothing is re-applied.
    public var replayed: Bool
    /// Present for `rejected`.
    public var error: APIErrorBody?

    public init(
        clientID: FlakeID, editID: FlakeID, status: ChangeStatus, serverID: FlakeID? = nil, version: Int64? = nil,
        text: String? = nil, tags: [String]? = nil, pinned: Bool? = nil, archived: Bool? = nil,
        attachments: [AttachmentManifest]? = nil, conflict: ConflictCopy? = nil, replayed: Bool = false, error: APIErrorBody? = nil
    ) {
        self.attachments = attachments
        self.clientID = clientID
        self.editID = editID
        self.status = status
        self.serverID = serverID
        self.version = version
        self.text = text
        self.tags = tags
        self.pinned = pinned
        self.archived = archived
        self.conflict = conflict
        self.replayed = replayed
        self.error = error
    }

    public enum CodingKeys: String, WireKey {
        case clientID, editID, status, serverID, version, text, tags, pinned, archived, attachments, conflict, replayed, error
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        clientID = try c.decode(FlakeID.self, forKey: .clientID)
        editID = try c.decode(FlakeID.self, forKey: .editID)
        status = try c.decode(ChangeStatus.self, forKey: .status)
        serverID = try c.decodeIfPresent(FlakeID.self, forKey: .serverID)
        version = try c.decodeIfPresent(Int64.self, forKey: .version)
        text = try c.decodeIfPresent(String.self, forKey: .text)
        tags = try c.decodeIfPresent([String].self, forKey: .tags)
        pinned = try c.decodeIfPresent(Bool.self, forKey: .pinned)
        archived = try c.decodeIfPresent(Bool.self, forKey: .archived)
        attachments = try c.decodeIfPresent([AttachmentManifest].self, forKey: .attachments)
        conflict = try c.decodeIfPresent(ConflictCopy.self, forKey: .conflict)
        replayed = try c.decodeIfPresent(Bool.self, forKey: .replayed) ?? false
        error = try c.decodeIfPresent(APIErrorBody.self, forKey: .error)
    }
}

/// `POST /v1/notes/push` answer. A push is one database transaction: when the answer is sent every accepted change
/// is durable; on a server fault (5xx, lost connection) none or all of them are. A rejected change does not affect
/// the others in the batch.
public struct PushResponse: Codable, Sendable, Equatable {
    public var results: [ChangeResult]

    public enum CodingKeys: String, WireKey { case results }
    public init(results: [ChangeResult]) { self.results = results }
}

// MARK: - Pull

/// An opaque pull cursor. Clients store and send back `text`; only the server reads it.
///
/// It is the account's change sequence: monotonic in commit order, never a timestamp.
public struct SyncCursor: Codable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The account change sequence this cursor stands after (0: from the start).
    public let sequence: Int64

    public init(sequence: Int64) { self.sequence = max(0, sequence) }

    /// The start of the account's history.
    public static let start = SyncCursor(sequence: 0)

    /// The wire form.
    public var text: String { "c\(sequence)" }
    public var description: String { text }

    /// Parses the wire form; nil if this server never issued it.
    public init?(text: String) {
        guard text.first == "c", let value = Int64(text.dropFirst()), value >= 0, String(value) == text.dropFirst()
        else { return nil }
        sequence = value
    }

    public static func < (a: SyncCursor, b: SyncCursor) -> Bool { a.sequence < b.sequence }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let cursor = SyncCursor(text: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a cursor: \(text)"))
        }
        self = cursor
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(text)
    }
}

/// One note as a pull returns it: its state at its latest change.
public struct NoteRecord: Codable, Sendable, Equatable {
    public var serverID: FlakeID
    public var clientID: FlakeID
    public var origin: FlakeID
    /// Starts at 1, +1 per accepted change.
    public var version: Int64
    /// "" when deleted.
    public var text: String
    public var deleted: Bool
    /// For a conflict copy: the server ID of the note it was split from.
    public var conflictOf: FlakeID?
    /// Server time of the latest change, ISO 8601 UTC with milliseconds (informational; ordering uses the cursor).
    public var updatedAt: String
    /// When the note's current content was edited, by the editing device's clock (the pushed
    /// ``NoteChange/editedAt``; the server's time for a change that carried none). Informational, like `updatedAt`:
    /// what clients show, so every device shows the same time. Absent from older servers.
    public var editedAt: String?
    /// The note's tags (display forms, in ``TagRules/sorted(_:)`` order; `[]` for none). Always written by this
    /// server; nil when absent (an older server): the client keeps the tags it has.
    public var tags: [String]?
    /// Whether the note is pinned. Always written by this server; nil when absent (an older server).
    public var pinned: Bool?
    /// Whether the note is archived. Always written by this server; nil when absent (an older server).
    public var archived: Bool?
    /// The note's attachments (in ``AttachmentRules/sorted(_:)`` order; `[]` for none). Always written by this
    /// server; always `[]` for an encrypted account's note (its manifests are in the envelope). Nil when absent (an
    /// older server): the client keeps the attachments it has.
    public var attachments: [AttachmentManifest]?
    /// The edit ID of the change that wrote the note's current content: what an encrypted note's envelope is bound to.
    /// Absent from older servers and for notes last written before the server kept it.
    public var editID: FlakeID?

    public enum CodingKeys: String, WireKey {
        case serverID, clientID, origin, version, text, deleted, conflictOf, updatedAt, editedAt, tags, pinned, archived
        case attachments, editID
    }

    public init(
        serverID: FlakeID, clientID: FlakeID, origin: FlakeID, version: Int64, text: String, deleted: Bool,
        conflictOf: FlakeID? = nil, updatedAt: String, editedAt: String? = nil, tags: [String]? = nil,
        pinned: Bool? = nil, archived: Bool? = nil, attachments: [AttachmentManifest]? = nil, editID: FlakeID? = nil
    ) {
        self.attachments = attachments
        self.editID = editID
        self.tags = tags
        self.pinned = pinned
        self.archived = archived
        self.serverID = serverID
        self.clientID = clientID
        self.origin = origin
        self.version = version
        self.text = text
        self.deleted = deleted
        self.conflictOf = conflictOf
        self.updatedAt = updatedAt
        self.editedAt = editedAt
    }
}

/// `GET /v1/notes/changes` answer.
public struct PullResponse: Codable, Sendable, Equatable {
    /// Notes changed after the request's cursor, oldest change first; each note at most once.
    public var changes: [NoteRecord]
    /// Where the next pull starts: after the last change in this page (or the request's cursor if none).
    public var cursor: SyncCursor
    /// More changes are waiting: pull again with `cursor` straight away.
    public var hasMore: Bool
    /// At most how many notes changed after `cursor` (exact for a pull from the start; 0 without more): what a
    /// progress display counts towards. Absent from servers before it.
    public var remaining: Int?

    public enum CodingKeys: String, WireKey { case changes, cursor, hasMore, remaining }

    public init(changes: [NoteRecord], cursor: SyncCursor, hasMore: Bool, remaining: Int? = nil) {
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
        self.remaining = remaining
    }
}

// MARK: - Server

/// `GET /v1/info` answer.
public struct ServerInfo: Codable, Sendable, Equatable {
    public var name: String
    public var version: String
    /// The protocol version the paths carry (`1` for `/v1`).
    public var protocolVersion: Int
    public var limits: SyncLimits
    /// The limits of waiting pulls; absent when the server does not hold pulls open (`wait` is then ignored).
    public var live: LiveLimits?
    /// The note history's retention and page limits; absent from servers that keep no history
    /// (`GET /v1/notes/{serverID}/versions` is then 404 `not_found`).
    public var history: HistoryLimits?

    public init(
        name: String = "notesyncd", version: String, protocolVersion: Int = 1, limits: SyncLimits, live: LiveLimits? = nil,
        history: HistoryLimits? = nil
    ) {
        self.name = name
        self.version = version
        self.protocolVersion = protocolVersion
        self.limits = limits
        self.live = live
        self.history = history
    }
}

/// `GET /healthz` answer.
public struct HealthResponse: Codable, Sendable, Equatable {
    /// `ok`.
    public var status: String
    /// `sqlite` or `postgres`.
    public var database: String

    public init(status: String = "ok", database: String) {
        self.status = status
        self.database = database
    }
}
