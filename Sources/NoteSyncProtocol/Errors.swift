/// A stable, machine-readable error code. The set is open (a newer server may send codes an older client does not
/// know), so this is a string wrapper rather than a closed enum; the known codes are the static members.
public struct APIErrorCode: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    // Request-level errors.
    /// 400: the body is not JSON, or a field has the wrong type or is missing.
    public static let invalidJSON = APIErrorCode("invalid_json")
    /// 400: the body has a field the protocol does not define (requests are strict; responses may grow).
    public static let unknownField = APIErrorCode("unknown_field")
    /// 400: a field has a value outside its documented range (username, password, device name, ...).
    public static let invalidField = APIErrorCode("invalid_field")
    /// 400: an ID is not a valid MiniFlake value (zero, negative, malformed, or a JSON number above 2^53).
    public static let invalidID = APIErrorCode("invalid_id")
    /// 400: the pull cursor is not one this server issued.
    public static let invalidCursor = APIErrorCode("invalid_cursor")
    /// 400: the pull limit is not a positive integer.
    public static let invalidLimit = APIErrorCode("invalid_limit")
    /// 401: no bearer token, a malformed one, or one that is unknown or revoked.
    public static let unauthorized = APIErrorCode("unauthorized")
    /// 401: wrong username or password (the same answer for both, so usernames cannot be probed).
    public static let invalidCredentials = APIErrorCode("invalid_credentials")
    /// 404: no such route.
    public static let notFound = APIErrorCode("not_found")
    /// 405: the route exists with another method.
    public static let methodNotAllowed = APIErrorCode("method_not_allowed")
    /// 403: this server does not take sign-ups (its operator creates the accounts: `notesyncd users add`).
    public static let signUpClosed = APIErrorCode("sign_up_closed")
    /// 403: the operator disabled this account (`notesyncd users disable`); the password was right, but the account
    /// cannot sign in until it is enabled again.
    public static let accountDisabled = APIErrorCode("account_disabled")
    /// 409: the username is already registered.
    public static let usernameTaken = APIErrorCode("username_taken")
    /// 413: the body is larger than `maxBodyBytes`.
    public static let bodyTooLarge = APIErrorCode("body_too_large")
    /// 413: the push has more than `maxBatchChanges` changes.
    public static let batchTooLarge = APIErrorCode("batch_too_large")
    /// 415: the body is not `application/json`.
    public static let unsupportedMediaType = APIErrorCode("unsupported_media_type")
    /// 429: too many failed sign-ins; retry after the `Retry-After` header's seconds.
    public static let tooManyAttempts = APIErrorCode("too_many_attempts")
    /// 400: the request is not valid HTTP/1.1 (a header line without a colon, a bad or conflicting Content-Length or
    /// Transfer-Encoding, ...); the server answers and closes the connection.
    public static let invalidHTTP = APIErrorCode("invalid_http")
    /// 431: the request's header fields are too many or too large; the server answers and closes the connection.
    public static let headersTooLarge = APIErrorCode("headers_too_large")
    /// 400: the pull's `wait` is not a non-negative integer of seconds.
    public static let invalidWait = APIErrorCode("invalid_wait")
    /// 429: the account (or the daemon) already holds as many waiting pulls as it allows; retry after the
    /// `Retry-After` header's seconds, or pull without `wait`.
    public static let tooManyWaiters = APIErrorCode("too_many_waiters")
    /// 500: a fault of the server's own (never a client's mistake).
    public static let internalError = APIErrorCode("internal")
    /// 503: the server cannot reach its database right now; retry.
    public static let unavailable = APIErrorCode("unavailable")

    // Per-change errors (inside a push result, status `rejected`).
    /// The note text is larger than `maxNoteBytes`.
    public static let noteTooLarge = APIErrorCode("note_too_large")
    /// The change names a server ID that is not a note of this account (whether or not it exists elsewhere).
    public static let unknownNote = APIErrorCode("unknown_note")
    /// The server ID names a note whose client ID or origin differs from the change's.
    public static let clientIDMismatch = APIErrorCode("client_id_mismatch")
    /// The change's base version is newer than the note's current version.
    public static let invalidBase = APIErrorCode("invalid_base")
    /// The same edit ID appears twice in one batch.
    public static let duplicateEdit = APIErrorCode("duplicate_edit")
    /// The change would take the account over its note or byte limit (`GET /v1/account` reports both); as a
    /// response status (413), a chunk upload that would take the account over its byte limit.
    public static let quotaExceeded = APIErrorCode("quota_exceeded")

    // Devices, passwords and account deletion.
    /// 403: the current password given to change the password or delete the account is wrong. Not 401: the session
    /// is still valid, and a client signs out on 401.
    public static let wrongPassword = APIErrorCode("wrong_password")
    /// 404: the session to revoke is not one of this account's (or was already revoked).
    public static let unknownSession = APIErrorCode("unknown_session")

    // History.
    /// 404: the note whose versions were asked for is not one of this account's (whether or not it exists
    /// elsewhere).
    public static let noteNotFound = APIErrorCode("note_not_found")

    // Invite codes (sign-up policy `invite`).
    /// 403: this server takes sign-ups only with an invite code from its operator, and the request has none.
    public static let inviteRequired = APIErrorCode("invite_required")
    /// 403: the invite code is not one this server can take: unknown, used up, expired or revoked (the same answer
    /// for all four, so a guesser learns nothing).
    public static let invalidInvite = APIErrorCode("invalid_invite")

    // Chunks (attachments).
    /// 400: a content address is not a SHA-256 hash in 64 lowercase hexadecimal digits (in the path or the body).
    public static let invalidHash = APIErrorCode("invalid_hash")
    /// 400: the chunk's bytes do not hash to the address it was sent under; nothing was stored.
    public static let chunkHashMismatch = APIErrorCode("chunk_hash_mismatch")
    /// 413: the chunk is larger than ``ChunkRules/maxChunkBytes``.
    public static let chunkTooLarge = APIErrorCode("chunk_too_large")
    /// 400: the chunk's body is empty (a chunk holds at least one byte).
    public static let emptyChunk = APIErrorCode("empty_chunk")
    /// 404: the account has no chunk with this address (whether or not another account has one).
    public static let chunkNotFound = APIErrorCode("chunk_not_found")

    // End-to-end encryption.
    /// 409 for a request that needs an encrypted account (`GET /v1/account/keys` of a plaintext one); per change, a
    /// push of an encrypted account whose text is not a well-formed note envelope (nothing stored: a client cannot put
    /// plaintext into an encrypted account).
    public static let notEncrypted = APIErrorCode("not_encrypted")
    /// 409: a rotation names a generation other than the account's current one plus one (another device rotated
    /// first): fetch the keys and retry. Nothing of the rotation is stored.
    public static let staleGeneration = APIErrorCode("stale_generation")

    /// 409: `POST /v1/account/encryption` of an account that already is end-to-end encrypted.
    public static let alreadyEncrypted = APIErrorCode("already_encrypted")
    /// 409: `POST /v1/account/encryption` of a plaintext account that holds notes (tombstones included): it is
    /// converted instead (`notes encryption enable`).
    public static let accountNotEmpty = APIErrorCode("account_not_empty")

    // Attachments on notes.
    /// Per change: the change refers to a chunk the account does not have (in a manifest of its `attachments`, or in
    /// its `chunkRefs`; a base's chunks are not checked); the message names one missing address. Nothing was stored for it: upload
    /// the chunk (`PUT /v1/chunks/{hash}`) and push again.
    public static let unknownChunk = APIErrorCode("unknown_chunk")

    /// Every code the protocol defines, for documentation checks.
    public static let allKnown: [APIErrorCode] = [
        .invalidJSON, .unknownField, .invalidField, .invalidID, .invalidCursor, .invalidLimit, .unauthorized,
        .invalidCredentials, .notFound, .methodNotAllowed, .usernameTaken, .bodyTooLarge, .batchTooLarge,
        .unsupportedMediaType, .tooManyAttempts, .internalError, .unavailable, .noteTooLarge, .unknownNote,
        .clientIDMismatch, .invalidBase, .duplicateEdit, .invalidHTTP, .headersTooLarge,
        .signUpClosed, .accountDisabled, .quotaExceeded, .wrongPassword, .unknownSession,
        .invalidWait, .tooManyWaiters,
        .inviteRequired, .invalidInvite, .noteNotFound,
        .invalidHash, .chunkHashMismatch, .chunkTooLarge, .emptyChunk, .chunkNotFound,
        .notEncrypted, .staleGeneration, .alreadyEncrypted, .accountNotEmpty,
        .unknownChunk,
    ]

    /// Per-change codes: they appear inside a `ChangeResult`, and never as a push's response status
    /// (`quota_exceeded` is also the 413 of a chunk upload over the account's byte limit).
    public static let perChange: Set<APIErrorCode> = [
        .noteTooLarge, .unknownNote, .clientIDMismatch, .invalidBase, .duplicateEdit, .invalidID, .quotaExceeded,
        .unknownChunk,
    ]
    // `not_encrypted` and `invalid_field` are per-change codes too (a push of an encrypted account), and response
    // codes elsewhere, so they are not in ``perChange``.

    /// The HTTP status a response carrying this code has.
    public var httpStatus: Int {
        switch self {
        case .unauthorized, .invalidCredentials: 401
        case .signUpClosed, .accountDisabled, .wrongPassword, .inviteRequired, .invalidInvite: 403
        case .notFound, .unknownSession, .noteNotFound, .chunkNotFound: 404
        case .methodNotAllowed: 405
        case .usernameTaken, .notEncrypted, .staleGeneration, .alreadyEncrypted, .accountNotEmpty: 409
        case .bodyTooLarge, .batchTooLarge, .chunkTooLarge, .quotaExceeded: 413
        case .unsupportedMediaType: 415
        case .tooManyAttempts, .tooManyWaiters: 429
        case .headersTooLarge: 431
        case .internalError: 500
        case .unavailable: 503
        default: 400
        }
    }
}

/// The JSON body of every error response: `{"code": "invalid_json", "message": "..."}`.
public struct APIErrorBody: Codable, Sendable, Equatable, Error, CustomStringConvertible {
    /// The stable code; branch on this, never on the message.
    public var code: APIErrorCode
    /// One human sentence saying what was wrong.
    public var message: String
    /// The offending field, when one is to blame (e.g. `changes[3].clientID`).
    public var field: String?

    public enum CodingKeys: String, WireKey { case code, message, field }

    public init(code: APIErrorCode, message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
