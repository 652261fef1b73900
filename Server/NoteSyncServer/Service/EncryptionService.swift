import Crypto
import Foundation
import Logging
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import Synchronization

/// End-to-end encrypted accounts: prelogin (`POST /v1/prelogin`), the keys endpoint (`GET /v1/account/keys`), and
/// the checks every request carrying key material goes through (``setup(_:password:)``, ``devicePublicKey(_:)``).
///
/// The server never holds a key that opens a note: it checks the *form* of what it stores with NoteCrypto (lengths,
/// wrappers, generations, canonical base64) and serves it back. SECURITY.md says what it stores.
public final class EncryptionService: Sendable {
    public let store: any NoteStore
    let randomBytes: RandomBytes
    let logger: Logger
    /// The secret fake prelogin salts are made with, read (or made) once.
    private let preloginSecret = Mutex<[UInt8]?>(nil)

    public init(_ context: ServiceContext, configuration: ServiceConfiguration) {
        store = context.store
        randomBytes = configuration.randomBytes
        logger = context.logger
    }

    /// The store's encryption half, or a server fault (every store of this server has one).
    var keyStore: any EncryptionStore {
        get throws {
            guard let store = store as? any EncryptionStore else {
                throw SyncError(.internalError, "This server's store keeps no encryption keys.")
            }
            return store
        }
    }

    // MARK: - Prelogin

    /// How to derive the credential of `request.username` (`POST /v1/prelogin`).
    ///
    /// A plaintext account answers `encrypted: false`; any other state its KDF parameters. A username with no
    /// account answers like an encrypted one, with a salt that is the same at every ask (the first 16 bytes of
    /// HMAC-SHA256 of the canonical username under a random server secret kept in the store) and the production
    /// cost: the answer does not tell an unknown username from an encrypted account.
    ///
    /// - Throws: `invalid_field` when the username breaks ``CredentialRules`` (no account can have it).
    public func prelogin(_ request: PreloginRequest) async throws -> PreloginResponse {
        guard let username = CredentialRules.canonicalUsername(request.username) else {
            throw SyncError(
                .invalidField, "A username is \(CredentialRules.usernameRule).", field: PreloginRequest.CodingKeys.username.stringValue)
        }
        if let account = try await store.account(byUsername: username) {
            guard account.encryption != .plaintext else { return PreloginResponse(encrypted: false) }
            guard let keys = try await keyStore.encryptionKeys(accountID: account.id) else {
                throw SyncError(.internalError, "The encrypted account \(account.id) has no keys.")
            }
            return PreloginResponse(encrypted: true, kdf: Self.kdfInfo(keys.kdf))
        }
        let salt = try await fakeSalt(username: username)
        return PreloginResponse(encrypted: true, kdf: Self.kdfInfo(try KDFParameters(cost: .production, salt: salt)))
    }

    /// The fake salt of a username with no account.
    func fakeSalt(username: String) async throws -> [UInt8] {
        let secret: [UInt8]
        if let known = preloginSecret.withLock({ $0 }) {
            secret = known
        } else {
            let randomBytes = self.randomBytes
            secret = try await keyStore.serverSecret(named: Self.preloginSecretName) { randomBytes.bytes(32) }
            preloginSecret.withLock { $0 = secret }
        }
        let mac = HMAC<SHA256>.authenticationCode(for: Data(username.utf8), using: SymmetricKey(data: secret))
        return Array(Array(mac).prefix(KDFParameters.saltByteCount))
    }

    /// The name of the store's secret fake prelogin salts are made with.
    static let preloginSecretName = "prelogin-salt"

    // MARK: - Keys

