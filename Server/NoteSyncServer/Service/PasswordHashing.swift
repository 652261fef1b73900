import HummingbirdBcrypt
import NIOPosix

/// How the services hash and verify passwords: bcrypt (a slow hash, run on NIO's thread pool so that it never
/// blocks the cooperative pool), or, for a caller that stores no real password (the simulation), something cheaper.
public struct PasswordHashing: Sendable {
    /// The stored form of a password.
    public let hash: @Sendable (String) -> String
    /// Whether a password matches a stored form.
    public let verify: @Sendable (_ password: String, _ hash: String) -> Bool
    /// Whether the work is slow enough to move off the cooperative pool.
    public let isSlow: Bool

    public init(hash: @escaping @Sendable (String) -> String, verify: @escaping @Sendable (String, String) -> Bool, isSlow: Bool) {
        self.hash = hash
        self.verify = verify
        self.isSlow = isSlow
    }

    /// bcrypt at `cost` (4...31).
    public static func bcrypt(cost: Int) -> PasswordHashing {
        let cost = UInt8(clamping: cost)
        return PasswordHashing(
            hash: { Bcrypt.hash($0, cost: cost) }, verify: { Bcrypt.verify($0, hash: $1) }, isSlow: true)
    }

    func run<T: Sendable>(_ work: @escaping @Sendable (PasswordHashing) -> T) async throws -> T {
        guard isSlow else { return work(self) }
        return try await NIOThreadPool.singleton.runIfActive { work(self) }
    }
}
