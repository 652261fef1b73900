import ArgumentParser
import Foundation
import MiniFlake
import NotesClient

/// `--json` form of a sync report.
struct SyncOutput: Encodable {
    struct Failure: Encodable {
        var id: String
        var code: String
        var message: String
    }

    var pushed: Int
    var created: Int
    var reconciled: Int
    var matched: Int
    var updated: Int
    var unchanged: Int
    var merged: Int
    var conflicts: Int
    var deleted: Int
    var kept: Int
    var replayed: Int
    var pulled: Int
    var applied: Int
    var pending: Int
    /// Refused by this sync.
    var failures: [Failure]
    /// Every note the server refuses (this sync's and earlier ones not edited since).
    var refused: [Failure]
    /// Notes whose edit overlapped another device's: this device's text is in a conflict copy.
    var conflictNotes: [String]
    /// Conflict copies that arrived from other devices.
    var pulledConflictCopies: Int
    /// Notes deleted here that came back because another device edited them.
    var undeleted: [String]
    /// Encrypted accounts: notes whose server version this device refused (it does not open, or is older than the
    /// version this device has seen); each keeps this device's copy.
    var tampered: [Failure]
    /// Attachments: chunks sent (those the server lacked), and their bytes.
    var chunksUploaded: Int
    var chunkBytesUploaded: Int64

    init(_ report: SyncReport, ids: [Int64: String]) {
        pushed = report.pushed
        created = report.created
        reconciled = report.reconciled
        matched = report.matched
        updated = report.updated
        unchanged = report.unchanged
        merged = report.merged
        conflicts = report.conflicts
        deleted = report.deleted
        kept = report.kept
        replayed = report.replayed
        pulled = report.pulled
        applied = report.applied
        pending = report.pending
        func failure(_ failure: PushFailure) -> Failure {
            Failure(id: ids[failure.noteID] ?? failure.clientID.base32, code: failure.error.code, message: failure.error.message)
        }
        failures = report.failures.map(failure)
        refused = report.refused.map(failure)
        conflictNotes = (report.conflictNotes + report.deviceConflicts).map { ids[$0] ?? String($0) }
        pulledConflictCopies = report.pulledConflictCopies
        undeleted = report.undeleted.map { ids[$0] ?? String($0) }
        tampered = report.tampered.map { Failure(id: $0.clientID.base32, code: "tampered", message: $0.reason) }
        chunksUploaded = report.chunksUploaded
        chunkBytesUploaded = report.chunkBytesUploaded
    }
}

/// The display IDs a report names, looked up one by one (a sync may touch few of many notes).
func reportIDs(_ report: SyncReport, client: NotesClient) throws -> [Int64: String] {
    var ids: [Int64: String] = [:]
    let named = report.failures.map(\.noteID) + report.refused.map(\.noteID) + report.conflictNotes + report.deviceConflicts + report.undeleted
    for noteID in Set(named) {
        if let note = try? client.note(noteID) { ids[noteID] = try client.displayID(of: note) }
    }
    return ids
}

extension PushError {
    /// What makes a note refused with this error sync: every sync tries a note over the account's quota again; any
    /// other waits for an edit.
    var remedy: String {
        if isOverQuota { return "every sync tries it again: free space (shorten or empty notes) or ask the server's operator for more" }
        if isRetriedAtEverySync { return "every sync tries it again" }
        return "edit it to try again"
    }
}

/// What a push did, in words whose counts add up to the changes sent.
func pushSummary(_ report: SyncReport) -> String {
    guard report.pushed > 0 else { return "nothing to send" }
    var details: [String] = []
    if report.created > 0 { details.append("\(report.created) new") }
    if report.reconciled > 0 { details.append("\(report.reconciled) matched to notes the server had") }
    if report.updated > 0 { details.append("\(report.updated) updated") }
    if report.unchanged > 0 { details.append("\(report.unchanged) already up to date") }
    if report.merged > 0 { details.append("\(report.merged) merged") }
    if report.deleted > 0 { details.append("\(report.deleted) deleted") }
    if report.kept > 0 { details.append("\(report.kept) delete\(report.kept == 1 ? "" : "s") undone (edited elsewhere)") }
    if report.conflicts > 0 { details.append(plural(report.conflicts, "conflict")) }
    var text = "sent " + plural(report.pushed, "change") + " (\(details.joined(separator: ", "))"
    if report.replayed > 0 { text += "; \(report.replayed) of them already applied by an earlier, interrupted sync" }
    return text + ")"
}