    /// The key material a device needs for the generations after `after` (`GET /v1/account/keys?after=G`), at most
    /// ``EncryptionLimits/maxGenerationsPerAnswer`` of them (``AccountKeysResponse``).
    ///
    /// - Throws: `invalid_field` when `after` is not an integer from 0 to the highest generation; `not_encrypted`
    ///   (409) for a plaintext account; `unauthorized` when the account is gone.
    public func keys(after text: String?, session: SessionRecord) async throws -> AccountKeysResponse {
        let after: Int64
        if let text {
            guard let value = Int64(text), String(value) == text, (0...EncryptionLimits.maxGeneration).contains(value) else {
                throw SyncError(
                    .invalidField, "after is a key generation: an integer from 0 to \(EncryptionLimits.maxGeneration).",
                    field: AccountKeysQuery.after)
            }
            after = value
        } else {
            after = 0
        }
        guard let account = try await store.account(byID: session.accountID) else {
            throw SyncError(.unauthorized, "The session's account no longer exists.")
        }
        guard account.encryption != .plaintext, let keys = try await keyStore.encryptionKeys(accountID: account.id) else {
            throw SyncError(.notEncrypted, "This account is not end-to-end encrypted: it has no keys.")
        }
        let current = Int64(account.keyGeneration)
        let through = min(current, max(after, 0) + EncryptionLimits.maxGenerationsPerAnswer)
        var chain = KeyChain()
        if after < through {
            chain = try await keyStore.keyChain(
                accountID: account.id, sessionID: session.id, generations: UInt32(after + 1)...UInt32(through))
        }
        return AccountKeysResponse(
            state: account.encryption, generation: current, through: max(through, after), wrappedKey: keys.wrappedKey.text,
            older: chain.older.filter { Int64($0.generation) < current }.map(\.text),
            handovers: chain.handovers.map { KeyHandoverEntry(generation: Int64($0.generation), handover: $0.handover.text) },
            passwordHandovers: chain.passwordHandovers.map { KeyHandoverEntry(generation: Int64($0.generation), handover: $0.handover.text) },
            recoveryWrappedKey: keys.recoveryWrappedKey.text,
            recoveryHandovers: chain.recoveryHandovers.map { KeyHandoverEntry(generation: Int64($0.generation), handover: $0.handover.text) },
            recoveryPublicKey: keys.recoveryPublicKey.text, passwordPublicKey: keys.passwordPublicKey.text)
    }

    /// Stores a new generation of the account key (`POST /v1/account/keys/rotate`), in one transaction.
    ///
    /// - Throws: `invalid_field` (a generation out of range, a blob not of its form or not of the generations the
    ///   rotation names, too many hand-overs, one session twice, a `recovery` not of the new generation), `not_encrypted` (409, a plaintext account),
    ///   `stale_generation` (409: the account is not at `generation - 1`; nothing stored), `unknown_session` (404: a
    ///   hand-over names a session that is not the account's; nothing stored).
    public func rotate(_ request: RotateKeysRequest, session: SessionRecord) async throws -> RotateKeysResponse {
        var rotation = try Self.rotation(request)
        rotation.recovery = try request.recovery.map { renewal in try Self.recovery(renewal, generation: rotation.generation) }
        guard let account = try await store.account(byID: session.accountID) else {
            throw SyncError(.unauthorized, "The session's account no longer exists.")
        }
        guard account.encryption != .plaintext else {
            throw SyncError(.notEncrypted, "This account is not end-to-end encrypted: it has no key to rotate.")
        }
        let outcome = try await keyStore.rotateKeys(accountID: account.id, rotation)
        try Self.check(outcome)
        logger.info(
            "account key rotated",
            metadata: [
                "account_id": "\(account.id)", "generation": "\(rotation.generation)", "recovery_key_replaced": "\(rotation.recovery != nil)",
            ])
        return RotateKeysResponse(generation: Int64(rotation.generation))
    }

    /// Throws for a rotation the store refused: `stale_generation` (409), `unknown_session` (404); `prefix` leads the
    /// field.
    static func check(_ outcome: RotationOutcome, prefix: String = "") throws {
        typealias Key = RotateKeysRequest.CodingKeys
        switch outcome {
        case .rotated:
            return
        case .stale(let current):
            throw SyncError(
                .staleGeneration,
                "The account is at key generation \(current): a rotation makes generation \(Int64(current) + 1); fetch the keys and retry.",
                field: prefix + Key.generation.stringValue)
        case .unknownSession(let id):
            throw SyncError(
                .unknownSession, "No session \(id) in this account (signed out meanwhile?).", field: prefix + Key.handovers.stringValue)
        }
    }

