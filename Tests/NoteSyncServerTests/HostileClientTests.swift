import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// Clients that try to reach other accounts' data, forge tokens or send garbage. Each gets its documented 4xx and
/// nothing stored changes (full pulls before and after are equal).
@Suite("Hostile clients")
struct HostileClientTests {
    /// Two accounts with a few notes each.
    struct World {
        let server: TestServer
        let api: APIClient
        let alice: SignInResponse
        let bob: SignInResponse
        let alicesNotes: [ChangeResult]

        static func make(limits: SyncLimits = SyncLimits(maxBodyBytes: 64 << 10, maxNoteBytes: 1024, maxBatchChanges: 10)) async throws -> World {
            let server = try TestServer.make(limits: limits)
            let api = server.client
            let alice = try await api.account("alice")
            let bob = try await api.account("bob")
            let alicesNotes = try await api.push(alice.token, (1...3).map { change($0, origin: 11, edit: $0, text: "alice \($0)\n") })
            _ = try await api.push(bob.token, [change(1, origin: 22, edit: 1, text: "bob 1\n")])
            return World(server: server, api: api, alice: alice, bob: bob, alicesNotes: alicesNotes)
        }

        /// Both accounts' full pulls.
        func snapshot() async throws -> [[NoteRecord]] {
            [try await api.pullAll(alice.token), try await api.pullAll(bob.token)]
        }
    }

    @Test func anotherAccountsServerIDsAreUnknownNotes() async throws {
        let world = try await World.make()
        let before = try await world.snapshot()
        let target = world.alicesNotes[0].serverID!
        let results = try await world.api.push(world.bob.token, [
            change(1, origin: 11, server: target, edit: 50, text: "overwrite\n", baseVersion: 1, baseText: "alice 1\n"),
            change(1, origin: 11, server: target, edit: 51, text: "", deleted: true, baseVersion: 1),
            change(1, origin: 11, server: id(123_456_789), edit: 52, text: "guess\n", baseVersion: 1),
        ])
        #expect(results.map(\.status) == [.rejected, .rejected, .rejected])
        #expect(results.map { $0.error?.code } == [.unknownNote, .unknownNote, .unknownNote])
        // The same answer whether or not the note exists elsewhere (no existence leak), apart from the ID itself.
        let messages = results.map { $0.error!.message.replacingOccurrences(of: "\(target)", with: "N").replacingOccurrences(of: "123456789", with: "N") }
        #expect(Set(messages).count == 1)
        #expect(try await world.snapshot() == before)
    }

    @Test func anotherAccountsClientIDsCreateInTheCallersAccount() async throws {
        let world = try await World.make()
        let alicesBefore = try await world.api.pullAll(world.alice.token)
        // Bob pushes Alice's (clientID, origin) keys without server IDs: he gets his own notes.
        let results = try await world.api.push(world.bob.token, (1...3).map {
            change($0, origin: 11, edit: 100 + $0, text: "bob's copy \($0)\n", baseText: "alice \($0)\n")
        })
        #expect(results.allSatisfy { $0.status == .created })
        #expect(Set(results.compactMap(\.serverID)).isDisjoint(with: world.alicesNotes.compactMap(\.serverID)))
        #expect(try await world.api.pullAll(world.alice.token) == alicesBefore)
        #expect(try await world.api.pullAll(world.bob.token).count == 4)
        // Alice's edit IDs replayed by Bob are not Alice's outcomes.
        let replays = try await world.api.push(world.bob.token, [change(7, origin: 33, edit: 2, text: "x\n")])
        #expect(replays[0].replayed == false)
    }

    @Test func forgedMalformedAndRevokedTokens() async throws {
        let world = try await World.make()
        let before = try await world.snapshot()
        let revoked = try await world.api.signIn("alice")
        #expect(try await world.api.call(.signOut, token: revoked.token).status == 204)
        let forged = SessionToken.prefix + String(repeating: "A", count: 43)
        let tokens = [
            forged, revoked.token, "", "fn_", "not-a-token", world.alice.token + "x", String(world.alice.token.dropLast()) + "!",
            SessionToken.hash(world.alice.token),
        ]
        for token in tokens {
            for endpoint in Endpoint.allCases where endpoint.requiresAuthentication {
                let response = try await world.api.call(endpoint, token: token, json: PushRequest(changes: [change(1, edit: 999, text: "x\n")]))
                #expect(response.status == 401, "\(endpoint) with \(token)")
                #expect(response.errorCode == .unauthorized)
            }
        }
        #expect(try await world.snapshot() == before)
    }

