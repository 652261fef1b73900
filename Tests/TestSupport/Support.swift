import Foundation
// What the tests share with the simulation (the in-process server, the transports, the process runner) is
// `SyncHarness`'s, a library `notes-sim` ships; every test target that imports TestSupport sees it as before.
@_exported import SyncHarness

/// Seeds for property tests: `NOTESYNC_SEED=<n>` replays one seed, else `count` seeds from a fixed base.
public func propertySeeds(_ count: Int, base: UInt64 = 0x5EED) -> [UInt64] {
    if let text = ProcessInfo.processInfo.environment["NOTESYNC_SEED"], let seed = UInt64(text) { return [seed] }
    return (0..<UInt64(count)).map { base &+ $0 }
}

/// Bytes from hexadecimal (a test's constant, a known answer).
public func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
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

/// The checked-in corpus of the fuzz targets (`Fuzz/corpus/<target>/`, grown by `scripts/fuzz.sh`), which the corpus
/// tests replay through the fuzzers' oracles on every test run.
public enum FuzzCorpus {
    /// The corpus has fewer inputs of a target than any run of `scripts/fuzz.sh` keeps: it is missing.
    public struct Missing: Error, CustomStringConvertible {
        public var target: String
        public var description: String { "the corpus of \(target) is missing" }
    }

    /// Every input kept for `target`, each named `target/file` (for a failure message).
    ///
    /// - Throws: ``Missing`` when the folder holds fewer than 5 inputs; a file system error when it cannot be read.
    public static func inputs(of target: String) throws -> [(name: String, bytes: Data)] {
        let folder = Binaries.packageRoot.appendingPathComponent("Fuzz/corpus").appendingPathComponent(target)
        let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
        guard files.count >= 5 else { throw Missing(target: target) }
        return try files.map { ("\(target)/\($0.lastPathComponent)", try Data(contentsOf: $0)) }
    }
}