/// Prints what a sync did: a summary line on stdout; refusals, conflicts and undone deletes on stderr.
///
/// - Throws: a failure (exit 1) when the server refuses a note, this sync or an earlier one: such a note is not
///   synced until it is edited (refused for the account's quota: every sync tries it again), and every sync says so.
func printSyncReport(_ report: SyncReport, client: NotesClient, json: Bool) throws {
    let ids = try reportIDs(report, client: client)
    if json {
        try Console.json(SyncOutput(report, ids: ids))
    } else {
        let received = report.applied == 0 ? "nothing new from the server" : plural(report.applied, "note") + " added or changed from the server"
        let found = report.matched == 0 ? "" : "; " + plural(report.matched, "note") + " of this device already on the server"
        let chunks = report.chunksUploaded == 0
            ? "" : "; \(plural(report.chunksUploaded, "attachment chunk")) sent (\(byteCount(report.chunkBytesUploaded)))"
        Console.out("Synced: \(pushSummary(report))\(chunks); \(received)\(found).")
        func id(_ noteID: Int64) -> String { ids[noteID] ?? "a note" }
        for noteID in report.conflictNotes + report.deviceConflicts {
            Console.warn(
                "\(id(noteID)): your edit overlapped another device's: the note keeps the other device's text, and this device's text is in a conflict copy; see `notes conflicts --diff`, then `notes resolve`.")
        }
        if report.pulledConflictCopies > 0 {
            Console.warn(
                "\(plural(report.pulledConflictCopies, "conflict copy", "conflict copies")) arrived from another device (its text, where its edit overlapped another); see `notes conflicts --diff`.")
        }
        for noteID in report.undeleted {
            Console.warn("\(id(noteID)): your delete was undone because another device edited the note meanwhile; it is back (`notes rm \(id(noteID))` to delete it again).")
        }
        for failure in report.refused {
            Console.warn(
                "\(ids[failure.noteID] ?? failure.clientID.base32) is not synced: \(failure.error.message) (\(failure.error.code)); \(failure.error.remedy).")
        }
        if report.pending > 0 {
            Console.warn("\(plural(report.pending, "note")) changed during the sync; run `notes sync` again to send them.")
        }
        for tampered in report.tampered {
            Console.warn(
                "\(tampered.clientID.base32): the server's version was refused: \(tampered.reason). This device keeps its copy (tampered).")
        }
    }
    if !report.tampered.isEmpty {
        throw CommandFailure(
            message: "\(plural(report.tampered.count, "note")) from the server did not pass the encryption checks (tampered); this device kept its own copies")
    }
    if !report.refused.isEmpty {
        throw CommandFailure(
            message: report.refused.allSatisfy(\.error.isOverQuota)
                ? "\(plural(report.refused.count, "note")) over the account's quota \(report.refused.count == 1 ? "is" : "are") not synced; every sync tries again"
                : report.refused.allSatisfy(\.error.isRetriedAtEverySync)
                ? "\(plural(report.refused.count, "note")) \(report.refused.count == 1 ? "is" : "are") not synced; every sync tries again"
                : "\(plural(report.refused.count, "note")) refused by the server \(report.refused.count == 1 ? "is" : "are") not synced; edit \(report.refused.count == 1 ? "it" : "them") to try again")
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send local changes to the server and receive the others.",
        discussion: """
            Safe to interrupt at any point: nothing is lost, nothing is applied twice, and the next sync resumes \
            where this one stopped.
            """)

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try options.openClient()
        let report = try await ProgressLine.around { progress in try await client.sync(progress: progress) }
        try printSyncReport(report, client: client, json: options.json)
    }
}
