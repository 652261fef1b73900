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
        versionsSeen[k] = nil
        // The account's notes, carried into an account again, start from no base: a tag taken off before may be there.
        let notes = permitted[k] ?? []
        tagRemovals = tagRemovals.filter { !notes.contains($0.key.note) }
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
    /// Issue 31. Every tag a device put on a note (a tag step, or a copy of a tagged note into another account),
    /// keyed by the note and the tag's key, with the devices that did: it must stay on that note (on the device, or in
    /// its account), unless someone who saw it took it off or a device deleted the note. This is the three-way expectation
    /// spelled as changes: a device's push changes only what it changed against what it last synced, so a tag one device
    /// adds survives another device's removal of another tag, and the same tag added on both is one.
    var tagAdds: [TagPair: Set<Int>] = [:]
    /// Tags taken off a synced note (one with a base) by a device that saw them (a tag step): once the device has
    /// synced with the account it took them off in (still signed in to it), they must not come back there.
    var tagRemovals: [TagPair: TagRemoval] = [:]
    /// Tags that may be gone from their note: taken off by a device that saw them (notes a device deleted are in
    /// ``deletedNotes``).
    var tagsMayBeGone: Set<TagPair> = []
    /// Per account and server note: what the checks read of each version (text, deleted, tags by key, flags), which the
    /// note's history must hold (`history-complete`).
    var versionsSeen: [Int: [FlakeID: [Int64: NoteContent]]] = [:]

    mutating func addedTag(_ pair: TagPair, by device: Int) { tagAdds[pair, default: []].insert(device) }
    mutating func removedTag(_ pair: TagPair, by device: Int, in account: FlakeID?) {
        if let account { tagRemovals[pair] = TagRemoval(device: device, account: account) } else if tagRemovals[pair]?.device == device {
            tagRemovals[pair] = nil
        }
        tagsMayBeGone.insert(pair)
    }
    /// Notes a device deleted: every tag put on one may be gone, before the delete or after it: a device that carries
    /// the note back (into another account, or restoring it) brings its own tags. (The server keeps a note whose tags
    /// or flags changed since the delete's base, as one whose text changed: `PushPlanner`, rule 5.)
    var deletedNotes: Set<NoteKeyValue> = []

    /// A note of `device` lost its account (deleted): it is a note of no account there, and it lost its base with its
    /// server ID, so a tag the device took off it meanwhile is not known as taken off when the note is carried into
    /// an account again (its merge starts from no base, like its text's).
    /// Per note, the devices on which it lost its base (its account deleted): carried into an account again, such a
    /// copy merges its tags against no base, so a tag on it comes back even if a device took it off meanwhile, the
    /// copy's own device included (as a line of its text would, in a conflict copy). A removal of a tag of that note
    /// is not expected to stay off (`no-lost-tag-change`).
    var baseLostOn: [NoteKeyValue: Set<Int>] = [:]

    mutating func disowned(_ key: NoteKeyValue, on device: Int) {
        unowned[device, default: []].insert(key)
        baseLostOn[key, default: []].insert(device)
        for (pair, removal) in tagRemovals where pair.note == key && removal.device == device { tagRemovals[pair] = nil }
    }

    /// A note of a deleted account became a new note of `device` (another key), holding `tags` (keys): the tags the
    /// device itself put on the old note and still there go with it; the old note keeps the other devices' (their
    /// copies of it are not this note). A tag the device took off the old note stays off the new one, unless the new
    /// note holds it: the device then held two copies of the old note (one of its account, one of no account, of the
    /// account deleted), and the removal was on the copy that keeps the old key (notes-sim seed 269).
    mutating func rekeyed(from old: NoteKeyValue, to new: NoteKeyValue, on device: Int, holding tags: Set<String>) {
        for (pair, devices) in tagAdds where pair.note == old && devices.contains(device) {
            var others = devices
            others.remove(device)
            tagAdds[pair] = others.isEmpty ? nil : others
            if tags.contains(pair.tag) { tagAdds[TagPair(note: new, tag: pair.tag), default: []].insert(device) }
        }
        for (pair, removal) in tagRemovals where pair.note == old && removal.device == device && !tags.contains(pair.tag) {
            tagRemovals[TagPair(note: new, tag: pair.tag)] = removal
            tagsMayBeGone.insert(TagPair(note: new, tag: pair.tag))
        }
    }

    /// Issue 33: every file a step attached, by its SHA-256 (its manifest's), with its manifest, and the notes it was
    /// attached to (copies of them, and notes a deleted account's rekeyed, included): the accounts those notes may be
    /// in are the only ones that may see it.
    var files: [ContentHash: SimFile] = [:]
    /// The files attached as ``SimFile/canaryBytes`` (to a note of an encrypted account or of no account), by SHA-256.
    var canaryFiles: Set<ContentHash> = []
    var manifests: [ContentHash: AttachmentManifest] = [:]
    var attachedTo: [ContentHash: Set<NoteKeyValue>] = [:]
    /// The accounts whose notes each file was attached to.
    var attachedIn: [ContentHash: Set<Int>] = [:]

    mutating func added(token: String, by device: Int) { author[token] = device }
    mutating func removed(tokens: [String]) { legitimatelyRemoved.formUnion(tokens) }
    mutating func seen(tokens: [String], in account: Int) { seenOnServer[account, default: []].formUnion(tokens) }
}

/// A tag taken off a note: by which device, in which account.
struct TagRemoval: Equatable {
    var device: Int
    var account: FlakeID
}

/// A tag (by key) on a note.
struct TagPair: Hashable {
    var note: NoteKeyValue
    var tag: String
}

/// A note or one of its versions as the checks compare them: its text, whether it is deleted, its tags (by key) and
/// flags (convergence compares live notes; `history-complete` each version read after a step with the note's history).
struct NoteContent: Equatable {
    var text: String
    var deleted: Bool
    var tags: Set<String>
    var pinned: Bool
    var archived: Bool

    init(_ record: NoteRecord) {
        text = record.text
        deleted = record.deleted
        tags = Set((record.tags ?? []).map(Tags.key))
        pinned = record.pinned ?? false
        archived = record.archived ?? false
    }

    init(_ note: LocalNote) {
        text = note.text
        deleted = note.isDeleted
        tags = Set(note.tags.map(Tags.key))
        pinned = note.isPinned
        archived = note.isArchived
    }

    init(_ version: NoteVersion) {
        text = version.text
        deleted = version.deleted
        tags = Set(version.tags.map(Tags.key))
        pinned = version.pinned
        archived = version.archived
    }
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
