import CSodium

/// libsodium's one-time set-up.
///
/// Every public entry point of NoteCrypto calls ``ensureInitialized()`` first, so a caller never has to.
enum Sodium {
    /// The result of `sodium_init()`, run at most once per process: Swift initialises a static property once,
    /// under a lock (`swift_once`), however many threads reach it first. `sodium_init` is itself idempotent and
    /// thread-safe, so a second library calling it too is harmless.
    private static let initialized: Bool = sodium_init() >= 0

    /// Makes sure libsodium is initialised; traps when it cannot be (libsodium then cannot be used at all: its
    /// random generator has no source).
    @inline(__always)
    static func ensureInitialized() {
        precondition(initialized, "sodium_init() failed: libsodium cannot be used in this process")
    }
}

/// `count` bytes from libsodium's cryptographically secure generator (`randombytes_buf`: `getrandom(2)` on Linux).
///
/// Use it for keys, salts and nonces; never a seeded generator. `count` must not be negative.
public func randomBytes(_ count: Int) -> [UInt8] {
    precondition(count >= 0, "randomBytes: negative count")
    Sodium.ensureInitialized()
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        if count > 0 { randombytes_buf(buffer.baseAddress!, count) }
        initialized = count
    }
}

/// Whether two byte strings are equal, in time that depends only on their length (`sodium_memcmp`).
///
/// Compare secrets (keys, checksums of secrets, MACs) with this, never with `==`, which returns at the first
/// differing byte. Strings of different lengths are unequal at once: a length is not secret.
public func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    lhs.withUnsafeBytes { left in rhs.withUnsafeBytes { right in constantTimeEquals(left, right) } }
}

/// ``constantTimeEquals(_:_:)`` over raw buffers, for the secrets NoteCrypto keeps in ``SecretBytes``.
func constantTimeEquals(_ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer) -> Bool {
    Sodium.ensureInitialized()
    guard left.count == right.count else { return false }
    guard left.count > 0 else { return true }
    return sodium_memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0
}
