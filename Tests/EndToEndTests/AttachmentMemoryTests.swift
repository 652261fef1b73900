import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import NoteSyncProtocol
import NotesClient
import Testing
import TestSupport

/// Issue 33's memory target with the real `notesyncd`: a large file (1 GiB by default) uploaded by one device and
/// downloaded by another. What the transfer itself costs is checked: the daemon's peak resident memory over its idle
/// resident memory, and this process's (where the client library runs), each under 32 MiB, half the 64 MiB
/// per process (the rest is the process itself: notesyncd idles at about 39 MiB built for release, 49 MiB for
/// debug). The absolute peaks are printed (Docs/PERFORMANCE.md has them). Gated, as it writes the file five times
/// over (source, both chunk caches, the daemon's chunks, the saved copy): `FLAKENOTES_ATTACHMENT_MEMORY=1`, and
/// `FLAKENOTES_ATTACHMENT_MIB` for another size.
@Suite(
    "attachments, memory", .serialized,
    .enabled(if: ProcessInfo.processInfo.environment["FLAKENOTES_ATTACHMENT_MEMORY"] == "1", "set FLAKENOTES_ATTACHMENT_MEMORY=1"),
    .enabled(if: Binaries.exist(Binaries.notesyncd), "build notesyncd first (swift build)"))
struct AttachmentMemoryTests {
    /// What a transfer may add to a process's resident memory.
    static let growthLimitKiB = 32 * 1024

    /// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
    static func status(_ pid: pid_t, _ field: String) throws -> Int {
        let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(field + ":") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    /// Starts a new peak: `VmHWM` becomes the current `VmRSS` (Linux's `clear_refs` 5).
    static func resetPeak(_ pid: pid_t) throws {
        try Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/\(pid)/clear_refs"))
    }

    /// On SQLite (chunk files) and, when the suite has a PostgreSQL server, on PostgreSQL (`chunk_data`).
    @Test(arguments: OperatorsEndToEndTests.backends)
    func aLargeFileGoesUpAndDownInBoundedMemory(_ backend: String) async throws {
        let mib = Int(ProcessInfo.processInfo.environment["FLAKENOTES_ATTACHMENT_MIB"] ?? "") ?? 1024
        let directory = try NotesE2E.temporaryDirectory("attachments-memory")
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = try await OperatorsEndToEndTests.start(
            try await OperatorsEndToEndTests.storeArguments(backend, directory: directory) + ["--max-bytes-per-account", "\(Int64(4) << 30)"],
            directory: directory)
        let url = try #require(URL(string: daemon.url))

        // Distinct random chunks (the same chunk twice would be stored once), written a chunk at a time.
        let source = directory.appendingPathComponent("big.bin")
        #expect(FileManager.default.createFile(atPath: source.path, contents: nil))
        let output = try FileHandle(forWritingTo: source)
        let random = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
        var whole = SHA256()
        for _ in 0..<mib {
            let piece = try #require(try random.read(upToCount: 1 << 20))
            whole.update(data: piece)
            try output.write(contentsOf: piece)
        }
        try output.close()
        try random.close()

        func device(_ name: String) throws -> NotesClient {
            try NotesClient.open(
                home: directory.appendingPathComponent(name),
                environment: NotesEnvironment(transport: NotesEnvironment.fixed(URLSessionTransport(baseURL: url)), deviceName: name))
        }
        let phone = try device("phone")
        _ = try await phone.signUp(server: daemon.url, username: "alice", password: NotesE2E.password).sync.get()
        let laptop = try device("laptop")
        _ = try await laptop.signIn(server: daemon.url, username: "alice", password: NotesE2E.password).sync.get()
        let me = getpid()
        let daemonPID = daemon.child.pid

        let daemonIdle = try Self.status(daemonPID, "VmRSS")
        try Self.resetPeak(me)
        try Self.resetPeak(daemonPID)
        let before = try Self.status(me, "VmRSS")
        let started = ContinuousClock.now
        let upload = try await phone.uploadAttachment(file: source)
        let uploadTime = ContinuousClock.now - started
        let uploadGrowth = try Self.status(me, "VmHWM") - before
        let daemonUpload = try Self.status(daemonPID, "VmHWM")
        #expect(upload.chunksTransferred == mib && upload.manifest.sha256 == ContentHash(digest: whole.finalize()))

        try Self.resetPeak(me)
        try Self.resetPeak(daemonPID)
        let beforeDownload = try Self.status(me, "VmRSS")
        let saved = directory.appendingPathComponent("saved.bin")
        let downloadStarted = ContinuousClock.now
        let download = try await laptop.downloadAttachment(upload.manifest, to: saved)
        let downloadTime = ContinuousClock.now - downloadStarted
        let downloadGrowth = try Self.status(me, "VmHWM") - beforeDownload
        let daemonDownload = try Self.status(daemonPID, "VmHWM")
        #expect(download.chunksTransferred == mib)
        #expect((try FileManager.default.attributesOfItem(atPath: saved.path)[.size] as? NSNumber)?.intValue == mib << 20)

        let figures = """
            attachments, memory (\(backend)): \(mib) MiB, daemon idle \(daemonIdle) KiB; upload \(uploadTime), client growth \(uploadGrowth) KiB, daemon peak \(daemonUpload) KiB; \
            download \(downloadTime), client growth \(downloadGrowth) KiB, daemon peak \(daemonDownload) KiB
            """
        print(figures)
        #expect(daemonUpload - daemonIdle < Self.growthLimitKiB && daemonDownload - daemonIdle < Self.growthLimitKiB, "\(figures)")
        #expect(uploadGrowth < Self.growthLimitKiB && downloadGrowth < Self.growthLimitKiB, "\(figures)")
        _ = await daemon.terminate()
    }
}
