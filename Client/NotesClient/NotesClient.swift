import Foundation
import MiniFlake
import NoteSyncProtocol

/// The FlakeNotes client: a local note store that works offline, and the engine that syncs it with a server.
///
/// Open one with ``open(home:environment:)`` (a data directory) or ``inMemory(environment:)`` (tests, the
/// simulation). Local commands (``add(_:)``, ``edit(_:text:)``, ``delete(_:)``, the reads) never touch the
/// network and are each one transaction. ``sync(progress:)`` pushes local changes, then pulls the server's.
///
/// A `NotesClient` is `Sendable`: its only mutable state is the database (plus the ID generator and the random
/// generator, each behind a lock), so it can be shared by tasks. The sync engine itself runs no concurrent work:
/// given the same transport answers, clock and random generator, it does the same thing.
public final class NotesClient: Sendable {
    let store: LocalStore
    let environment: NotesEnvironment
    let minter: IDMinter
    let engine: SyncEngine

    /// This installation's origin: a random positive 63-bit ID minted once, sent with every note it creates.
    public let origin: FlakeID
    /// This installation's MiniFlake instance number, chosen once at random in `0..<1024`.
    public let flakeInstance: Int
    /// The data directory, or nil for an in-memory client.
    public let home: URL?

    private init(store: LocalStore, environment: NotesEnvironment, home: URL?) throws(NotesError) {
        self.store = store
        self.environment = environment
        self.home = home
        var random = environment.random
        let settings = try store.settings(creatingWith: { () throws(NotesError) -> (origin: Int64, flakeInstance: Int) in
            let origin = Int64.random(in: 1...Int64.max, using: &random)
            let randomInstance = Int.random(in: 0...FlakeID.maxInstance, using: &random)
            let instance = environment.flakeInstance ?? randomInstance
            guard (0...FlakeID.maxInstance).contains(instance) else {
                throw NotesError(.invalidInput, "A flake instance is in 0...\(FlakeID.maxInstance), not \(instance).")
            }
            return (origin, instance)
        })
        origin = settings.origin
        flakeInstance = settings.flakeInstance
        do {
            minter = try IDMinter(
                instance: settings.flakeInstance, clock: environment.clock, after: settings.highWaterMark,
                clientIDScheme: environment.clientIDScheme)
        } catch {
            throw NotesError(.storage, "The stored flake instance is invalid: \(error.description)")
        }
        engine = SyncEngine(
            store: store, minter: minter, environment: environment, origin: origin,
            chunkCache: Self.chunkCache(home: home, origin: origin, limit: environment.chunkCacheLimit), random: random)
    }

    /// The FlakeNotes release this client belongs to (the same number `notesyncd` reports).
    public static let version = FlakeNotesVersion.current

    /// What this client's store did since it was opened: statements run and pages written; nil unless the
    /// environment asked for the count (``NotesEnvironment/countsStoreActivity``).
    public func storeActivity() throws(NotesError) -> StoreActivity? {
        try store.activity()
    }

    // MARK: - Opening

