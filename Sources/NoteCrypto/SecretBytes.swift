import CSodium

/// A fixed-size secret in memory libsodium guards, wiped when the last reference goes.
///
/// The bytes live in a `sodium_malloc` region (guard pages on both sides, a canary, locked into RAM where the
/// system allows so they are not swapped out) and are freed with `sodium_free`, which zeroes them first. They are
/// written once, by the initialiser, and only read after that, so sharing one between threads is safe.
///
/// Every secret key type of NoteCrypto holds one of these; copying the key copies the reference, not the bytes.
/// The class prints nothing of its bytes (no `CustomStringConvertible` reaches them; ``customMirror`` is empty).
final class SecretBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// How many bytes the secret holds (always at least 1).
    let count: Int
    private let pointer: UnsafeMutableRawPointer

    /// Allocates `count` guarded bytes and lets `initialize` write them; on a throw the bytes are wiped and freed.
    init<E: Error>(count: Int, initializingWith initialize: (UnsafeMutableRawBufferPointer) throws(E) -> Void) throws(E) {
        precondition(count > 0, "SecretBytes: a secret has at least one byte")
        Sodium.ensureInitialized()
        guard let pointer = sodium_malloc(count) else {
            fatalError("sodium_malloc(\(count)) failed: out of memory")
        }
        do {
            try initialize(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        } catch {
            sodium_free(pointer)
            throw error
        }
        self.count = count
        self.pointer = pointer
    }

    /// A copy of `bytes` (which the caller should wipe when it holds a secret of its own).
    convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(count: bytes.count) { (destination: UnsafeMutableRawBufferPointer) in
            destination.copyMemory(from: bytes)
        }
    }

    /// `count` bytes from libsodium's secure random generator.
    static func random(count: Int) -> SecretBytes {
        SecretBytes(count: count) { (destination: UnsafeMutableRawBufferPointer) in
            randombytes_buf(destination.baseAddress!, destination.count)
        }
    }

    deinit {
        sodium_free(pointer)
    }

    /// Lends the bytes for the duration of `body`; `body` must not keep the pointer.
    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// The bytes as a C `unsigned char *`, for libsodium's key parameters; `body` must not keep the pointer.
    func withKeyPointer<R, E: Error>(_ body: (UnsafePointer<UInt8>) throws(E) -> R) throws(E) -> R {
        try body(UnsafePointer(pointer.assumingMemoryBound(to: UInt8.self)))
    }

    /// Whether both secrets hold the same bytes, compared in constant time.
    func constantTimeEquals(_ other: SecretBytes) -> Bool {
        withUnsafeBytes { mine in other.withUnsafeBytes { theirs in NoteCrypto.constantTimeEquals(mine, theirs) } }
    }

    var description: String { "<\(count) secret bytes>" }
    var debugDescription: String { description }
    var customMirror: Mirror { Mirror(self, children: [], displayStyle: .class) }
}

/// A type holding a secret that prints only its name and public facts, never a byte of the secret: `print`,
/// string interpolation, `String(reflecting:)`, `dump` and debuggers' mirrors all show ``redactedDescription``.
public protocol RedactedSecret: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// What may be printed: the type and its public facts, e.g. `AccountKey(account 42, generation 3)`.
    var redactedDescription: String { get }
}

extension RedactedSecret {
    public var description: String { redactedDescription }
    public var debugDescription: String { redactedDescription }
    /// No children: `dump` and debuggers' mirrors show nothing of the secret.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
