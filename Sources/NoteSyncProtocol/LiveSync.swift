/// The limits of waiting pulls (the `wait` parameter of `GET /v1/notes/changes`), served by `GET /v1/info` as
/// `live` by a server that supports them.
///
/// A pull that names `wait=N` and finds no change after its cursor is held open until a change of the account
/// commits (then answered with it) or until `N` seconds pass (then an empty page at the same cursor). `N` above
/// ``maxWaitSeconds`` is clamped to it. A server holds at most ``maxWaitersPerAccount`` waiting pulls per account
/// (and a configured number in all); past either it answers 429 `too_many_waiters` with `Retry-After`.
public struct LiveLimits: Codable, Sendable, Equatable {
    /// The longest wait in seconds; larger `wait` values are clamped to it. Below the 60 seconds most proxies allow
    /// an idle answer.
    public var maxWaitSeconds: Int
    /// Most waiting pulls one account may hold at once on one daemon (`too_many_waiters`, 429).
    public var maxWaitersPerAccount: Int

    public enum CodingKeys: String, WireKey { case maxWaitSeconds, maxWaitersPerAccount }

    public init(maxWaitSeconds: Int = 55, maxWaitersPerAccount: Int = 64) {
        self.maxWaitSeconds = maxWaitSeconds
        self.maxWaitersPerAccount = maxWaitersPerAccount
    }

    public static let `default` = LiveLimits()

    /// The seconds a `wait` value asks for: ASCII digits of a non-negative integer (any size; clamped to
    /// ``maxWaitSeconds``). Nil for anything else (`invalid_wait`).
    public func waitSeconds(_ text: String) -> Int? {
        let digits = text.utf8
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return min(Int(text) ?? Int.max, maxWaitSeconds)
    }
}