    /// A rotation's parts but its `recovery` (see ``recovery(_:generation:prefix:)``), each checked for its form
    /// (fields named after `prefix`).
    ///
    /// - Throws: `invalid_field`.
    static func rotation(_ request: RotateKeysRequest, prefix: String = "") throws -> KeyRotation {
        typealias Key = RotateKeysRequest.CodingKeys
        guard (2...EncryptionLimits.maxGeneration).contains(request.generation) else {
            throw SyncError(
                .invalidField, "generation is the account's current generation plus one (2 to \(EncryptionLimits.maxGeneration)).",
                field: prefix + Key.generation.stringValue)
        }
        let generation = UInt32(request.generation)
        let older: WrappedAccountKey
        do {
            older = try WrappedAccountKey(text: request.older)
        } catch {
            throw SyncError(.invalidField, "Not a wrapped account key (\(error)).", field: prefix + Key.older.stringValue)
        }
        guard older.wrapper == .accountKey, older.generation == generation - 1, older.wrapperGeneration == generation else {
            throw SyncError(
                .invalidField, "older is generation \(generation - 1) wrapped by generation \(generation).",
                field: prefix + Key.older.stringValue)
        }
        guard request.handovers.count <= EncryptionLimits.maxHandoversPerRotation else {
            throw SyncError(
                .invalidField, "A rotation carries at most \(EncryptionLimits.maxHandoversPerRotation) hand-overs.",
                field: prefix + Key.handovers.stringValue)
        }
        var handovers: [(HandoverRecipient, KeyHandover)] = []
        var seen = Set<FlakeID>()
        for (index, entry) in request.handovers.enumerated() {
            let field = "\(prefix)\(Key.handovers.stringValue)[\(index)]"
            guard seen.insert(entry.sessionID).inserted else {
                throw SyncError(.invalidField, "Session \(entry.sessionID) has two hand-overs.", field: "\(field).sessionID")
            }
            handovers.append((.session(entry.sessionID), try handover(entry.handover, field: "\(field).handover")))
        }
        handovers.append((.recoveryKey, try handover(request.recoveryHandover, field: prefix + Key.recoveryHandover.stringValue)))
        handovers.append((.password, try handover(request.passwordHandover, field: prefix + Key.passwordHandover.stringValue)))
        return KeyRotation(generation: generation, older: older, handovers: handovers)
    }

    /// A new recovery key's material in a rotation to `generation`: that generation wrapped by the recovery key, and a
    /// public key.
    ///
    /// - Throws: `invalid_field` naming the first part not of its form.
    static func recovery(_ renewal: RecoveryRenewal, generation: UInt32, prefix: String = "") throws -> AccountRecovery {
        let field = prefix + RotateKeysRequest.CodingKeys.recovery.stringValue + "."
        typealias Key = RecoveryRenewal.CodingKeys
        return AccountRecovery(
            wrappedKey: try wrappedKey(
                renewal.recoveryWrappedKey, wrapper: .recoveryKey, generation: generation, field: field + Key.recoveryWrappedKey.stringValue),
            publicKey: try publicKey(renewal.recoveryPublicKey, field: field + Key.recoveryPublicKey.stringValue))
    }

    /// A key hand-over in its text form.
    static func handover(_ text: String, field: String) throws -> KeyHandover {
        do {
            return try KeyHandover(text: text)
        } catch {
            throw SyncError(.invalidField, "Not a key hand-over of \(KeyHandover.byteCount) bytes (\(error)).", field: field)
        }
    }

    /// What a sign-in answer says of `account`'s encryption: nil for a plaintext account.
    func signInAnswer(_ account: AccountRecord) async throws -> SignInEncryption? {
        guard account.encryption != .plaintext else { return nil }
        guard let keys = try await keyStore.encryptionKeys(accountID: account.id) else {
            throw SyncError(.internalError, "The encrypted account \(account.id) has no keys.")
        }
        return SignInEncryption(
            state: account.encryption, kdf: Self.kdfInfo(keys.kdf), generation: Int64(account.keyGeneration),
            wrappedKey: keys.wrappedKey.text, recoveryPublicKey: keys.recoveryPublicKey.text, passwordPublicKey: keys.passwordPublicKey.text)
    }

    // MARK: - Checks

    /// The wire form of KDF parameters.
    static func kdfInfo(_ parameters: KDFParameters) -> KDFInfo {
        KDFInfo(salt: parameters.saltText, opsLimit: Int64(clamping: parameters.cost.opsLimit), memLimit: Int64(parameters.cost.memLimitBytes))
    }

