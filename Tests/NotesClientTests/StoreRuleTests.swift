import Foundation
import GRDB
import MiniFlake
import Testing

@testable import NotesClient

/// The store's set-based statements select exactly the notes the planners' rules select.
@Suite("Store runs the planners' rules")
struct StoreRuleTests {
    /// Inserts one note per state; returns the local ID of each.
    func insert(
        _ states: [(isDirty: Bool, isDeleted: Bool, baseText: String?, hasServerID: Bool, hasSnapshot: Bool, hasPushError: Bool, text: String)],
        into store: LocalStore
    ) throws -> [Int64] {
        try store.write { tx in
            try states.enumerated().map { index, state in
                let key = Int64(index + 1)
                try tx.db.execute(
                    sql: """
                        INSERT INTO notes (client_id, origin, server_id, text, deleted, base_text, revision, dirty, push_error,
                        created_at, updated_at) VALUES (?, 1, ?, ?, ?, ?, 1, ?, ?, 0, 0)
                        """,
                    arguments: [
                        key, state.hasServerID ? key : nil, state.text, state.isDeleted, state.baseText, state.isDirty,
                        state.hasPushError ? "note_too_large" : nil,
                    ])
                let id = tx.db.lastInsertedRowID
                if state.hasSnapshot {
                    try tx.db.execute(
                        sql: "INSERT INTO outbox (note_id, edit_id, text, deleted, revision) VALUES (?, ?, ?, ?, 1)",
                        arguments: [id, 1_000 + key, state.text, state.isDeleted])
                }
                return id
            }
        }
    }

    @Test func theOutboxStatementsFollowTheOutboxPlanner() throws {
        let store = try LocalStore.inMemory()
        let states = OutboxPlannerTests.allStates
        let ids = try insert(
            states.map {
                (
                    $0.isDirty, $0.isDeleted, $0.hasBaseText ? "text" : nil, $0.hasServerID, $0.hasSnapshot, $0.hasPushError,
                    "text"
                )
            }, into: store)
        let (dirty, snapshotted, pending) = try store.write { tx in
            try tx.applyRequeues()
            try tx.applySettles()
            let snapshotted = try tx.notesNeedingSnapshot().map(\.id)
            return (Set(try Int64.fetchAll(tx.db, sql: "SELECT id FROM notes WHERE dirty")), snapshotted, try tx.pendingCount())
        }
        var expectedPending = 0
        for (id, state) in zip(ids, states) {
            let expected = OutboxPlanner.prepare(state)
            #expect(dirty.contains(id) == expected.isDirty, "\(state)")
            #expect(snapshotted.contains(id) == expected.needsSnapshot, "\(state)")
            var after = state
            after.isDirty = expected.isDirty
            if OutboxPlanner.isPending(after) { expectedPending += 1 }
        }
        #expect(snapshotted == snapshotted.sorted(), "ascending local ID: the order edit IDs are minted in")
        #expect(pending == expectedPending)
    }

    /// The statement a sync starts with clears the refusals ``OutboxPlanner/retriesAtEverySync(_:)`` retries, on the
    /// notes on show only, and no other.
    @Test func theRetryStatementFollowsTheOutboxPlanner() throws {
        let store = try LocalStore.inMemory()
        let codes: [String?] = [nil, "quota_exceeded", "note_too_large", "body_too_large", "rejected", "invalid_text"]
        var expected: [Int64: String?] = [:]
        try store.write { tx in
            for (index, code) in codes.enumerated() {
                for aside in [false, true] {
                    try tx.db.execute(
                        sql: """
                            INSERT INTO notes (client_id, origin, text, revision, dirty, push_error, push_error_message, aside,
                            created_at, updated_at) VALUES (?, ?, 'text', 1, 1, ?, ?, ?, 0, 0)
                            """,
                        arguments: [index + 1, aside ? 2 : 1, code, code.map { "refused: \($0)" }, aside])
                    let retried = !aside && code.map(OutboxPlanner.retriesAtEverySync) == true
                    expected[tx.db.lastInsertedRowID] = retried ? nil : code
                }
            }
        }
        let retried = try store.write { tx in try tx.applyRetriesAtEverySync() }
        #expect(retried == 1)
        let rows = try store.read { tx in try Row.fetchAll(tx.db, sql: "SELECT id, push_error, push_error_message FROM notes") }
        for row in rows {
            let id: Int64 = row[0]
            let code: String? = row[1]
            #expect(code == expected[id]!, "note \(id)")
            #expect((row[2] as String?) == code.map { "refused: \($0)" }, "note \(id): the message goes with its code")
        }
    }

