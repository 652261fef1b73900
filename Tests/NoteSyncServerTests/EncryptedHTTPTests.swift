import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// An encrypted account through the daemon's real application over a real socket (`.live`), on SQLite and, when
/// `FLAKENOTES_POSTGRES_URL` is set, on PostgreSQL: prelogin, sign-up with keys, sign-in with a device key, the keys
/// endpoint, an encrypted push, a refused plaintext one, and a stale one.
@Suite("encrypted accounts over HTTP")
struct EncryptedHTTPTests {
    @Test func sqlite() async throws {
        try await LiveDaemon.withConfiguration({ _ in }) { configuration in try await Self.exercise(configuration) }
    }

    @Test(.enabled(if: TestPostgres.isAvailable, "FLAKENOTES_POSTGRES_URL is not set"))
    func postgres() async throws {
        try await Self.exercise(try await LiveDaemon.postgresConfiguration())
    }

    static func exercise(_ configuration: ServerConfiguration) async throws {
        let user = EncryptedUser("alice", now: SystemFlakeClock.precise.unixMilliseconds())
        try await LiveDaemon.serve(configuration) { port, _ in try await LiveDaemon.withHTTPClient(port: port) { api in
            let unknown = try api.decode(PreloginResponse.self, try await api.call(.prelogin, json: PreloginRequest(username: "alice")))
            #expect(unknown.encrypted && unknown.kdf?.opsLimit == Int64(KDFCost.production.opsLimit))
            let created = try api.decode(AccountResponse.self, try await api.call(.signUp, json: user.signUpRequest))
            #expect(created.accountID == user.accountID && created.encryption == .encrypted)
            let known = try api.decode(PreloginResponse.self, try await api.call(.prelogin, json: PreloginRequest(username: "alice")))
            #expect(known == PreloginResponse(encrypted: true, kdf: user.setup.kdf))

            let laptop = try api.decode(SignInResponse.self, try await api.call(.signIn, json: user.signInRequest(device: "laptop")))
            let phone = try api.decode(SignInResponse.self, try await api.call(.signIn, json: user.signInRequest(device: "phone")))
            #expect(laptop.encryption?.wrappedKey == user.setup.wrappedKey)
            let keys = try api.decode(AccountKeysResponse.self, try await api.call(.accountKeys, token: laptop.token, query: [("after", "0")]))
            #expect(keys.generation == 1 && keys.through == 1 && keys.recoveryWrappedKey == user.setup.recoveryWrappedKey)

            let note = try #require(try await api.push(laptop.token, [user.change(1, edit: 10, plaintext: "hello")])[0].serverID)
            let plain = try await api.push(laptop.token, [change(2, edit: 20, text: "hello in the clear")])
            #expect(plain[0].error?.code == .notEncrypted)
            #expect(try await api.push(phone.token, [user.change(1, server: note, edit: 11, plaintext: "phone", baseVersion: 1)])[0].status == .updated)
            let stale = try await api.push(laptop.token, [user.change(1, server: note, edit: 12, plaintext: "laptop", baseVersion: 1)])
            #expect(stale[0].status == .stale && stale[0].version == 2)
            let pulled = try await api.pullAll(laptop.token)
            #expect(pulled.count == 1 && pulled[0].editID == id(11) && pulled[0].version == 2)
            let sessions = try api.decode(SessionListResponse.self, try await api.call(.sessions, token: phone.token))
            #expect(Set(sessions.sessions.compactMap(\.publicKey)) == [user.device.publicKey.text])
        } }
    }
}