    /// The key material of a new encrypted account, checked: KDF parameters within ``EncryptionLimits``, generation 1
    /// wrapped by the password and by the recovery key, two X25519 public keys; and the password, which must be an
    /// AuthKey (64 lowercase hexadecimal characters), never a password typed by a person.
    ///
    /// - Throws: `invalid_field` naming the first field that is not of its form (`field` is `prefix` + its path).
    static func setup(_ setup: EncryptionSetup, password: String, prefix: String, passwordField: String) throws -> AccountKeys {
        guard isAuthKeyForm(password) else {
            throw SyncError(
                .invalidField, "An encrypted account's password is its AuthKey: 64 lowercase hexadecimal characters.", field: passwordField)
        }
        typealias Key = EncryptionSetup.CodingKeys
        let kdf = try kdfParameters(setup.kdf, field: prefix + Key.kdf.stringValue)
        let passwordWrapped = try wrappedKey(setup.wrappedKey, wrapper: .password, generation: 1, field: prefix + Key.wrappedKey.stringValue)
        let recoveryWrapped = try wrappedKey(
            setup.recoveryWrappedKey, wrapper: .recoveryKey, generation: 1, field: prefix + Key.recoveryWrappedKey.stringValue)
        return AccountKeys(
            kdf: kdf, wrappedKey: passwordWrapped, recoveryWrappedKey: recoveryWrapped,
            recoveryPublicKey: try publicKey(setup.recoveryPublicKey, field: prefix + Key.recoveryPublicKey.stringValue),
            passwordPublicKey: try publicKey(setup.passwordPublicKey, field: prefix + Key.passwordPublicKey.stringValue))
    }

    /// Whether `text` is an AuthKey's wire form: 64 lowercase hexadecimal characters.
    static func isAuthKeyForm(_ text: String) -> Bool {
        text.utf8.count == 2 * AuthKey.byteCount
            && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// KDF parameters within ``EncryptionLimits`` with a 16-byte salt.
    static func kdfParameters(_ info: KDFInfo, field: String) throws -> KDFParameters {
        typealias Key = KDFInfo.CodingKeys
        guard EncryptionLimits.opsLimit.contains(info.opsLimit) else {
            throw SyncError(
                .invalidField,
                "opsLimit is \(EncryptionLimits.opsLimit.lowerBound)–\(EncryptionLimits.opsLimit.upperBound) Argon2id passes.",
                field: "\(field).\(Key.opsLimit.stringValue)")
        }
        guard EncryptionLimits.memLimit.contains(info.memLimit) else {
            throw SyncError(
                .invalidField,
                "memLimit is \(EncryptionLimits.memLimit.lowerBound)–\(EncryptionLimits.memLimit.upperBound) bytes of Argon2id memory.",
                field: "\(field).\(Key.memLimit.stringValue)")
        }
        do {
            return try KDFParameters(
                cost: KDFCost(opsLimit: UInt64(info.opsLimit), memLimitBytes: Int(info.memLimit)), saltText: info.salt)
        } catch {
            throw SyncError(
                .invalidField, "The salt is \(KDFParameters.saltByteCount) bytes in URL-safe base64 without padding (\(error)).",
                field: "\(field).\(Key.salt.stringValue)")
        }
    }

    /// A wrapped account key of `wrapper` and `generation` in its text form.
    static func wrappedKey(_ text: String, wrapper: WrappedAccountKey.Wrapper, generation: UInt32, field: String) throws -> WrappedAccountKey {
        let key: WrappedAccountKey
        do {
            key = try WrappedAccountKey(text: text)
        } catch {
            throw SyncError(.invalidField, "Not a wrapped account key (\(error)).", field: field)
        }
        guard key.wrapper == wrapper, key.generation == generation else {
            throw SyncError(
                .invalidField, "Expected generation \(generation) wrapped by \(wrapper); this is generation \(key.generation) wrapped by \(key.wrapper).",
                field: field)
        }
        return key
    }

    /// An X25519 public key in its text form.
    static func publicKey(_ text: String, field: String) throws -> DevicePublicKey {
        do {
            return try DevicePublicKey(text: text)
        } catch {
            throw SyncError(.invalidField, "Not an X25519 public key of \(DevicePublicKey.byteCount) bytes (\(error)).", field: field)
        }
    }
}
