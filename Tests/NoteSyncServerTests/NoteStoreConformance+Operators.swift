import Foundation
import GRDB
import MiniFlake
import NoteSyncProtocol
import PostgresNIO
import Testing
import TestSupport

@testable import NoteSyncServer

/// The operator methods (``OperatorStore``), checked on every store by the conformance suite.
extension NoteStoreConformance {
    static func operatorStore(_ store: any NoteStore) throws -> any OperatorStore {
        try #require(store as? any OperatorStore, "\(type(of: store)) is not an OperatorStore")
    }

    /// Runs raw SQL on either store, to break what the store itself never would.
    static func corrupt(_ store: any NoteStore, _ sql: String) async throws {
        if let sqlite = store as? SQLiteNoteStore {
            try await sqlite.write { db in try db.execute(sql: sql) }
        } else if let postgres = store as? PostgresNoteStore {
            let logger = postgres.logger
            try await postgres.run { client in try await client.execute(PostgresQuery(unsafeSQL: sql), logger: logger) }
        } else {
            Issue.record("no raw SQL for \(type(of: store))")
        }
    }

    static func session(_ store: any NoteStore, _ account: FlakeID, _ hash: String) async throws {
        try await store.createSession(
            SessionRecord(id: minter.mint(), accountID: account, tokenHash: hash, deviceName: nil, origin: nil, createdAt: 1))
    }

    static let operatorChecks: [Check] = [
        Check(name: "operators: disable and enable") { store in
            let operators = try operatorStore(store)
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            try await session(store, alice, "a1")
            try await session(store, bob, "b1")
            #expect(try await operators.setDisabled(accountID: alice, disabledAt: 100))
            #expect(try await store.account(byUsername: "alice")?.disabledAt == 100)
            #expect(try await store.session(byTokenHash: "a1") == nil)
            #expect(try await store.session(byTokenHash: "b1") != nil)
            // Disabling again keeps the first time; a session made while disabled does not authenticate.
            #expect(try await operators.setDisabled(accountID: alice, disabledAt: 200))
            #expect(try await store.account(byID: alice)?.disabledAt == 100)
            try await session(store, alice, "a2")
            #expect(try await store.session(byTokenHash: "a2") == nil)
            #expect(try await operators.setDisabled(accountID: alice, disabledAt: nil))
            #expect(try await store.account(byID: alice)?.disabledAt == nil)
            #expect(try await store.session(byTokenHash: "a2")?.accountID == alice)
            #expect(try await store.account(byID: bob)?.disabledAt == nil)
            #expect(try await operators.setDisabled(accountID: id(424242), disabledAt: 1) == false)
        },
        Check(name: "operators: reset password and delete sessions") { store in
            let operators = try operatorStore(store)
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            try await session(store, alice, "a1")
            try await session(store, alice, "a2")
            try await session(store, bob, "b1")
            #expect(try await operators.resetPassword(accountID: alice, passwordHash: "new-hash"))
            #expect(try await store.account(byID: alice)?.passwordHash == "new-hash")
            #expect(try await store.session(byTokenHash: "a1") == nil)
            #expect(try await store.session(byTokenHash: "a2") == nil)
            #expect(try await store.session(byTokenHash: "b1") != nil)
            #expect(try await store.account(byID: bob)?.passwordHash == "$2b$04$hash")
            #expect(try await operators.resetPassword(accountID: id(424242), passwordHash: "x") == false)
            try await session(store, bob, "b2")
            #expect(try await store.deleteSessions(accountID: bob, except: nil) == 2)
            #expect(try await store.session(byTokenHash: "b2") == nil)
            #expect(try await store.deleteSessions(accountID: bob, except: nil) == 0)
        },
        Check(name: "operators: summaries and statistics") { store in
            let operators = try operatorStore(store)
            let alice = try await makeAccount(store, "alice")
            let bob = try await makeAccount(store, "bob")
            try await session(store, alice, "a1")
            let results = try await store.push(
                accountID: alice, changes: [change(1, edit: 1, text: "héllo\n"), change(2, edit: 2, text: "b\n")], context: context())
            _ = try await store.push(
                accountID: alice, changes: [change(2, server: results[1].serverID, edit: 3, text: "", deleted: true, baseVersion: 1)],
                context: context())
            _ = try await operators.setDisabled(accountID: bob, disabledAt: 5)
            let summaries = try await operators.accountSummaries()
            #expect(summaries.map(\.username) == ["alice", "bob"])
            #expect(summaries[0] == AccountSummary(id: alice, username: "alice", createdAt: testEpoch, disabledAt: nil, notes: 1, sessions: 1))
            #expect(summaries[1] == AccountSummary(id: bob, username: "bob", createdAt: testEpoch, disabledAt: 5, notes: 0, sessions: 0))
            let statistics = try await operators.statistics()
            #expect(statistics.accounts == 2)
            #expect(statistics.disabledAccounts == 1)
            #expect(statistics.sessions == 1)
            #expect(statistics.notes == 1)
            #expect(statistics.tombstones == 1)
            #expect(statistics.textBytes == Int64("héllo\n".utf8.count))
            #expect(statistics.appliedEdits == 3)
            #expect(statistics.databaseBytes > 0)
        },
        Check(name: "operators: check") { store in
            let operators = try operatorStore(store)
            let alice = try await makeAccount(store, "alice")
            try await session(store, alice, "a1")
            let results = try await store.push(
                accountID: alice, changes: (1...3).map { change($0, edit: 10 + $0, text: "n\($0) é\n") }, context: context())
            // The quota's running totals count UTF-8 bytes, as the check does (é is two).
            #expect(try await operators.checkInvariants() == [])
            let first = try #require(results[0].serverID).rawValue
            let second = try #require(results[1].serverID).rawValue
            try await corrupt(store, "UPDATE notes SET change_seq = 99 WHERE server_id = \(first)")
            try await corrupt(store, "UPDATE notes SET client_id = -5 WHERE server_id = \(second)")
            try await corrupt(store, "UPDATE notes SET conflict_of = 424242 WHERE server_id = \(second)")
            let problems = try await operators.checkInvariants()
            #expect(problems.contains { $0.hasPrefix("change sequence out of range: note \(first) ") }, "\(problems)")
            #expect(problems.contains { $0.hasPrefix("bad note IDs: note \(second):") }, "\(problems)")
            #expect(problems.contains { $0.hasPrefix("dangling conflict link: note \(second) ") }, "\(problems)")
            #expect(problems.count == 3, "\(problems)")
            try await corrupt(store, "UPDATE accounts SET text_bytes = text_bytes + 1 WHERE id = \(alice.rawValue)")
            let totals = try await operators.checkInvariants()
            #expect(totals.contains { $0.hasPrefix("running totals: account \(alice): 3 notes and 19 text bytes counted, 3 and 18 stored") }, "\(totals)")
        },
    ]
}
