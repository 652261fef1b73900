import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NoteSyncProtocol
import TestSupport

@testable import NoteSyncServer

extension APIClient {
    /// Sends requests over HTTP through a HummingbirdTesting client (`.router` or `.live`). Response header names
    /// are lowercased.
    init(http client: any TestClientProtocol) {
        self.init { request, contentType in
            let (uri, method, headers, body) = httpParts(request, contentType: contentType)
            let response = try await client.executeRequest(uri: uri, method: method, headers: headers, body: body)
            return WireResponse(status: response.status.code, headers: lowercasedHeaders(response.headers), body: Data(response.body.readableBytesView))
        }
    }

    /// Sends requests over a live socket through HummingbirdTesting's `TestClient`, keeping the connection alive
    /// between requests (as `.live`'s own client does). Response header names are lowercased.
    init(live client: TestClient) {
        self.init { request, contentType in
            var (uri, method, headers, body) = httpParts(request, contentType: contentType)
            headers[.connection] = "keep-alive"
            let response = try await client.execute(TestClient.Request(uri, method: method, authority: "localhost", headers: headers, body: body))
            return WireResponse(
                status: response.status.code, headers: lowercasedHeaders(response.headers),
                body: response.body.map { Data($0.readableBytesView) } ?? Data())
        }
    }
}

/// A protocol request as HTTP: its URI with the query, method, headers (bearer token, content type) and body.
private func httpParts(
    _ request: WireRequest, contentType: String?
) -> (uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) {
    var uri = request.path
    if !request.query.isEmpty {
        uri += "?" + request.query.map { "\($0.0)=\(percentEncoded($0.1))" }.joined(separator: "&")
    }
    var headers = HTTPFields()
    if let token = request.bearerToken { headers[.authorization] = "Bearer \(token)" }
    if let contentType { headers[.contentType] = contentType }
    return (uri, HTTPRequest.Method(request.method.rawValue)!, headers, request.body.map { ByteBuffer(bytes: $0) })
}

func lowercasedHeaders(_ fields: HTTPFields) -> [String: String] {
    var headers: [String: String] = [:]
    for field in fields { headers[field.name.canonicalName] = field.value }
    return headers
}

func percentEncoded(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
}

extension TestResponse {
    /// The protocol error code of the body, if it is an error body.
    var errorCode: APIErrorCode? {
        try? JSONDecoder().decode(APIErrorBody.self, from: Data(body.readableBytesView)).code
    }
}

extension TestServer {
    /// An application around this server's API, for `app.test(.router)`.
    var application: some ApplicationProtocol {
        Application(router: buildRouter(api: api, logger: testLogger), logger: testLogger)
    }
}
