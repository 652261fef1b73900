import Foundation
import NoteSyncProtocol
import NotesClient
import Testing

@testable import NoteSim

/// Issue 33: attachment steps in the simulation (attach, detach, save; uploads and downloads cut mid-file) and their
/// invariants, `attachments-downloadable`, `no-chunk-resent` and `no-cross-account` for chunks.
@Suite struct AttachmentSimulationTests {
    /// A short sweep with attachment steps mixed in finds no violation, and the steps really ran: files attached,
    /// saved and compared, syncs cut mid-upload and resumed.
    @Test func aShortSweepWithAttachmentStepsFindsNoViolation() async throws {
        var total = SimSummary()
        for seed: UInt64 in 1...6 {
            let parameters = SimParameters(seed: seed, steps: 300)
            let outcome = try await Simulation.run(ScheduleGenerator.generate(parameters), parameters: parameters)
            #expect(outcome.violation == nil, "seed \(seed): \(outcome.violation.map(String.init(describing:)) ?? "")")
            total.add(outcome.summary)
        }
        #expect(total.filesAttached > 0 && total.attachmentsSaved > 0 && total.chunksUploaded > 0)
        #expect(total.uploadsCut > 0, "a sync was cut mid-upload and resumed")
    }

    /// A three-chunk file whose upload is cut after two chunks: the resumed sync sends the third, each chunk goes up
    /// once (with the planted bug 10 the resume sends all three again: 4 counted); another device's save of it, cut
    /// after one chunk, fetches the two others, and it saves as attached everywhere.
    @Test func aCutUploadResumesWithoutSendingAChunkTwice() async throws {
        let file = SimFile(name: "big.bin", seed: 99, size: 2 * ChunkRules.chunkSize + 1000)
        let steps: [SimAction] = [
            .signIn(device: 0, account: 0, faults: []), .signIn(device: 1, account: 0, faults: []),
            .create(device: 0, token: "a"), .sync(device: 0, faults: []),
            .cutUpload(device: 0, note: 0, file: file, afterChunks: 2),
            .sync(device: 1, faults: []), .save(device: 1, note: 0, index: 0, cutAfter: 1), .save(device: 0, note: 0, index: 0, cutAfter: nil),
        ]
        let parameters = SimParameters(seed: 5, accounts: 1, devices: 2, steps: steps.count, encryptedShare: 0)
        let outcome = try await Simulation.run(steps, parameters: parameters)
        #expect(outcome.violation == nil, "\(outcome.violation.map(String.init(describing:)) ?? "")")
        #expect(outcome.summary.filesAttached == 1 && outcome.summary.uploadsCut == 1)
        #expect(outcome.summary.chunksUploaded == 3)
        // Device 1 pulled the attachment; its save, cut after one chunk, resumed with the two others.
        #expect(outcome.summary.downloadsCut == 1 && outcome.summary.chunksDownloaded == 3)
        #expect(outcome.summary.attachmentsSaved >= 3)
    }

