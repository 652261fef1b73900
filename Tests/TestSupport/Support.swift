import Foundation
// What the tests share with the simulation (the in-process server, the transports, the process runner) is
// `SyncHarness`'s, a library `notes-sim` ships; every test target that imports TestSupport sees it as before.
@_exported import SyncHarness

/// Seeds for property tests: `NOTESYNC_SEED=<n>` replays one seed, else `count` seeds from a fixed base.
public func propertySeeds(_ count: Int, base: UInt64 = 0x5EED) -> [UInt64] {
    if let text = ProcessInfo.processInfo.environment["NOTESYNC_SEED"], let seed = UInt64(text) { return [seed] }
    return (0..<UInt64(count)).map { base &+ $0 }
}

/// A fresh directory under the system's temporary directory, named after `label`.
public func makeTemporaryDirectory(_ label: String) throws -> URL {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flakenotes-\(label)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

/// A fresh temporary directory, removed when `body` returns.
public func withTemporaryDirectory<T>(_ label: String = "test", _ body: (URL) async throws -> T) async throws -> T {
    let directory = try makeTemporaryDirectory(label)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}
