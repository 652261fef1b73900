import Foundation
import NoteSyncProtocol

/// One server conversation: the transport, the server's URL (for messages), the token, and the retry rules.
struct ServerConnection: Sendable {
    let transport: any SyncTransport
    let server: String
    var token: String?
    let retry: RetryPolicy
    let sleep: @Sendable (Duration) async -> Void
    /// Returns a jitter fraction in `0...1`.
    let jitter: @Sendable () -> Double

    /// Sends a request and returns the 2xx answer.
    ///
    /// Transport failures and 5xx answers are retried with exponential backoff and full jitter, up to
    /// `retry.maxAttempts` tries (pass `attempts: 1` for none); 4xx answers are not.
    ///
    /// - Throws: `server_unreachable` (transport failures), `server_error` (5xx after retries, other 4xx),
    ///   `invalid_credentials`, `signed_out_by_server` (401 on an authenticated endpoint), `bad_response` (an
    ///   error answer that is not a protocol error body).
    func exchange(
        _ endpoint: Endpoint, query: [(String, String)] = [], body: Data? = nil, attempts: Int? = nil
    ) async throws(NotesError) -> WireResponse {
        let request = WireRequest(endpoint, query: query, bearerToken: endpoint.requiresAuthentication ? token : nil, body: body)
        return try await exchange(request, for: endpoint, attempts: attempts)
    }

    /// Sends `request`, built for `endpoint` (a path with its parameter filled in: ``NoteVersionsRequest``, a chunk's
    /// path), and returns the 2xx answer, as ``exchange(_:query:body:attempts:)`` does. `carry` sends it: the
    /// transport's `upload` or `download` for a chunk's body in a file; nil for the transport's `send`.
    func exchange(
        _ request: WireRequest, for endpoint: Endpoint, attempts: Int? = nil,
        carry: ((WireRequest) async throws -> WireResponse)? = nil
    ) async throws(NotesError) -> WireResponse {
        let maxAttempts = max(1, attempts ?? retry.maxAttempts)
        var attempt = 0
        while true {
            attempt += 1
            let response: WireResponse
            do {
                if let carry {
                    response = try await carry(request)
                } else {
                    response = try await transport.send(request)
                }
            } catch {
                // A cancelled task's request fails at once each time: retrying it would only repeat the failure.
                if attempt < maxAttempts, !Task.isCancelled {
                    await backoff(after: attempt)
                    continue
                }
                throw NotesError(.serverUnreachable, "The server \(server) cannot be reached.", cause: String(describing: error))
            }
            if response.isSuccess { return response }
            let apiError = response.errorBody()
            if response.status >= 500 {
                // Nor is a cancelled task's (an in-process server answers 500 when the cancellation reaches it).
                if attempt < maxAttempts, !Task.isCancelled {
                    await backoff(after: attempt)
                    continue
                }
                let reason = apiError.map { ": \($0.message)" } ?? ""
                throw NotesError(
                    .serverError, "The server \(server) failed (HTTP \(response.status))\(reason); try again later.",
                    api: apiError, httpStatus: response.status)
            }
            if response.status == 401 {
                if apiError?.code == .invalidCredentials || endpoint == .signIn {
                    throw NotesError(.invalidCredentials, "Wrong username or password.", api: apiError, httpStatus: 401)
                }
                if endpoint.requiresAuthentication {
                    throw NotesError(
                        .signedOutByServer,
                        "Signed out by the server (the session was revoked); your notes are kept on this device and sync at your next sign-in.",
                        api: apiError, httpStatus: 401)
                }
            }
            guard let apiError else {
                throw NotesError(
                    .badResponse,
                    "The server \(server) answered HTTP \(response.status) without a FlakeNotes error; is it a FlakeNotes server?",
                    httpStatus: response.status)
            }
            throw NotesError(.serverError, "The server refused the request: \(apiError.message)", api: apiError, httpStatus: response.status)
        }
    }

    /// Sends a request and decodes its 2xx answer.
    func call<Response: Decodable>(
        _ endpoint: Endpoint, _ type: Response.Type, query: [(String, String)] = [], body: Data? = nil, attempts: Int? = nil
    ) async throws(NotesError) -> Response {
        let response = try await exchange(endpoint, query: query, body: body, attempts: attempts)
        return try decode(response, as: type, for: endpoint)
    }

    /// Sends one page request of a note's history and decodes its answer.
    func call(_ request: NoteVersionsRequest) async throws(NotesError) -> NoteVersionsResponse {
        let response = try await exchange(request.wireRequest(bearerToken: token), for: .noteVersions)
        return try decode(response, as: NoteVersionsResponse.self, for: .noteVersions)
    }

    /// A 2xx answer's body decoded.
    private func decode<Response: Decodable>(
        _ response: WireResponse, as type: Response.Type, for endpoint: Endpoint
    ) throws(NotesError) -> Response {
        do {
            // Push and pull answers: the hand-written decoder of their common shape, `JSONDecoder` behind it.
            if let fast = Response.self as? any WireFastDecodable.Type, let value = try fast.decode(response.body) as? Response {
                return value
            }
            return try WireJSON.decoder().decode(type, from: response.body)
        } catch {
            throw NotesError.badResponse("\(endpoint.method.rawValue) \(endpoint.path) returned \(Self.preview(response.body))")
        }
    }

    private func backoff(after attempt: Int) async {
        let ceiling = retry.ceiling(after: attempt)
        await sleep(ceiling * jitter())
    }

    /// The start of a body, for error messages.
    static func preview(_ body: Data) -> String {
        if body.isEmpty { return "an empty body" }
        let text = String(decoding: body.prefix(60), as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
        return "'\(text)\(body.count > 60 ? "…" : "")'"
    }
}

/// Encodes a request body; encoding protocol types cannot fail.
func encodeBody(_ value: some Encodable) -> Data {
    (try? WireJSON.encoder().encode(value)) ?? Data()
}