    @Test func theSignInQueueReadsEachNoteAsThePlannerSeesIt() throws {
        let store = try LocalStore.inMemory()
        var rows: [(isDirty: Bool, isDeleted: Bool, baseText: String?, hasServerID: Bool, hasSnapshot: Bool, hasPushError: Bool, text: String)] = []
        var expected: [SignInPlanner.NoteState] = []
        for bits in 0..<64 {
            let base: String? = bits & 4 == 0 ? nil : (bits & 16 == 0 ? "text" : "older text")
            if base == nil && bits & 16 == 0 { continue }  // no base: the text always differs from it
            rows.append((bits & 1 != 0, bits & 2 != 0, base, bits & 8 != 0, bits & 32 != 0, false, "text"))
            expected.append(
                SignInPlanner.NoteState(
                    isDirty: bits & 1 != 0, isDeleted: bits & 2 != 0, hasBaseText: base != nil, hasServerID: bits & 8 != 0,
                    differsFromBase: base != "text", hasSnapshot: bits & 32 != 0))
        }
        // Canonically equivalent to its base but not the same bytes: the account may not have this text.
        rows.append((false, false, "e\u{301}", false, false, false, "\u{e9}"))
        expected.append(
            SignInPlanner.NoteState(
                isDirty: false, isDeleted: false, hasBaseText: true, hasServerID: false, differsFromBase: true, hasSnapshot: false))
        var ids = try insert(rows, into: store)
        // The text is its base, but a tag or a flag is not (issue 31): the account may not have it either.
        for (column, value) in [("tags", "'work'"), ("pinned", "1"), ("archived", "1")] {
            ids += try insert([(false, false, "text", true, false, false, "text")], into: store)
            try store.write { tx in try tx.db.execute(sql: "UPDATE notes SET \(column) = \(value) WHERE id = ?", arguments: [ids.last!]) }
            expected.append(
                SignInPlanner.NoteState(
                    isDirty: false, isDeleted: false, hasBaseText: true, hasServerID: true, differsFromBase: true, hasSnapshot: false))
        }
        rows += Array(repeating: (false, false, "text", true, false, false, "text"), count: 3)

        let read = try store.read { tx in try tx.signInQueueStates() }
        #expect(read.map(\.id) == ids)
        #expect(read.map(\.state) == expected)

        // The rule decided per note selects what one statement over the same rows selects.
        let reference = try store.read { tx in
            try Int64.fetchAll(
                tx.db,
                sql: """
                    SELECT id FROM notes
                    WHERE NOT (deleted AND base_text IS NULL AND server_id IS NULL AND id NOT IN (SELECT note_id FROM outbox))
                    AND (dirty OR deleted OR base_text IS NULL OR text IS NOT base_text OR tags IS NOT base_tags
                        OR pinned IS NOT base_pinned OR archived IS NOT base_archived OR id IN (SELECT note_id FROM outbox))
                    ORDER BY id
                    """)
        }
        #expect(read.filter { SignInPlanner.queues($0.state) }.map(\.id) == reference)

        try store.write { tx in try tx.queueForPush(reference) }
        let queued = try store.read { tx in
            try Int64.fetchAll(tx.db, sql: "SELECT id FROM notes WHERE dirty AND push_error IS NULL ORDER BY id")
        }
        let dirtyBefore = zip(ids, rows).filter { $0.1.isDirty }.map(\.0)
        #expect(Set(queued) == Set(reference).union(dirtyBefore))
    }
}