    @Test func malformedBodies() async throws {
        let world = try await World.make()
        let before = try await world.snapshot()
        let token = world.alice.token
        let cases: [(String, APIErrorCode)] = [
            ("", .invalidJSON),
            ("null", .invalidJSON),
            ("[]", .invalidJSON),
            (#"{"changes":"#, .invalidJSON),
            (#"{"changes":{}}"#, .invalidJSON),
            (#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":7}]}"#, .invalidJSON),
            (#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","deleted":"yes"}]}"#, .invalidJSON),
            (#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","baseVersion":"1"}]}"#, .invalidJSON),
            (#"{"changes":[{"clientID":"1","origin":"11","editID":"5"}]}"#, .invalidJSON),
            (#"{"changes":[{"clientID":1e30,"origin":"11","editID":"5","text":"x"}]}"#, .invalidID),
            (#"{"changes":[{"clientID":"18446744073709551616","origin":"11","editID":"5","text":"x"}]}"#, .invalidID),
            (#"{"changes":[{"clientID":"0","origin":"11","editID":"5","text":"x"}]}"#, .invalidID),
            (#"{"changes":[{"clientID":"-3","origin":"11","editID":"5","text":"x"}]}"#, .invalidID),
            (#"{"changes":[{"clientID":"1","origin":"11","editID":"abc","text":"x"}]}"#, .invalidID),
            (#"{"changes":[{"clientID":"1","origin":"11","serverID":"","editID":"5","text":"x"}]}"#, .invalidID),
            (#"{"changes":[{"clientID":"1","origin":"11","serverID":true,"editID":"5","text":"x"}]}"#, .invalidID),
            (#"{"changes":[{"clientID":"1","origin":"11","editID":"5","text":"x","owner":"bob"}]}"#, .unknownField),
            (#"{"changes":[],"accountID":"2"}"#, .unknownField),
        ]
        for (body, code) in cases {
            let response = try await world.api.call(.push, token: token, rawJSON: body)
            #expect(response.status == 400, "\(body)")
            #expect(response.errorCode == code, "\(body): \(response.text)")
        }
        #expect(try await world.snapshot() == before)
    }

    @Test func oversizedBodyNoteAndBatch() async throws {
        let world = try await World.make()
        let before = try await world.snapshot()
        let token = world.alice.token
        let body = try await world.api.call(.push, token: token, json: PushRequest(changes: [change(9, edit: 900, text: String(repeating: "z", count: 70_000))]))
        #expect(body.status == 413)
        #expect(body.errorCode == .bodyTooLarge)
        let batch = try await world.api.call(.push, token: token, json: PushRequest(changes: (1...11).map { change(Int64(50 + $0), edit: Int64(950 + $0), text: "x\n") }))
        #expect(batch.status == 413)
        #expect(batch.errorCode == .batchTooLarge)
        let note = try await world.api.push(token, [change(9, edit: 901, text: String(repeating: "z", count: 1025))])
        #expect(note[0].status == .rejected)
        #expect(note[0].error?.code == .noteTooLarge)
        #expect(try await world.snapshot() == before)
    }

    @Test func cursorFromAnotherAccount() async throws {
        let world = try await World.make()
        let before = try await world.snapshot()
        let alicesCursor = try await world.api.pull(world.alice.token).cursor  // c3: beyond Bob's c1
        let response = try await world.api.call(.pull, token: world.bob.token, query: [(PullQuery.since, alicesCursor.text)])
        #expect(response.status == 400)
        #expect(response.errorCode == .invalidCursor)
        #expect(try await world.snapshot() == before)
    }

    @Test func clientIDMismatchOnOwnNote() async throws {
        let world = try await World.make()
        let before = try await world.snapshot()
        let results = try await world.api.push(world.alice.token, [
            change(2, origin: 11, server: world.alicesNotes[0].serverID, edit: 70, text: "swap\n", baseVersion: 1),
        ])
        #expect(results[0].error?.code == .clientIDMismatch)
        #expect(try await world.snapshot() == before)
    }
}
