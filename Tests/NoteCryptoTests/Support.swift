import Foundation
import MiniFlake
import Testing

@testable import NoteCrypto

/// The seeds of a property test: `NOTESYNC_SEED` alone when set (to replay a failure), else `count` fixed ones.
func propertySeeds(_ count: Int, base: UInt64 = 0xC0FFEE) -> [UInt64] {
    if let text = ProcessInfo.processInfo.environment["NOTESYNC_SEED"], let seed = UInt64(text) { return [seed] }
    return (0..<UInt64(count)).map { base &+ $0 }
}

/// The comment of every expectation in a property test: how to replay it.
func replay(_ seed: UInt64) -> Comment { "replay with NOTESYNC_SEED=\(seed)" }

/// A flake ID from a small number, for fixtures.
func id(_ value: Int64) -> FlakeID { try! FlakeID(validating: value) }

/// Bytes `first`, `first + 1`, ... (`count` of them): the fixtures of known_answers.py.
func sequence(from first: UInt8, count: Int) -> [UInt8] { (0..<count).map { first &+ UInt8($0) } }

/// Bytes from a seeded generator.
func randomBytes(_ count: Int, using rng: inout SplitMix64) -> [UInt8] {
    (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
}

/// The fixtures every suite shares: accounts 1001 and 1002, the note (client 2002, origin 3003), edit 4004.
enum Fixture {
    static let account = id(1001)
    static let otherAccount = id(1002)
    static let context = NoteEnvelope.Context(account: account, clientID: id(2002), origin: id(3003), editID: id(4004))

    /// An account key of `account` with the given bytes (default: 0x80...0x9f, known_answers.py's).
    static func key(
        generation: UInt32 = 1, account: FlakeID = account, bytes: [UInt8] = sequence(from: 0x80, count: 32)
    ) -> AccountKey {
        try! AccountKey(account: account, generation: generation, restoringSecretBytes: bytes)
    }
}

extension NoteEnvelope.Context {
    /// This context with one field changed.
    func with(_ field: WritableKeyPath<Self, FlakeID>, _ value: FlakeID) -> Self {
        var copy = self
        copy[keyPath: field] = value
        return copy
    }
}

/// The NoteCrypto error `body` throws, or nil when it throws none (any other error is a test failure).
func error<T>(_ body: () throws -> T) -> NoteCryptoError? {
    do {
        _ = try body()
        return nil
    } catch let error as NoteCryptoError {
        return error
    } catch {
        Issue.record("not a NoteCryptoError: \(error)")
        return nil
    }
}
