import Foundation
import MiniFlake
import NoteSyncProtocol
import NoteSyncServer
import NotesClient

/// Sends protocol requests with typed helpers: in process (``SyncAPI/handle(_:contentType:)``), through any
/// ``SyncTransport`` (URLSession to a real daemon), or through whatever `send` the caller gives.
public struct APIClient: Sendable {
    /// Sends one request with an optional Content-Type.
    public let send: @Sendable (WireRequest, String?) async throws -> WireResponse

    public init(send: @escaping @Sendable (WireRequest, String?) async throws -> WireResponse) {
        self.send = send
    }

    public init(api: SyncAPI) {
        send = { request, contentType in await api.handle(request, contentType: contentType) }
    }

    /// Over a transport (which sets its own Content-Type).
    public init(transport: any SyncTransport) {
        send = { request, _ in try await transport.send(request) }
    }

    /// Sends a request; `contentType` is the header sent (`application/json` unless the caller says otherwise; nil
    /// sends none).
    public func call(
        _ endpoint: Endpoint, token: String? = nil, query: [(String, String)] = [], body: Data? = nil,
        contentType: String? = "application/json"
    ) async throws -> WireResponse {
        try await send(WireRequest(endpoint, query: query, bearerToken: token, body: body), contentType)
    }

    public func call(_ endpoint: Endpoint, token: String? = nil, json: some Encodable) async throws -> WireResponse {
        try await call(endpoint, token: token, body: try WireJSON.encoder().encode(json), contentType: "application/json")
    }

    public func call(_ endpoint: Endpoint, token: String? = nil, rawJSON: String) async throws -> WireResponse {
        try await call(endpoint, token: token, body: Data(rawJSON.utf8), contentType: "application/json")
    }

    /// The body of a 2xx answer; throws ``UnexpectedResponse`` for any other.
    public func decode<T: Decodable>(_ type: T.Type, _ response: WireResponse) throws -> T {
        guard response.isSuccess else { throw UnexpectedResponse(response: response) }
        return try WireJSON.decoder().decode(type, from: response.body)
    }

    @discardableResult
    public func signUp(_ username: String, _ password: String = "correct horse") async throws -> AccountResponse {
        try decode(AccountResponse.self, try await call(.signUp, json: SignUpRequest(username: username, password: password)))
    }

    public func signIn(
        _ username: String, _ password: String = "correct horse", device: String? = "test", origin: FlakeID? = nil
    ) async throws -> SignInResponse {
        try decode(
            SignInResponse.self,
            try await call(.signIn, json: SignInRequest(username: username, password: password, deviceName: device, origin: origin)))
    }

    /// Signs up and in; returns the session.
    public func account(_ username: String) async throws -> SignInResponse {
        try await signUp(username)
        return try await signIn(username)
    }

    public func push(_ token: String, _ changes: [NoteChange]) async throws -> [ChangeResult] {
        try decode(PushResponse.self, try await call(.push, token: token, json: PushRequest(changes: changes))).results
    }

    public func pull(_ token: String, since: SyncCursor? = nil, limit: Int? = nil, wait: Int? = nil) async throws -> PullResponse {
        var query: [(String, String)] = []
        if let since { query.append((PullQuery.since, since.text)) }
        if let limit { query.append((PullQuery.limit, String(limit))) }
        if let wait { query.append((PullQuery.wait, String(wait))) }
        return try decode(PullResponse.self, try await call(.pull, token: token, query: query))
    }

    /// One page of a note's history (`GET /v1/notes/{serverID}/versions`).
    public func versions(_ token: String, _ serverID: FlakeID, after: Int64 = 0, limit: Int? = nil) async throws -> NoteVersionsResponse {
        let request = NoteVersionsRequest(serverID: serverID, after: after, limit: limit).wireRequest(bearerToken: token)
        return try decode(NoteVersionsResponse.self, try await send(request, nil))
    }

    /// Every kept version of a note, paging from the first.
    public func allVersions(_ token: String, _ serverID: FlakeID, pageSize: Int? = nil) async throws -> [NoteVersion] {
        var versions: [NoteVersion] = []
        while true {
            let page = try await self.versions(token, serverID, after: versions.last?.version ?? 0, limit: pageSize)
            versions += page.versions
            if !page.hasMore { return versions }
        }
    }

    /// Every note of the account, paging from the start.
    public func pullAll(_ token: String, pageSize: Int = 1000) async throws -> [NoteRecord] {
        var cursor = SyncCursor.start
        var notes: [NoteRecord] = []
        while true {
            let page = try await pull(token, since: cursor, limit: pageSize)
            notes += page.changes
            cursor = page.cursor
            if !page.hasMore { return notes }
        }
    }
}

/// A request answered with something other than the 2xx the caller expected.
public struct UnexpectedResponse: Error, Sendable, CustomStringConvertible {
    public var response: WireResponse
    public var description: String {
        "expected success, got \(response.status): \(String(decoding: response.body, as: UTF8.self))"
    }
}

extension WireResponse {
    /// The error code of a failed response (nil for success or a body that is not an error).
    public var errorCode: APIErrorCode? { errorBody()?.code }
    /// The body as text.
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Builds a change tersely from raw ID values.
public func change(
    _ clientID: Int64, origin: Int64 = 77, server: FlakeID? = nil, edit: Int64, text: String, deleted: Bool = false,
    baseVersion: Int64? = nil, baseText: String? = nil, editedAt: Int64? = nil
) -> NoteChange {
    NoteChange(
        clientID: id(clientID), origin: id(origin), serverID: server, editID: id(edit), text: text, deleted: deleted,
        baseVersion: baseVersion, baseText: baseText, editedAt: editedAt.map { WireTime.format(unixMilliseconds: $0) })
}

/// A valid ID from a raw value (a test's constant).
public func id(_ value: Int64) -> FlakeID { try! FlakeID(validating: value) }

/// Notes by server ID, for before/after comparisons.
public func byServerID(_ notes: [NoteRecord]) -> [FlakeID: NoteRecord] {
    Dictionary(notes.map { ($0.serverID, $0) }, uniquingKeysWith: { _, last in last })
}
