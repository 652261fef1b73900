import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

/// The encrypted form of an outbox change (an account with keys on this device): the envelope's text and the payload
/// `seq` it carries, remembered as the note's newest once the server accepts it.
struct SealedChange: Sendable, Equatable {
    var text: String
    var seq: UInt64
}

/// A pulled record of an encrypted account that this device refused: it does not open (altered, swapped from another
/// note, moved from another account, unknown key generation) or it is older than what the device has seen of the
/// note (a rollback). The device keeps its own copy of the note.
public struct TamperedNote: Sendable, Equatable {
    public var serverID: FlakeID
    public var clientID: FlakeID
    public var origin: FlakeID
    /// One sentence: why the record was refused.
    public var reason: String
}

/// End-to-end encryption on the device (Docs/SECURITY.md): the keys of sign-up and sign-in, and the sealing and
/// opening of notes. Every cryptographic operation is NoteCrypto's; this only maps its errors and wire forms.
enum NoteSealing {
    /// A new encrypted account's key material (sign-up).
    struct NewAccount: Sendable {
        var setup: EncryptionSetup
        var authKey: AuthKey
        var accountKey: AccountKey
        var recoveryKey: RecoveryKey
    }

    /// Generation 1 of a new account `accountID` whose password is `password`, hashed at `cost`.
    static func newAccount(accountID: FlakeID, password: String, cost: KDFCost, policy: KDFPolicy) throws(NotesError) -> NewAccount {
        let parameters = KDFParameters.generate(cost: cost)
        let derived = try derive(password: password, parameters: parameters, policy: policy)
        let key = AccountKey.generate(account: accountID)
        let recovery = RecoveryKey.generate()
        let setup = EncryptionSetup(
            accountID: accountID, kdf: info(parameters), wrappedKey: key.wrapped(by: derived.wrapKey).text,
            recoveryWrappedKey: key.wrapped(by: recovery).text, recoveryPublicKey: recovery.publicKey.text,
            passwordPublicKey: derived.passwordKeyPair.publicKey.text)
        return NewAccount(setup: setup, authKey: derived.authKey, accountKey: key, recoveryKey: recovery)
    }

    /// The wire form of KDF parameters.
    static func info(_ parameters: KDFParameters) -> KDFInfo {
        KDFInfo(salt: parameters.saltText, opsLimit: Int64(parameters.cost.opsLimit), memLimit: Int64(parameters.cost.memLimitBytes))
    }

    /// The parameters a server's prelogin (or sign-in) answer names, refused when out of the client's bounds.
    static func parameters(_ info: KDFInfo, server: String) throws(NotesError) -> KDFParameters {
        guard info.opsLimit > 0, info.memLimit > 0, info.memLimit <= Int64(Int.max) else {
            throw NotesError(.encryption, "The server \(server) named a password-hashing cost that is not valid; nothing was sent.")
        }
        do {
            return try KDFParameters(cost: KDFCost(opsLimit: UInt64(info.opsLimit), memLimitBytes: Int(info.memLimit)), saltText: info.salt)
        } catch {
            throw NotesError(.encryption, "The server \(server) named password-hashing parameters that are not valid: \(error.description)")
        }
    }

    /// The password's keys under `parameters`, the cost checked against `policy` (a server cannot downgrade it).
    static func derive(password: String, parameters: KDFParameters, policy: KDFPolicy) throws(NotesError) -> DerivedKeys {
        do {
            return try PasswordKDF.deriveKeys(password: password, parameters: parameters, policy: policy)
        } catch {
            throw NotesError(.encryption, "The password cannot be hashed with the server's parameters: \(error.description) Nothing was sent.")
        }
    }

    /// The current account key a sign-in answer wraps, opened with the password's WrapKey.
    static func accountKey(_ encryption: SignInEncryption, account: FlakeID, keys: DerivedKeys) throws(NotesError) -> AccountKey {
        do {
            return try WrappedAccountKey(text: encryption.wrappedKey).unwrap(account: account, with: keys.wrapKey)
        } catch {
            if encryption.state == .reset { throw accountReset }
            throw NotesError(.encryption, "The account's key does not open with this password: \(error.description)")
        }
    }

    /// What signing in to an account the operator reset says.
    static let accountReset = NotesError(
        .accountReset,
        "The server's operator reset this account's password: the account's notes on the server open only with its recovery key now (`notes encryption recover`). Without it they are unreadable; the notes on this device are still here.")

    /// Seals `entry`'s note (text, tags, flags, attachments with their files' keys, `baseSeq + 1`) for exactly its
    /// edit, under the ring's current key. A
    /// delete is sealed too, with an empty text: the tombstone the server keeps then carries its `seq`, so a device
    /// that brings the note back elsewhere (an edit wins over a delete) continues the chain after it, and no device
    /// takes that edit for a rollback (found by notes-sim: the seq of an edit the restoring device never saw).
    static func seal(_ entry: OutboxEntry, baseSeq: UInt64, keys: AccountKeyRing) throws(NotesError) -> SealedChange {
        let seq = min(baseSeq, NotePayload.maximumSeq - 1) + 1
        let state = entry.tagsAndFlags ?? TagsAndFlags()
        let payload = NotePayload(
            text: entry.deleted ? "" : entry.text, tags: state.tags, pinned: state.pinned, archived: state.archived,
            attachments: state.attachments, seq: seq)
        let context = NoteEnvelope.Context(account: keys.account, clientID: entry.clientID, origin: entry.origin, editID: entry.editID)
        do {
            return SealedChange(text: try NoteEnvelope.seal(plaintext: payload.bytes, context: context, key: keys.current).text, seq: seq)
        } catch {
            throw NotesError(.encryption, "A note cannot be encrypted: \(error.description)")
        }
    }