    /// The ledger behind `no-chunk-resent`: an upload of a chunk the server said it has (left out of a `missing`
    /// answer, or a `PUT` answered) in the same session, or a download of a chunk downloaded before, is a transfer
    /// made again; a request whose answer was lost, or another session, teaches nothing.
    @Test func theLedgerFindsAChunkSentAgain() throws {
        let (one, two, three) = try ["1", "2", "3"].map { try #require(ContentHash(String(repeating: $0, count: 64))) }.triple()
        func put(_ hash: ContentHash, _ token: String = "s1") -> WireRequest {
            WireRequest(method: Endpoint.putChunk.method, path: Endpoint.putChunk.path(hash: hash), bearerToken: token, body: Data("x".utf8))
        }
        let get = WireRequest(method: Endpoint.getChunk.method, path: Endpoint.getChunk.path(hash: three), bearerToken: "s1")
        var ledger = ChunkLedger()
        let missing = WireRequest(.missingChunks, bearerToken: "s1", body: try WireJSON.encoder().encode(MissingChunksRequest(hashes: [one, two])))
        ledger.answered(missing, WireResponse(status: 200, body: try WireJSON.encoder().encode(MissingChunksResponse(missing: [two]))))
        ledger.sending(put(two))
        ledger.sending(put(one, "s2"))
        #expect(ledger.again.isEmpty)
        ledger.sending(put(one))
        #expect(ledger.again.count == 1)
        ledger.answered(put(two), WireResponse(status: 201))
        ledger.sending(put(two))
        ledger.sending(get)
        ledger.answered(get, WireResponse(status: 200, body: Data("x".utf8)))
        ledger.sending(get)
        #expect(ledger.again.count == 3)
        #expect(ledger.uploaded == 1 && ledger.downloaded == 1)
    }

    /// A file that saves with other bytes than those attached breaks `attachments-downloadable` (the oracle is told
    /// another file for it, as a client that mixed up chunks would give).
    @Test func anAttachmentSavedWithOtherBytesIsAViolation() async throws {
        let file = SimFile(name: "a.bin", seed: 1, size: 3000)
        let violation = try await Self.violation(
            after: [.signIn(device: 0, account: 0, faults: []), .create(device: 0, token: "a"), .attach(device: 0, note: 0, file: file)]
        ) { simulation in
            let sha = try #require(simulation.oracle.files.first?.key)
            simulation.oracle.files[sha] = SimFile(name: "a.bin", seed: 2, size: 3000)
        }
        #expect(violation?.invariant == .attachmentsDownloadable, "\(violation.map(String.init(describing:)) ?? "none")")
    }

    /// A chunk of a file attached only to account 0's notes that account 1 has breaks `no-cross-account`.
    @Test func aChunkInAnotherAccountIsAViolation() async throws {
        let file = SimFile(name: "a.bin", seed: 1, size: 3000)
        let violation = try await Self.violation(
            after: [
                .signIn(device: 0, account: 0, faults: []), .signIn(device: 1, account: 1, faults: []), .create(device: 0, token: "a"),
                .attach(device: 0, note: 0, file: file), .sync(device: 0, faults: []),
            ], accounts: 2
        ) { simulation in
            let chunk = try #require(simulation.oracle.manifests.first?.value.chunks.first)
            let put = WireRequest(
                method: Endpoint.putChunk.method, path: Endpoint.putChunk.path(hash: chunk),
                bearerToken: simulation.accounts[1].auditToken, body: file.bytes)
            #expect(try await simulation.server.transport.send(put).status == 201)
        }
        #expect(violation?.invariant == .noCrossAccount, "\(violation.map(String.init(describing:)) ?? "none")")
        #expect(violation?.detail.contains("account 1 has chunk") == true)
    }

    /// Runs `steps` (plaintext accounts) with every check, then `tamper`, then quiescence's checks: the violation found.
    static func violation(
        after steps: [SimAction], accounts: Int = 1, tamper: (Simulation) async throws -> Void
    ) async throws -> Violation? {
        let parameters = SimParameters(seed: 1, accounts: accounts, devices: 2, steps: steps.count, encryptedShare: 0)
        let simulation = Simulation(parameters: parameters, target: .inProcess, recordEvents: false, runTag: "")
        defer { try? FileManager.default.removeItem(at: simulation.scratch) }
        try await simulation.setUp()
        do {
            for (index, action) in steps.enumerated() {
                simulation.step = index
                try await simulation.execute(action)
                try await simulation.checkAfterStep(action)
            }
            try await tamper(simulation)
            try await simulation.quiesceAndCheck()
        } catch let violation as Violation {
            await simulation.server.shutdown()
            return violation
        }
        await simulation.server.shutdown()
        return nil
    }
}

extension Array {
    fileprivate func triple() -> (Element, Element, Element) { (self[0], self[1], self[2]) }
}