    /// The data directory: `$NOTES_HOME`, else `$XDG_DATA_HOME/notes`, else `~/.local/share/notes`.
    public static func defaultHome(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let home = environment["NOTES_HOME"], !home.isEmpty {
            return URL(fileURLWithPath: home, isDirectory: true)
        }
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return URL(fileURLWithPath: data, isDirectory: true).appendingPathComponent("notes", isDirectory: true)
        }
        let user = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: user, isDirectory: true)
            .appendingPathComponent(".local/share/notes", isDirectory: true)
    }

    /// Opens the store in `home`, creating the directory (mode 0700) and the database on first use, and migrating
    /// an older schema.
    ///
    /// - Throws: `data_directory` when the directory cannot be created, read or written (or is a file);
    ///   `storage` when the database file is not a notes database or is corrupt.
    public static func open(home: URL, environment: NotesEnvironment = .live) throws(NotesError) -> NotesClient {
        let path = home.path
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw NotesError(.dataDirectory, "The notes data directory \(path) is not a directory.")
            }
        } else {
            try createDirectories(path)
        }
        guard access(path, R_OK | W_OK | X_OK) == 0 else {
            throw NotesError(
                .dataDirectory, "Cannot use the notes data directory \(path): \(String(cString: strerror(errno))).")
        }
        let store = try LocalStore.open(directory: home, countingStatements: environment.countsStoreActivity)
        return try NotesClient(store: store, environment: environment, home: home)
    }

    /// `mkdir -p` with mode 0700, failing with the reason in words: which component is a file, or the system's
    /// message for the first directory that cannot be made (never a Foundation error number).
    static func createDirectories(_ path: String) throws(NotesError) {
        var components: [String] = []
        var current = path
        while !current.isEmpty && current != "/" && !FileManager.default.fileExists(atPath: current) {
            components.append(current)
            current = (current as NSString).deletingLastPathComponent
        }
        var isDirectory: ObjCBool = false
        if !current.isEmpty && FileManager.default.fileExists(atPath: current, isDirectory: &isDirectory) && !isDirectory.boolValue {
            throw NotesError(
                .dataDirectory, "Cannot create the notes data directory \(path): \(current) is a file, not a directory.")
        }
        for directory in components.reversed() where mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw NotesError(
                .dataDirectory, "Cannot create the notes data directory \(path): \(directory): \(String(cString: strerror(errno))).")
        }
    }

    /// A client whose database lives in memory only (tests, the simulation).
    public static func inMemory(environment: NotesEnvironment) throws(NotesError) -> NotesClient {
        try NotesClient(store: LocalStore.inMemory(countingStatements: environment.countsStoreActivity), environment: environment, home: nil)
    }

    var now: Int64 { environment.clock.unixMilliseconds() }

    // MARK: - Local commands

    /// Creates a note with a new client ID, and `tags` (``TagRules``; the same tag twice, by key, is one).
    /// Works offline; the note syncs at the next ``sync(progress:)``.
    ///
    /// - Throws: `empty_note` when `text` is empty or only whitespace; `invalid_text` when it is larger than the
    ///   remembered server takes (see ``requireFits(_:baseText:settings:)``); `invalid_input` for a tag that breaks
    ///   ``TagRules``, or more tags than a note may have.
    @discardableResult
    public func add(_ text: String, tags: [String] = []) throws(NotesError) -> LocalNote {
        try Self.requireContent(text)
        let tags = try Tags.validatedSet(tags)
        let now = now
        return try store.write { tx in
            try Self.requireFits(text, baseText: nil, settings: try tx.requireSettings())
            let clientID = try tx.mintClientID(with: minter, createdAt: now)
            return try tx.insertNote(clientID: clientID, origin: origin, text: text, now: now, state: TagsAndFlags(tags: tags))
        }
    }

    /// Starts the ID generators again as closing and reopening the client would (a new run of the app): with
    /// ``IDScheme/cdcounter`` client IDs, the counter starts again from the clock at the next note (and, like every
    /// client ID here, above the installation's last one). MiniFlake and creation timestamps keep no state per
    /// run. For in-memory clients, which cannot be reopened (the simulation relaunches devices with it).
    public func restartIDGenerators() {
        minter.restartRun()
    }

    /// Replaces a note's text. Editing a deleted note restores it. The same text again changes nothing.
    ///
    /// - Throws: `empty_note` for empty or whitespace-only text (delete the note instead), `invalid_text` for a text
    ///   the remembered server could never take, `note_not_found`.
    @discardableResult
    public func edit(_ id: LocalNote.ID, text: String) throws(NotesError) -> LocalNote {
        try Self.requireContent(text)
        let now = now
        return try store.write { tx in
            let note = try tx.note(id)
            if note.text == text && !note.isDeleted { return note }
            try Self.requireFits(text, baseText: note.baseText, settings: try tx.requireSettings())
            try tx.replaceText(ofNote: id, with: text, now: now)
            return try tx.note(id)
        }
    }

    /// Refuses a text the remembered server (its limits from the last sync's `GET /v1/info`) would refuse: one
    /// over its `maxNoteBytes`, or whose change (with `baseText`, which a push carries) cannot fit in one request
    /// of `maxBodyBytes`. Without remembered limits (never synced) everything is accepted; the sync then reports
    /// what the server refuses.
    static func requireFits(_ text: String, baseText: String?, settings: Settings) throws(NotesError) {
        let bytes = text.utf8.count
        let server = settings.serverURL.map { " at \($0)" } ?? ""
        if let limit = settings.maxNoteBytes, bytes > limit {
            throw NotesError(
                .invalidText,
                "The note is \(bytes) bytes; the server\(server) takes notes of at most \(limit) bytes, so it could never sync. Nothing was stored.")
        }
        if let limit = settings.maxBodyBytes, bytes + (baseText?.utf8.count ?? 0) + 512 > limit {
            // Escapes can make the JSON longer than the text: measure the change as it would be sent.
            let stand = settings.origin
            let change = NoteChange(
                clientID: stand, origin: stand, serverID: stand, editID: stand, text: text, baseVersion: Int64.max,
                baseText: baseText, editedAt: WireTime.format(unixMilliseconds: 0))
            if change.encodedJSON().count + PushRequest.envelopeBytes > limit {
                throw NotesError(
                    .invalidText,
                    "The note does not fit in one request to the server\(server) (at most \(limit) bytes with its last synced text), so it could never sync. Nothing was stored.")
            }
        }
    }

    /// Deletes a note: it becomes a tombstone that syncs as a delete. A note never synced anywhere stays only as
    /// a local tombstone (shown by `list(includeDeleted: true)`) and is never pushed.
    ///
    /// - Throws: `note_not_found`.
    @discardableResult
    public func delete(_ id: LocalNote.ID) throws(NotesError) -> LocalNote {
        let now = now
        return try store.write { tx in try Self.delete(id, in: tx, now: now) }
    }

    /// ``delete(_:)`` inside a transaction.
    static func delete(_ id: LocalNote.ID, in tx: LocalStore.Transaction, now: Int64) throws -> LocalNote {
        let note = try tx.note(id)
        if note.isDeleted { return note }
        let inFlight = try tx.hasSnapshot(noteID: id)
        let neverSynced = note.baseText == nil && note.serverID == nil && !inFlight
        try tx.markDeleted(id, syncs: !neverSynced, now: now)
        return try tx.note(id)
    }

    static func requireContent(_ text: String) throws(NotesError) {
        if text.allSatisfy(\.isWhitespace) {
            throw NotesError(.emptyNote, "A note cannot be empty; to delete a note use `notes rm ID`.")
        }
    }

    // MARK: - Reads

    /// One note by its local ID.
    public func note(_ id: LocalNote.ID) throws(NotesError) -> LocalNote {
        try store.read { tx in try tx.note(id) }
    }

    /// Every note (archived ones too), newest change first; tombstones only when `includeDeleted`.
    public func notes(includeDeleted: Bool = false) throws(NotesError) -> [LocalNote] {
        try store.read { tx in try tx.notes(includeDeleted: includeDeleted) }
    }

    /// What `notes list` shows: the notes `filter` selects, pinned ones first, then the most recently edited, with
    /// the display ID of each (unique among all local notes, tombstones included). Without tags, one scan of the
    /// notes table that reads only the start of each text, so it stays fast with many long notes; with tags, only
    /// those tags' notes are read.
    public func listing(_ filter: ListingFilter = ListingFilter()) throws(NotesError) -> Listing {
        try store.read { tx in try tx.listing(filter) }
    }

    /// The first `limit` notes of a listing (see ``listing(_:)``), with their display IDs and how many notes the
    /// listing holds in all. Reads only that page and each shown note's neighbours (and counts the rest), so it costs
    /// little with 200,000 notes.
    public func recent(limit: Int, filter: ListingFilter = ListingFilter()) throws(NotesError) -> (listing: Listing, total: Int) {
        try store.read { tx in (try tx.page(filter, limit: limit), try tx.listingCount(filter)) }
    }

    /// The notes of a listing (see ``listing(_:)``), in its order, read whole (`notes list --json`).
    public func notes(_ filter: ListingFilter) throws(NotesError) -> [LocalNote] {
        try store.read { tx in try tx.notes(filter) }
    }

    /// Every note on show (see ``OwnerPlanner``) including tombstones, in local ID order (for invariant checks);
    /// with `includingSetAside`, the notes set aside for other accounts too.
    public func allNotes(includingSetAside: Bool = false) throws(NotesError) -> [LocalNote] {
        try store.read { tx in try includingSetAside ? tx.allNotesOfEveryOwner() : tx.allNotes() }
    }

    /// Every note's identity (tombstones included, in local ID order), the signed-in account and the pull cursor,
    /// read in one transaction and without the texts: what an invariant checker reads after every step.
    public func identities() throws(NotesError) -> NoteIdentities {
        try store.read { tx in try tx.identities() }
    }

    /// Live conflict copies, newest first: each holds text that overlapped another device's edit of the note
    /// named by ``LocalNote/conflictOf``.
    public func conflicts() throws(NotesError) -> [LocalNote] {
        try store.read { tx in try tx.conflicts() }
    }

    /// The local note that has `serverID` in the signed-in account, if any.
    public func note(serverID: FlakeID) throws(NotesError) -> LocalNote? {
        try store.read { tx in try tx.note(serverID: serverID) }
    }

    /// The note a person named by an ID prefix (case-insensitive base32, optionally `-ORIG` after a full colliding
    /// ID; or a full decimal ID). Deleted notes count too.
    ///
    /// - Throws: `invalid_id` (not an ID), `note_not_found`, `ambiguous_id` (the message lists the candidates).
    public func note(byPrefix text: String) throws(NotesError) -> LocalNote {
        guard let prefix = ShortID.Prefix(text) else {
            throw NotesError(
                .invalidID, "'\(text)' is not a note ID: IDs are base32 (digits and letters except I, L, O, U).")
        }
        let candidates: [LocalNote] = try store.read { tx in
            guard let range = prefix.range else { return [] }
            return try tx.notes(clientIDsIn: range).filter { prefix.matches(origin: $0.origin) }
        }
        switch candidates.count {
        case 0:
            throw NotesError(.noteNotFound, "No note has an ID starting with '\(text)'.")
        case 1:
            return candidates[0]
        default:
            let shown = try candidates.prefix(5).map { note throws(NotesError) in try displayID(of: note) }
            let more = candidates.count > 5 ? ", ..." : ""
            throw NotesError(
                .ambiguousID,
                "'\(text)' matches \(candidates.count) notes (\(shown.joined(separator: ", "))\(more)); type more of the ID.")
        }
    }

    /// The short ID people see for every local note (see ``ShortID``), keyed by local ID.
    public func displayIDs() throws(NotesError) -> [LocalNote.ID: String] {
        ShortID.assign(try store.read { tx in try tx.displayKeys() })
    }

    /// The short ID people see for one note (see ``ShortID``).
    public func displayID(of note: LocalNote) throws(NotesError) -> String {
        try displayID(clientID: note.clientID, origin: note.origin)
    }

    /// The short ID people see for a note with this client ID and origin.
    func displayID(clientID: FlakeID, origin: FlakeID) throws(NotesError) -> String {
        let (before, after, twins) = try store.read { tx in try tx.neighbours(ofClientID: clientID) }
        var shared = 0
        for neighbour in [before, after].compactMap({ $0 }) {
            shared = max(shared, ShortID.commonPrefix(clientID, neighbour))
        }
        return ShortID.display(clientID, shared: shared, collides: twins > 1, origin: origin)
    }

    /// The local state in brief: account, cursor, counts.
    public func status() throws(NotesError) -> NotesStatus {
        try store.read { tx in try tx.status() }
    }

    /// The server this device remembers (nil before its first sign-in or sign-up) and the signed-in account (nil
    /// when signed out): what `notes login` and `notes signup` default to. Reads the settings only, where
    /// ``status()`` counts every note (a scan of a million notes is seconds, and maps the whole file in).
    public func remembered() throws(NotesError) -> (serverURL: String?, account: AccountInfo?) {
        try store.read { tx in
            let settings = try tx.settings()
            return (settings?.serverURL, settings?.account)
        }
    }

    /// The signed-in account, nil when signed out.
    public func account() throws(NotesError) -> AccountInfo? {
        try store.read { tx in try tx.settings()?.account }
    }
}
