import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient

// Attachments on notes (issue 33): devices attach, detach and save files; faults cut uploads and downloads mid-file.
// The checks: every attachment a note refers to can be saved on every device of the account with the bytes that were
// attached (`attachments-downloadable`), a resumed transfer moves no chunk the device knew the other side had
// (`no-chunk-resent`), and no attachment or chunk is seen in an account no note of which it was attached to
// (`no-cross-account`).

extension Simulation {
    /// Attaches `file` to the device's `index`-th live note, of a plaintext or an encrypted account (whose device seals
    /// the chunks). A note with the most attachments is skipped.
    func attach(_ file: SimFile, note index: Int, on d: Int) throws {
        guard let device = devices[safe: d], let target = try liveNote(d, index: index),
            target.attachments.count < AttachmentRules.maxAttachmentsPerNote
        else { return }
        let source = scratch.appendingPathComponent(file.name)
        // The note's owner, not the device's account: a signed-out device still shows its account's notes. A note of
        // an encrypted account or of no account gets the file with canary words (the store scans find its chunks if
        // they go up in the clear).
        let owner = owner(of: target, on: device)
        let canary = owner == nil || isEncrypted(owner: owner)
        guard FileManager.default.createFile(atPath: source.path, contents: canary ? file.canaryBytes : file.bytes) else {
            throw SimSetupError("cannot write \(source.path)")
        }
        defer { try? FileManager.default.removeItem(at: source) }
        let attached: LocalNote
        do {
            attached = try device.client.attach([source], to: target.id)
        } catch {
            throw fail(.unexpectedError, "device \(d): attaching \(file.name) failed: \(error)")
        }
        guard let manifest = attached.attachments.first(where: { $0.name == file.name }) else {
            throw fail(.unexpectedError, "device \(d): \(file.name) is not among the note's attachments after attaching it")
        }
        oracle.attached(file, as: manifest, to: target.key, in: owner.flatMap { id in accounts.firstIndex { $0.accountID == id } })
        if canary { oracle.canaryFiles.insert(manifest.sha256) }
        summary.filesAttached += 1
        note(d, .edit, "\(target.clientID.base32): attach \(file.name) (\(file.size) bytes, \(manifest.chunks.count) chunks)")
    }

    /// Takes the device's `index`-th live note's `attachment`-th attachment off.
    func detach(note index: Int, attachment: Int, on d: Int) throws {
        guard let device = devices[safe: d], let target = try liveNote(d, index: index), !target.attachments.isEmpty else { return }
        let name = target.attachments[attachment % target.attachments.count].name
        _ = try local(d) { try device.client.detach(name, from: target.id) }
        note(d, .edit, "\(target.clientID.base32): detach \(name)")
    }

    /// Saves the device's `index`-th live note's `attachment`-th attachment and compares it with what was attached;
    /// with `cutAfter`, first a save whose connection goes down mid-file, then the resumed one.
    func save(note index: Int, attachment: Int, on d: Int, cutAfter: Int?) async throws {
        guard let device = devices[safe: d], let target = try liveNote(d, index: index), !target.attachments.isEmpty else { return }
        let manifest = target.attachments[attachment % target.attachments.count]
        if let cutAfter {
            let failed = summary.failedOperations
            if try await save(manifest, of: target, on: device, cut: TransferCut(.download, after: cutAfter)) { return }
            if summary.failedOperations > failed { summary.downloadsCut += 1 }
        }
        _ = try await save(manifest, of: target, on: device, cut: nil)
    }

