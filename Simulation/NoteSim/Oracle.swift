import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient

/// The simulation's own record of what happened, against which the server and devices are checked.
struct Oracle {
    /// Per account: the notes devices created while signed in to it, carried into it from the notes they wrote
    /// while signed out (never synced, so in no account), or copied into it. Nothing else may be in it: a note
    /// synced with or pulled from one account is never in another.
    var permitted: [Int: Set<NoteKeyValue>] = [:]
    /// Per device: the notes it wrote while signed out and has not carried into an account yet.
    var unowned: [Int: Set<NoteKeyValue>] = [:]
    /// Per account: the server ID each note got, which must never change.
    var serverIDs: [Int: [NoteKeyValue: FlakeID]] = [:]
    /// The device that wrote each token.
    var author: [String: Int] = [:]
    /// Tokens removed by a device that saw them (a line edit or a delete): they may vanish.
    var legitimatelyRemoved: Set<String> = []
    /// Per account: every token the server was ever seen holding.
    var seenOnServer: [Int: Set<String>] = [:]
    /// Per account index: the IDs its username had before deletions (each deletion signs the username up again).
    var deletedAccountIDs: [Int: Set<FlakeID>] = [:]

    /// Account `k` was deleted and signed up again: the new account starts empty; what the server held of the old
    /// one is gone with it (legitimately), and its notes on devices become notes of no account.
    mutating func deleted(account k: Int, id: FlakeID) {
        deletedAccountIDs[k, default: []].insert(id)
        legitimatelyRemoved.formUnion(seenOnServer[k] ?? [])
        seenOnServer[k] = nil
        permitted[k] = nil
        serverIDs[k] = nil
    }

    mutating func permit(_ key: NoteKeyValue, in account: Int) { permitted[account, default: []].insert(key) }
    /// A note created on `device`, signed in to `account` (nil: signed out, the note has no owner).
    mutating func created(_ key: NoteKeyValue, on device: Int, in account: Int?) {
        if let account { permit(key, in: account) } else { unowned[device, default: []].insert(key) }
    }
    /// A sign-in of `device` to `account` that carries the notes written while signed out.
    mutating func carry(from device: Int, into account: Int) {
        for key in unowned[device] ?? [] { permit(key, in: account) }
        unowned[device] = nil
    }
    mutating func added(token: String, by device: Int) { author[token] = device }
    mutating func removed(tokens: [String]) { legitimatelyRemoved.formUnion(tokens) }
    mutating func seen(tokens: [String], in account: Int) { seenOnServer[account, default: []].formUnion(tokens) }
}

/// A note's identity in an account.
struct NoteKeyValue: Hashable {
    var clientID: FlakeID
    var origin: FlakeID
}

/// An account's notes as the checks have pulled them, change by change.
struct AccountView {
    /// Where the next read continues.
    var cursor = SyncCursor.start
    /// Every note pulled so far, at its latest pulled version.
    var byServerID: [FlakeID: NoteRecord] = [:]
    /// The server ID holding each key in `byServerID`.
    var serverIDByKey: [NoteKeyValue: FlakeID] = [:]
}

extension NoteRecord {
    var key: NoteKeyValue { NoteKeyValue(clientID: clientID, origin: origin) }
}



extension LocalNote {
    var key: NoteKeyValue { NoteKeyValue(clientID: clientID, origin: origin) }
}

/// Simulated note texts: one unique token per line, each line ending in a newline.
enum Lines {
    static func split(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }
    static func join(_ lines: [String]) -> String { lines.map { $0 + "\n" }.joined() }
    static func tokens(_ text: String) -> [String] { split(text) }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
