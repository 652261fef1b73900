import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol

// A note's history: every version the server kept of it (`GET /v1/notes/{serverID}/versions`), fetched when asked
// for (never during a sync or a sign-in) and kept on this device (`note_versions`), so that asking again reads the
// device and fetches only the versions after the last one kept.

/// A note's versions as the server kept them (``NotesClient/history(_:)``).
public struct NoteHistory: Sendable, Equatable {
    /// One version: the note's state right after a change the server accepted.
    public struct Version: Sendable, Equatable {
        /// The version number (1 when created, +1 per accepted change).
        public let version: Int64
        /// The text ("" for a delete).
        public let text: String
        /// This version deleted the note.
        public let isDeleted: Bool
        /// Its tags, in the order of their keys.
        public let tags: [String]
        public let isPinned: Bool
        public let isArchived: Bool
        /// When the content was edited, by the editing device's clock (Unix milliseconds).
        public let editedAt: Int64
        /// When the server accepted it, by the server's clock (Unix milliseconds).
        public let savedAt: Int64
        /// The name of the device that pushed it, when it gave one at sign-in.
        public let device: String?
        /// Its attachments, by name (none from a server older than attachments).
        public var attachments: [AttachmentManifest] = []
    }

    /// The note, as it is on this device.
    public var note: LocalNote
    /// Oldest first. Versions older than the server's retention may be missing (or kept here from an earlier fetch).
    public var versions: [Version]
    /// How many versions this call fetched from the server; 0 when every version was on this device already.
    public var fetched: Int
    /// Whether the server was asked (not when the device held every version of the note it knows, or was signed
    /// out: then the versions are those kept here).
    public var askedServer: Bool

    /// The version numbered `number`.
    public func version(_ number: Int64) -> Version? { versions.first { $0.version == number } }
}

extension NoteHistory.Version {
    /// A version as the server sends it; `now` stands in for a time that does not parse.
    init(_ version: NoteVersion, now: Int64) {
        let saved = WireTime.parse(version.savedAt) ?? now
        self.init(
            version: version.version, text: version.text, isDeleted: version.deleted, tags: Tags.canonical(version.tags),
            isPinned: version.pinned, isArchived: version.archived, editedAt: WireTime.parse(version.editedAt) ?? saved,
            savedAt: saved, device: version.device, attachments: StoredAttachments.canonical(version.attachments ?? []))
    }
}

extension NotesClient {
    /// A note's history (see ``NoteHistory``). When this device holds every version up to the one it last synced,
    /// it reads only its store (no request); otherwise it asks the server for the versions after the last one it
    /// holds, page by page, and keeps them. Signed out, it shows the versions it holds.
    ///
    /// - Throws: `note_not_found`; `invalid_input` when the note was never synced (the server has no history of
    ///   it); `not_signed_in` when signed out and none of its versions is here; `signed_out_by_server`; the
    ///   connection's errors (an older server without history: `server_error` 404 `not_found`).
    public func history(_ id: LocalNote.ID) async throws(NotesError) -> NoteHistory {
        let (note, settings) = try store.read { tx in (try tx.note(id), try tx.settings()) }
        guard let serverID = note.serverID else {
            throw NotesError(
                .invalidInput,
                "The note has not been synced yet, so the server has no history of it; its history starts at its first sync (`notes sync`).")
        }
        let cached = try store.read { tx in try tx.cachedVersions(ofNote: id, serverID: serverID) }
        let last = cached.last?.version ?? 0
        var history = NoteHistory(note: note, versions: cached, fetched: 0, askedServer: false)
        if let known = note.serverVersion, last >= known { return history }
        guard let settings, settings.account != nil, let token = settings.token, let server = settings.serverURL,
            let url = URL(string: server)
        else {
            if !cached.isEmpty { return history }
            throw NotesError(.notSignedIn, "Not signed in; sign in with `notes login` to fetch the note's history.")
        }
        let connection = engine.connection(to: url, server: server, token: token)
        // An encrypted account's versions are envelopes: opened here, kept here in the clear as the notes are.
        var keys = try store.read { tx in try settings.account.flatMap { account in try tx.keyRing(of: account.accountID) } }
        var fetched: [NoteHistory.Version] = []
        var after = last
        do throws(NotesError) {
            while true {
                let page = try await connection.call(NoteVersionsRequest(serverID: serverID, after: after))
                if let held = keys, page.versions.contains(where: { SyncEngine.sealed($0.text, underAGenerationMissingFrom: held) }) {
                    // Sealed under a key generation this device lacks (rotated since its last sync): fetch it first.
                    keys = try await engine.refreshKeys(connection, account: held.account, ring: held).ring
                }
                let now = now
                for version in page.versions {
                    let opened = try keys.map { keys throws(NotesError) in
                        try NoteSealing.open(version, clientID: note.clientID, origin: note.origin, keys: keys)
                    } ?? version
                    fetched.append(NoteHistory.Version(opened, now: now))
                }
                guard page.hasMore else { break }
                guard let next = page.versions.last?.version, next > after else {
                    throw NotesError.badResponse("a history page announced more versions without moving past version \(after)")
                }
                after = next
            }
        } catch {
            if error.code == .signedOutByServer { engine.forgetRevokedSession(token: token) }
            if error.api?.code == .noteNotFound {
                throw NotesError(.noteNotFound, "The server has no such note in this account, so no history of it.", api: error.api)
            }
            throw error
        }
        try store.write { tx in try tx.cacheVersions(fetched, ofNote: id, serverID: serverID) }
        history.versions = try store.read { tx in try tx.cachedVersions(ofNote: id, serverID: serverID) }
        history.fetched = fetched.count
        history.askedServer = true
        return history
    }

    /// Version `number` of a note (from its history, fetched as ``history(_:)`` does).
    ///
    /// - Throws: `invalid_input` when the history has no such version (never, or no longer: past the server's
    ///   retention); what ``history(_:)`` throws.
    public func version(_ number: Int64, of id: LocalNote.ID) async throws(NotesError) -> NoteHistory.Version {
        let history = try await history(id)
        guard let version = history.version(number) else {
            let range = history.versions.first.map { first in " (it holds versions \(first.version)–\(history.versions.last!.version))" } ?? ""
            throw NotesError(.invalidInput, "The note's history has no version \(number)\(range).")
        }
        return version
    }

    /// Makes version `number` of a note its current state: that version's text, tags, flags and attachments become the note's as
    /// a new edit, which syncs and merges like any edit. Works for a deleted note too, even one deleted on another
    /// device that was never in this device's trash (its tombstone came with a sync): it comes back.
    ///
    /// - Throws: `invalid_input` when the version is a delete, or has no such version; `invalid_text` for a text the
    ///   remembered server could never take; what ``history(_:)`` throws.
    @discardableResult
    public func restore(_ id: LocalNote.ID, version number: Int64) async throws(NotesError) -> LocalNote {
        let version = try await version(number, of: id)
        guard !version.isDeleted else {
            throw NotesError(.invalidInput, "Version \(number) is the note's delete; restore a version before it.")
        }
        try Self.requireContent(version.text)
        let state = TagsAndFlags(
            tags: version.tags, pinned: version.isPinned, archived: version.isArchived, attachments: version.attachments)
        let now = now
        return try store.write { tx in
            let note = try tx.note(id)
            if note.text == version.text && !note.isDeleted && note.tagsAndFlags == state { return note }
            try Self.requireFits(version.text, baseText: note.baseText, settings: try tx.requireSettings())
            try tx.replaceContent(ofNote: note, with: version.text, state: state, now: now)
            return try tx.note(id)
        }
    }
}