    /// Saves an attachment of `note` on `device` and compares the bytes with the file attached; whether it was saved.
    ///
    /// A save may fail when the step cut it, or when the device cannot reach its account's chunks: signed out (chunks
    /// it lacks need a server), or revoked (it learns it now). Any other failure breaks `attachments-downloadable`.
    @discardableResult
    func save(_ manifest: AttachmentManifest, of note: LocalNote, on device: SimDevice, cut: TransferCut?) async throws -> Bool {
        let d = device.index
        guard let file = oracle.files[manifest.sha256] else {
            throw fail(
                .attachmentsDownloadable,
                "device \(d): note \(note.clientID)/\(note.origin) has attachment \(manifest.name) (\(manifest.sha256.hex.prefix(12))) that no step attached")
        }
        let destination = scratch.appendingPathComponent("saved-\(d)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let what = "save \(manifest.name) of \(note.clientID.base32)"
        // A cut connection (unreachable) and a revocation are withFaults' to judge; any other failure is returned.
        let outcome = try await withFaults(device, [], what, cut: cut) { () async throws -> NotesError? in
            do throws(NotesError) {
                _ = try await device.client.saveAttachment(manifest.name, of: note.id, to: destination)
                return nil
            } catch {
                if error.code == .serverUnreachable || error.code == .signedOutByServer { throw error }
                return error
            }
        }
        guard let outcome else { return false }
        if let error = outcome {
            guard error.code == .notSignedIn else {
                throw fail(.attachmentsDownloadable, "device \(d): \(what) failed: \(error)")
            }
            self.note(d, .error, "\(what): \(error.message)")
            return false
        }
        let attached = oracle.canaryFiles.contains(manifest.sha256) ? file.canaryBytes : file.bytes
        guard let bytes = FileManager.default.contents(atPath: destination.path), bytes == attached else {
            throw fail(
                .attachmentsDownloadable, "device \(d): \(manifest.name) of note \(note.clientID)/\(note.origin) saved other bytes than those attached")
        }
        summary.attachmentsSaved += 1
        self.note(d, .sync, "\(what): \(file.size) bytes as attached")
        return true
    }

    /// A sync cut mid-upload, after `afterChunks` chunks, then the resumed sync.
    func cutUpload(on d: Int, afterChunks: Int) async throws {
        guard let device = devices[safe: d], try device.client.account() != nil else { return }
        summary.syncs += 1
        let failed = summary.failedOperations
        if let report = try await withFaults(device, [], "sync", cut: TransferCut(.upload, after: afterChunks), { try await device.client.sync() }) {
            device.wroteSinceSync = false
            try record(report, device: device)
            return
        }
        guard summary.failedOperations > failed, try device.client.account() != nil else { return }
        summary.uploadsCut += 1
        try await sync(device, faults: [])
    }

    /// `no-chunk-resent`, after every step: what each device transferred in it.
    func checkChunkTransfers() throws {
        for device in devices {
            let transfers = device.transport.takeChunkTransfers()
            summary.chunksUploaded += transfers.uploaded
            summary.chunksDownloaded += transfers.downloaded
            if let again = transfers.again.first {
                throw fail(.noChunkResent, "device \(device.index) \(again)")
            }
        }
    }

    /// At quiescence: on every signed-in device, each live note holds the attachments its account's server note
    /// holds, and each of them saves with the bytes attached (`attachments-downloadable`); no account holds an
    /// attachment, or has a chunk, of a file attached only to notes of other accounts (`no-cross-account`).
    func checkAttachments(final: [Int: [NoteRecord]]) async throws {
        for device in devices {
            guard let k = try accountIndex(of: device) else { continue }
            let server = Dictionary((final[k] ?? []).map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
            for note in try device.client.notes() {
                let local = Self.attachmentSet(note.attachments)
                if Self.serverStoresAttachments, let record = server[note.key], local != Self.attachmentSet(record.attachments ?? []) {
                    throw fail(
                        .attachmentsDownloadable,
                        "device \(device.index): note \(note.clientID)/\(note.origin) has attachments [\(local.sorted().joined(separator: ", "))], account \(k) [\(Self.attachmentSet(record.attachments ?? []).sorted().joined(separator: ", "))]")
                }
                for manifest in note.attachments {
                    try checkPermitted(manifest, in: k, holder: "device \(device.index)'s note \(note.clientID)/\(note.origin)")
                    guard try await save(manifest, of: note, on: device, cut: nil) else {
                        throw fail(
                            .attachmentsDownloadable, "device \(device.index): \(manifest.name) of note \(note.clientID)/\(note.origin) cannot be saved")
                    }
                }
            }
        }
        for (k, notes) in final {
            for record in notes where !record.deleted {
                for manifest in record.attachments ?? [] {
                    try checkPermitted(manifest, in: k, holder: "account \(k)'s note \(record.clientID)/\(record.origin)")
                }
            }
            // The account's chunk store: asked about every chunk of the files attached only elsewhere, it has none.
            let foreign = oracle.manifests.values.filter { !oracle.isPermitted($0.sha256, in: k) }.flatMap(\.chunks)
            for hashes in stride(from: 0, to: foreign.count, by: ChunkRules.maxMissingHashes).map({ Array(foreign[$0..<min(foreign.count, $0 + ChunkRules.maxMissingHashes)]) }) {
                let body = try WireJSON.encoder().encode(MissingChunksRequest(hashes: hashes))
                let answer = try await server.transport.send(WireRequest(.missingChunks, bearerToken: accounts[k].auditToken, body: body))
                guard answer.status == 200 else { throw SimSetupError("the audit of account \(k)'s chunks answered \(answer.status)") }
                let missing = Set(try JSONDecoder().decode(MissingChunksResponse.self, from: answer.body).missing)
                if let present = hashes.first(where: { !missing.contains($0) }) {
                    throw fail(.noCrossAccount, "account \(k) has chunk \(present.hex.prefix(12)) of a file attached only to other accounts' notes")
                }
            }
        }
    }

    /// An attachment seen in account `k` must have been attached to a note of it (or to a note carried or copied into
    /// it: the oracle permits those).
    func checkPermitted(_ manifest: AttachmentManifest, in k: Int, holder: String) throws {
        guard oracle.isPermitted(manifest.sha256, in: k) else {
            throw fail(.noCrossAccount, "\(holder) has attachment \(manifest.name) (\(manifest.sha256.hex.prefix(12))), attached to no note of account \(k)")
        }
    }

    /// Whether the server keeps a note's attachments, so that devices' attachment sets must equal their account's
    /// (`attachments-downloadable`'s convergence part).
    static let serverStoresAttachments = true

    /// A note's attachments as convergence compares them: name and content.
    static func attachmentSet(_ manifests: [AttachmentManifest]) -> Set<String> {
        Set(manifests.map { "\($0.name) \($0.sha256.hex.prefix(12))" })
    }
}

extension Oracle {
    /// A step attached `file` to `note`, which holds it as `manifest`; `account` owns the note (nil: no account, or a
    /// deleted one).
    mutating func attached(_ file: SimFile, as manifest: AttachmentManifest, to note: NoteKeyValue, in account: Int?) {
        files[manifest.sha256] = file
        manifests[manifest.sha256] = manifest
        attachedTo[manifest.sha256, default: []].insert(note)
        if let account { attachedIn[manifest.sha256, default: []].insert(account) }
    }

    /// Whether the file of that SHA-256 may be seen in account `k`: it was attached to a note of it (a conflict copy
    /// the server made included), or to a note the account may hold (carried or copied into it).
    func isPermitted(_ sha256: ContentHash, in k: Int) -> Bool {
        if attachedIn[sha256]?.contains(k) == true { return true }
        guard let notes = attachedTo[sha256], let permitted = permitted[k] else { return false }
        return !notes.isDisjoint(with: permitted)
    }
}
