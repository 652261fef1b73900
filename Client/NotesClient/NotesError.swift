import NoteSyncProtocol

/// Everything the notes client can fail with: a stable ``code``, one human sentence (``message``), and where
/// useful the server's error body (``api``) or the underlying cause (``cause``).
///
/// Every public throwing method of ``NotesClient`` throws only this type.
public struct NotesError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable, machine-readable reason. Branch on this, never on the message.
    public enum Code: String, Sendable, Codable, CaseIterable {
        /// `add`/`edit` with empty or whitespace-only text (delete the note instead).
        case emptyNote = "empty_note"
        /// Text that is not valid UTF-8 (the message gives the byte offset), or a note larger than the server's
        /// limit: refused before anything is stored.
        case invalidText = "invalid_text"
        /// No local note has this ID or ID prefix.
        case noteNotFound = "note_not_found"
        /// An ID prefix matches more than one local note.
        case ambiguousID = "ambiguous_id"
        /// The text given as an ID is not a base32 (or decimal) MiniFlake ID or prefix.
        case invalidID = "invalid_id"
        /// A username or password that breaks ``CredentialRules``, or a malformed server URL.
        case invalidInput = "invalid_input"
        /// The command needs an account and this installation is signed out.
        case notSignedIn = "not_signed_in"
        /// The server answered 401 to a signed-in request: the session was revoked. The local session was
        /// forgotten; every note is kept and syncs at the next sign-in.
        case signedOutByServer = "signed_out_by_server"
        /// Wrong username or password.
        case invalidCredentials = "invalid_credentials"
        /// The server could not be reached (connection refused, timeout, reset), after retries.
        case serverUnreachable = "server_unreachable"
        /// The server refused the request (4xx) or failed (5xx, after retries); ``NotesError/api`` says why
        /// when it sent a protocol error body.
        case serverError = "server_error"
        /// The server answered something that is not a FlakeNotes answer (not JSON, wrong shape, results that
        /// do not match the request). Nothing was applied locally.
        case badResponse = "bad_response"
        /// The data directory cannot be created, read or written.
        case dataDirectory = "data_directory"
        /// The local database failed (corrupt file, disk full, locked for too long).
        case storage = "storage"
        /// The MiniFlake ID generator failed (its time range ends in 2087).
        case idGenerator = "id_generator"
        /// A file to attach cannot be read, or a file to save an attachment to cannot be written.
        case fileAccess = "file_access"
        /// An attachment's bytes do not match its manifest (a chunk or the whole file hashes to something else), or
        /// the manifest itself is malformed. Nothing was saved.
        case attachmentCorrupt = "attachment_corrupt"
        /// A note has no attachment of this name (`notes save`, `notes detach`).
        case attachmentNotFound = "attachment_not_found"
        /// A note has an attachment of this name already, or two files to attach share one: detach it first.
        case attachmentExists = "attachment_exists"
        /// End-to-end encryption failed on this device: the server offered a password-hashing cost out of bounds, the
        /// account's key does not open with the password, or the server's answer holds key material that is not
        /// well formed.
        case encryption = "encryption"
        /// The server's operator reset the encrypted account's password (`notesyncd users reset-password`): the
        /// account's key opens only with its recovery key now (`notes encryption recover`).
        case accountReset = "account_reset"
    }

    /// The stable reason.
    public var code: Code
    /// One human sentence saying what went wrong (and, when there is one, what to do).
    public var message: String
    /// The protocol error body, when the server sent one.
    public var api: APIErrorBody?
    /// The HTTP status, when the server answered.
    public var httpStatus: Int?
    /// A description of the underlying cause (SQLite message, URL error, ...), when there is one.
    public var cause: String?

    public init(_ code: Code, _ message: String, api: APIErrorBody? = nil, httpStatus: Int? = nil, cause: String? = nil) {
        self.code = code
        self.message = message
        self.api = api
        self.httpStatus = httpStatus
        self.cause = cause
    }

    public var description: String {
        if let cause, !message.contains(cause) { return "\(message) (\(cause))" }
        return message
    }
}

extension NotesError {
    static func storage(_ error: any Error) -> NotesError {
        if let notes = error as? NotesError { return notes }
        return NotesError(.storage, "The local notes database failed.", cause: String(describing: error))
    }

    static func badResponse(_ what: String) -> NotesError {
        NotesError(.badResponse, "The server's answer is not a FlakeNotes answer: \(what).")
    }
}

/// Runs `body`, turning any error that is not a ``NotesError`` into a `storage` error.
@inline(__always)
func mapErrors<T>(_ body: () throws -> T) throws(NotesError) -> T {
    do {
        return try body()
    } catch let error as NotesError {
        throw error
    } catch {
        throw NotesError.storage(error)
    }
}
