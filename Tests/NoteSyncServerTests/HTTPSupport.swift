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
            var uri = request.path
            if !request.query.isEmpty {
                uri += "?" + request.query.map { "\($0.0)=\(percentEncoded($0.1))" }.joined(separator: "&")
            }
            var headers = HTTPFields()
            if let token = request.bearerToken { headers[.authorization] = "Bearer \(token)" }
            if let contentType { headers[.contentType] = contentType }
            let response = try await client.executeRequest(
                uri: uri, method: HTTPRequest.Method(request.method.rawValue)!, headers: headers,
                body: request.body.map { ByteBuffer(bytes: $0) }
            )
            return WireResponse(status: response.status.code, headers: lowercasedHeaders(response.headers), body: Data(response.body.readableBytesView))
        }
    }
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