    /// The length of the envelope's text (what the server measures against `maxNoteBytes`) a note of `text` and `state`
    /// seals to, at the longest `seq`: the payload with its attachments' manifests, the envelope's 45 bytes, in
    /// unpadded base64.
    static func sealedTextCount(text: String, state: TagsAndFlags) -> Int {
        let payload = NotePayload(
            text: text, tags: state.tags, pinned: state.pinned, archived: state.archived, attachments: state.attachments,
            seq: NotePayload.maximumSeq)
        let bytes = payload.bytes.count + NoteEnvelope.overheadByteCount
        return (4 * bytes + 2) / 3
    }

    /// The payload of an envelope's text `text`, which must have been sealed for exactly the edit `editID` of the note
    /// (`clientID`, `origin`) of `keys`' account.
    static func payload(
        of text: String, editID: FlakeID, clientID: FlakeID, origin: FlakeID, keys: AccountKeyRing
    ) throws(NoteCryptoError) -> NotePayload {
        let envelope = try NoteEnvelope(text: text)
        let context = NoteEnvelope.Context(account: keys.account, clientID: clientID, origin: origin, editID: editID)
        return try NotePayload(decoding: NoteEnvelope.open(envelope, expecting: context, keys: keys).plaintext)
    }

    /// A history version of an encrypted account's note, opened (a delete's, without text, as it is).
    ///
    /// - Throws: `encryption` when it does not open as that note's edit: the server altered or swapped it.
    static func open(_ version: NoteVersion, clientID: FlakeID, origin: FlakeID, keys: AccountKeyRing) throws(NotesError) -> NoteVersion {
        if version.deleted && version.text.isEmpty { return version }
        guard let editID = version.editID else {
            throw NotesError(.encryption, "Version \(version.version) of the note does not say which edit wrote it; its history was not kept (tampered).")
        }
        let payload: NotePayload
        do {
            payload = try Self.payload(of: version.text, editID: editID, clientID: clientID, origin: origin, keys: keys)
        } catch {
            throw NotesError(
                .encryption, "Version \(version.version) of the note does not open as its edit \(editID): \(error.description) Its history was not kept (tampered).")
        }
        return version.opened(as: payload)
    }

    /// What opening a pulled record gives.
    enum Opening: Sendable {
        /// The record with its text, tags, flags and attachments from the envelope, and the payload's `seq` (nil for a tombstone,
        /// which the server stores without text).
        case opened(NoteRecord, seq: UInt64?)
        /// Why the device refuses it.
        case refused(TamperedNote)
    }

    /// `record` with its text, tags, flags and attachments opened from its envelope (the server's `attachments`, `[]`
    /// for an encrypted account, replaced), and the payload's `seq`; or why it is refused.
    /// `seen` is the newest `seq` (and its edit) this device has seen of the note: a lower one, or the same with another
    /// edit, is a rollback.
    static func open(
        _ record: NoteRecord, keys: AccountKeyRing, seen: (seq: UInt64, editID: FlakeID)?
    ) -> Opening {
        func refused(_ reason: String) -> Opening {
            .refused(TamperedNote(serverID: record.serverID, clientID: record.clientID, origin: record.origin, reason: reason))
        }
        // A delete's tombstone has no text on the server (a plaintext account's neither): nothing to open. A server
        // can always withhold a note; it cannot make one say anything.
        if record.deleted && record.text.isEmpty { return .opened(record, seq: nil) }
        guard let editID = record.editID else { return refused("the server did not say which edit wrote it") }
        let payload: NotePayload
        do {
            payload = try Self.payload(of: record.text, editID: editID, clientID: record.clientID, origin: record.origin, keys: keys)
        } catch {
            return refused("it does not open as this note's edit \(editID): \(error.description)")
        }
        if let seen, payload.seq < seen.seq || (payload.seq == seen.seq && editID != seen.editID) {
            return refused("it is older than the version this device has seen (seq \(payload.seq), seen \(seen.seq)): a rollback")
        }
        return .opened(record.opened(as: payload), seq: payload.seq)
    }
}

extension NoteRecord {
    /// This record with `payload` (its envelope, opened) in place of the envelope: its text, tags, flags and
    /// attachments.
    public func opened(as payload: NotePayload) -> NoteRecord {
        var opened = self
        opened.text = payload.text
        opened.tags = payload.tags
        opened.pinned = payload.pinned
        opened.archived = payload.archived
        opened.attachments = payload.attachments
        return opened
    }
}

extension NoteVersion {
    /// This history version with `payload` (its envelope, opened) in place of the envelope: its text, tags, flags and
    /// attachments.
    public func opened(as payload: NotePayload) -> NoteVersion {
        NoteVersion(
            version: version, text: payload.text, deleted: deleted, tags: payload.tags, pinned: payload.pinned,
            archived: payload.archived, editedAt: editedAt, savedAt: savedAt, device: device, editID: editID,
            attachments: payload.attachments)
    }
}
