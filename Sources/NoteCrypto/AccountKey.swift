import MiniFlake

/// An account's key for one generation: 32 random bytes that encrypt the account's notes (``NoteEnvelope``).
///
/// Generations count rotations: the first key is generation 1, and each rotation (``rotated()``) makes a new random
/// key with the next generation, so devices signed out before it never hold it. A key knows its account, and
/// NoteCrypto refuses to use it for another account's data.
///
/// The server only ever holds it wrapped (``WrappedAccountKey``, ``KeyHandover``); devices keep unwrapped keys in
/// their local store (``withSecretBytes(_:)`` and ``init(account:generation:restoringSecretBytes:)``).
public struct AccountKey: Sendable, Equatable, RedactedSecret {
    /// The key's length in bytes (`crypto_aead_xchacha20poly1305_ietf_KEYBYTES`).
    public static let byteCount = 32
    /// The generation of an account's first key.
    public static let firstGeneration: UInt32 = 1

    /// The account whose data this key encrypts.
    public let account: FlakeID
    /// Which rotation this key belongs to: 1 for the first key, then one more per rotation.
    public let generation: UInt32
    let secret: SecretBytes

    init(account: FlakeID, generation: UInt32, secret: SecretBytes) {
        self.account = account
        self.generation = generation
        self.secret = secret
    }

    /// A new random key, generation 1, for an account setting up encryption.
    public static func generate(account: FlakeID) -> AccountKey {
        AccountKey(account: account, generation: firstGeneration, secret: .random(count: byteCount))
    }

    /// A new random key for the same account, one generation later: what a rotation hands to the remaining devices.
    ///
    /// - Throws: ``NoteCryptoError/invalidGeneration(_:)`` after 2^32 − 1 generations.
    public func rotated() throws(NoteCryptoError) -> AccountKey {
        guard generation < UInt32.max else { throw .invalidGeneration(generation) }
        return AccountKey(account: account, generation: generation + 1, secret: .random(count: Self.byteCount))
    }

    /// A key read back from the device's local store.
    ///
    /// - Throws: ``NoteCryptoError/invalidKeyLength(expected:found:)`` unless `bytes` are 32;
    ///   ``NoteCryptoError/invalidGeneration(_:)`` for generation 0.
    public init(account: FlakeID, generation: UInt32, restoringSecretBytes bytes: [UInt8]) throws(NoteCryptoError) {
        guard bytes.count == Self.byteCount else { throw .invalidKeyLength(expected: Self.byteCount, found: bytes.count) }
        guard generation >= Self.firstGeneration else { throw .invalidGeneration(generation) }
        self.init(account: account, generation: generation, secret: bytes.withUnsafeBytes { SecretBytes(copying: $0) })
    }

    /// Lends the key's 32 bytes, for the device's local store only (never the network, never a log). The pointer
    /// must not outlive `body`; wipe any copy made of it.
    public func withSecretBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try secret.withUnsafeBytes(body)
    }

    public var redactedDescription: String { "AccountKey(account \(account), generation \(generation), <redacted>)" }

    /// Same account, same generation, same bytes (compared in constant time).
    public static func == (lhs: AccountKey, rhs: AccountKey) -> Bool {
        lhs.account == rhs.account && lhs.generation == rhs.generation && lhs.secret.constantTimeEquals(rhs.secret)
    }
}

/// The account keys a device holds for one account, by generation; ``current`` (the newest) seals new data.
///
/// Opening anything looks its generation up here, so a blob of a generation the device never got is
/// ``NoteCryptoError/unknownKeyGeneration(_:_:)``, and a key of another account can never join.
public struct AccountKeyRing: Sendable, RedactedSecret {
    /// The account every key in the ring belongs to.
    public let account: FlakeID
    private var keys: [UInt32: AccountKey]
    /// The key of the newest generation held: what seals new notes.
    public private(set) var current: AccountKey

    /// A ring of one key.
    public init(_ key: AccountKey) {
        account = key.account
        keys = [key.generation: key]
        current = key
    }

    /// A ring of several keys of one account (read back from the local store, in any order).
    ///
    /// - Throws: ``NoteCryptoError/keyOfAnotherAccount(expected:found:)`` when a key belongs to another account than
    ///   `account` (or `keys` is empty, reported as generation 0 missing: ``NoteCryptoError/invalidGeneration(_:)``);
    ///   ``NoteCryptoError/conflictingGeneration(_:)`` for two different keys of one generation.
    public init(account: FlakeID, keys: [AccountKey]) throws(NoteCryptoError) {
        guard let first = keys.first else { throw .invalidGeneration(0) }
        guard first.account == account else { throw .keyOfAnotherAccount(expected: account, found: first.account) }
        var ring = AccountKeyRing(first)
        for key in keys.dropFirst() { try ring.insert(key) }
        self = ring
    }

    /// Adds a key (a rotation's new generation, or an older one unwrapped for old notes); the newest becomes
    /// ``current``. Inserting a key the ring already holds changes nothing.
    ///
    /// - Throws: ``NoteCryptoError/keyOfAnotherAccount(expected:found:)``,
    ///   ``NoteCryptoError/conflictingGeneration(_:)`` when the ring holds another key of that generation.
    public mutating func insert(_ key: AccountKey) throws(NoteCryptoError) {
        guard key.account == account else { throw .keyOfAnotherAccount(expected: account, found: key.account) }
        if let held = keys[key.generation] {
            guard held == key else { throw .conflictingGeneration(key.generation) }
            return
        }
        keys[key.generation] = key
        if key.generation > current.generation { current = key }
    }

    /// The key of `generation`, if the ring holds it.
    public func key(generation: UInt32) -> AccountKey? { keys[generation] }

    /// The generations held, oldest first.
    public var generations: [UInt32] { keys.keys.sorted() }

    public var redactedDescription: String {
        "AccountKeyRing(account \(account), generations \(generations.map(String.init).joined(separator: ",")), <redacted>)"
    }
}
