import Foundation

/// The HTTP method of an endpoint, as it appears on the wire.
public enum HTTPMethodName: String, Sendable, CaseIterable {
    case get = "GET"
    case post = "POST"
    case put = "PUT"
    case delete = "DELETE"
}

/// Every route of the sync protocol. Server and client both use these; neither restates a path.
///
/// Paths are versioned (`/v1/...`); a breaking change adds `/v2/...` beside them.
public enum Endpoint: String, Sendable, CaseIterable {
    /// `GET /healthz`: liveness and database reachability. No authentication.
    case health
    /// `GET /v1/info`: server name, version and the limits a client must respect. No authentication.
    case info
    /// `POST /v1/accounts`: create an account ([`SignUpRequest`] → [`AccountResponse`], 201).
    case signUp
    /// `POST /v1/sessions`: sign in ([`SignInRequest`] → [`SignInResponse`]); registers the device.
    case signIn
    /// `DELETE /v1/sessions/current`: sign out; revokes the bearer token (204).
    case signOut
    /// `GET /v1/account`: the authenticated account ([`AccountResponse`]).
    case account
    /// `POST /v1/notes/push`: a batch of changes ([`PushRequest`] → [`PushResponse`]).
    case push
    /// `GET /v1/notes/changes?since=CURSOR&limit=N[&wait=SECONDS]`: changes since a cursor ([`PullResponse`]); with
    /// `wait`, held open until one commits.
    case pull
    /// `GET /v1/sessions`: the account's signed-in devices ([`SessionListResponse`]).
    case sessions
    /// `POST /v1/sessions/revoke`: sign one device of the account out ([`RevokeSessionRequest`], 204).
    case revokeSession
    /// `POST /v1/sessions/revoke-others`: sign every other device of the account out ([`RevokedSessionsResponse`]).
    case revokeOtherSessions
    /// `POST /v1/account/password`: change the password; signs every other device out ([`ChangePasswordRequest`] →
    /// [`RevokedSessionsResponse`]).
    case changePassword
    /// `POST /v1/account/delete`: delete the account, its notes and its sessions ([`DeleteAccountRequest`], 204).
    case deleteAccount
    /// `GET /v1/notes/{serverID}/versions?after=V&limit=N`: one page of a note's kept versions, oldest first
    /// ([`NoteVersionsRequest`] → [`NoteVersionsResponse`]); 404 `note_not_found` when the account has no such note.
    case noteVersions
    /// `POST /v1/chunks/missing`: which of these chunks the account lacks ([`MissingChunksRequest`] →
    /// [`MissingChunksResponse`]).
    case missingChunks
    /// `PUT /v1/chunks/{hash}`: store a chunk; the body is its bytes (`application/octet-stream`, at most
    /// ``ChunkRules/maxChunkBytes``) → [`ChunkStoredResponse`], 201 when stored now, 200 when the account had it.
    case putChunk
    /// `GET /v1/chunks/{hash}`: a chunk's bytes (`application/octet-stream`), 404 `chunk_not_found`.
    case getChunk
    /// `POST /v1/prelogin`: how to derive the credential of a username ([`PreloginRequest`] →
    /// [`PreloginResponse`]). No authentication.
    case prelogin
    /// `GET /v1/account/keys?after=G`: the key material a device of an encrypted account needs for the generations
    /// after `G` ([`AccountKeysResponse`]); 409 `not_encrypted` for a plaintext account.
    case accountKeys
    /// `POST /v1/account/keys/rotate`: a new generation of the account key ([`RotateKeysRequest`] →
    /// [`RotateKeysResponse`]); 409 `stale_generation` when it is not the current one plus one.
    case rotateKeys
    /// `POST /v1/account/encryption`: set up a plaintext account as encrypted
    /// ([`AccountEncryptionRequest`] → [`AccountEncryptionResponse`]); signs every other device out; an account that
    /// holds notes starts converting.
    case setUpEncryption

    public var method: HTTPMethodName {
        switch self {
        case .health, .info, .account, .pull, .sessions, .noteVersions, .getChunk, .accountKeys: .get
        case .signUp, .signIn, .push, .revokeSession, .revokeOtherSessions, .changePassword, .deleteAccount, .missingChunks,
            .prelogin, .rotateKeys, .setUpEncryption:
            .post
        case .putChunk: .put
        case .signOut: .delete
        }
    }

    /// The path, or for an endpoint with a path parameter its template, the parameter in braces
    /// (`/v1/notes/{serverID}/versions`, `/v1/chunks/{hash}`, as OpenAPI writes it): fill it with
    /// ``path(parameter:)``, match it with ``parameter(in:)``.
    public var path: String {
        switch self {
        case .health: "/healthz"
        case .info: "/v1/info"
        case .signUp: "/v1/accounts"
        case .signIn: "/v1/sessions"
        case .signOut: "/v1/sessions/current"
        case .account: "/v1/account"
        case .push: "/v1/notes/push"
        case .pull: "/v1/notes/changes"
        case .sessions: "/v1/sessions"
        case .revokeSession: "/v1/sessions/revoke"
        case .revokeOtherSessions: "/v1/sessions/revoke-others"
        case .changePassword: "/v1/account/password"
        case .deleteAccount: "/v1/account/delete"
        case .noteVersions: "/v1/notes/{serverID}/versions"
        case .missingChunks: "/v1/chunks/missing"
        case .putChunk, .getChunk: "/v1/chunks/{hash}"
        case .prelogin: "/v1/prelogin"
        case .accountKeys: "/v1/account/keys"
        case .rotateKeys: "/v1/account/keys/rotate"
        case .setUpEncryption: "/v1/account/encryption"
        }
    }

    /// The name of the path's parameter (`serverID`, `hash`), nil for a fixed path.
    public var pathParameter: String? {
        switch self {
        case .noteVersions: "serverID"
        case .putChunk, .getChunk: "hash"
        default: nil
        }
    }

    /// The path with its parameter filled in (the path itself for a fixed one). The value must be one path segment:
    /// not empty, no `/`.
    public func path(parameter value: String) -> String {
        guard let name = pathParameter else { return path }
        return path.replacingOccurrences(of: "{\(name)}", with: value)
    }

    /// The path of a chunk route for `hash` (`/v1/chunks/<64 hex digits>`).
    public func path(hash: ContentHash) -> String { path(parameter: hash.hex) }

    /// Whether `path` is this endpoint's: equal to a fixed path, or the template with one non-empty segment (no `/`)
    /// where its parameter is. Returns that segment (the empty string for a fixed path), nil when it is not. The
    /// handler checks the segment (`invalid_id`, `invalid_hash`).
    public func parameter(in path: String) -> Substring? {
        guard let name = pathParameter else { return path == self.path ? "" : nil }
        let template = self.path.split(separator: "/", omittingEmptySubsequences: false)
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count == template.count else { return nil }
        var value: Substring?
        for (segment, expected) in zip(segments, template) {
            if expected == "{\(name)}" {
                guard !segment.isEmpty else { return nil }
                value = segment
            } else if segment != expected {
                return nil
            }
        }
        return value
    }

    /// Whether `path` is this endpoint's (``parameter(in:)``).
    public func matches(path: String) -> Bool { parameter(in: path) != nil }

    /// The media type of the request body: JSON, or bytes for ``putChunk``.
    public var requestMediaType: String { self == .putChunk ? ChunkRules.mediaType : "application/json" }

    /// Whether the endpoint needs `Authorization: Bearer <token>`.
    public var requiresAuthentication: Bool {
        switch self {
        case .health, .info, .signUp, .signIn, .prelogin: false
        case .signOut, .account, .push, .pull, .sessions, .revokeSession, .revokeOtherSessions, .changePassword, .deleteAccount,
            .noteVersions, .missingChunks, .putChunk, .getChunk, .accountKeys, .rotateKeys, .setUpEncryption:
            true
        }
    }

    /// The status of a successful answer.
    public var successStatus: Int {
        switch self {
        case .signUp, .putChunk: 201
        case .signOut, .revokeSession, .deleteAccount: 204
        default: 200
        }
    }

    /// The endpoint for a method and path, if any (a path with its parameter filled in matches its template; a fixed
    /// path never does: ``endpoints(at:)``).
    public static func matching(method: String, path: String) -> Endpoint? {
        endpoints(at: path).first { $0.method.rawValue == method }
    }

    /// The endpoints whose path is `path`. A fixed path is not a template's parameter: `GET /v1/chunks/missing` is
    /// 405 (`/v1/chunks/missing` takes POST), not a chunk named "missing".
    public static func endpoints(at path: String) -> [Endpoint] {
        let fixed = allCases.contains { $0.pathParameter == nil && $0.path == path }
        return allCases.filter { $0.matches(path: path) && !($0.pathParameter != nil && fixed) }
    }
}

extension WireRequest {
    /// A request for a chunk route (``Endpoint/putChunk``, ``Endpoint/getChunk``) for `hash`.
    public init(_ endpoint: Endpoint, hash: ContentHash, bearerToken: String? = nil, body: Data? = nil) {
        self.init(method: endpoint.method, path: endpoint.path(hash: hash), bearerToken: bearerToken, body: body)
    }
}

/// Query parameter names of the pull endpoint.
public enum PullQuery {
    public static let since = "since"
    public static let limit = "limit"
    /// Seconds to hold the pull open when no change follows the cursor (see ``LiveLimits``).
    public static let wait = "wait"
}

/// Header names the protocol uses beyond the standard ones.
public enum ProtocolHeader {
    /// Echoed on every response: the request id the server logged the request under.
    public static let requestID = "X-Request-Id"
}
