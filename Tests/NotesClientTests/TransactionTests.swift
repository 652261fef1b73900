import GRDB
import SQLiteSupport
import Testing
import TestSupport

/// `Database.transaction`: GRDB's `inTransaction` with cached BEGIN and COMMIT, used by every client transaction and
/// by the in-memory server store.
@Suite struct TransactionTests {
    struct Planned: Error {}

    func makeQueue() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in try db.execute(sql: "CREATE TABLE t (v INTEGER NOT NULL)") }
        return queue
    }

    func values(_ queue: DatabaseQueue) throws -> [Int] {
        try queue.read { db in try Int.fetchAll(db, sql: "SELECT v FROM t ORDER BY v") }
    }

    @Test func commitsAndReturnsWhatTheBodyReturns() throws {
        let queue = try makeQueue()
        for kind in [Database.TransactionKind.deferred, .immediate, .exclusive] {
            let inside = try queue.writeWithoutTransaction { db in
                try db.transaction(kind) {
                    try db.execute(sql: "INSERT INTO t (v) VALUES (1)")
                    return db.isInsideTransaction
                }
            }
            #expect(inside)
        }
        #expect(try values(queue) == [1, 1, 1])
        #expect(try queue.immediateTransaction { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 3)
        #expect(try queue.deferredTransaction { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 3)
    }

    @Test func rollsBackWhenTheBodyThrows() throws {
        let queue = try makeQueue()
        #expect(throws: Planned.self) {
            try queue.immediateTransaction { db in
                try db.execute(sql: "INSERT INTO t (v) VALUES (1)")
                throw Planned()
            }
        }
        #expect(try values(queue) == [])
        // The connection is usable again (no transaction left open) and the cached statements still work.
        try queue.immediateTransaction { db in try db.execute(sql: "INSERT INTO t (v) VALUES (2)") }
        #expect(try values(queue) == [2])
        #expect(try queue.writeWithoutTransaction { db in db.isInsideTransaction } == false)
    }

    @Test func aTransactionEndedInsideTheBodyIsAnError() throws {
        let queue = try makeQueue()
        let error = try #require(throws: DatabaseError.self) {
            try queue.immediateTransaction { db in
                try db.execute(sql: "INSERT INTO t (v) VALUES (1)")
                try db.execute(sql: "ROLLBACK")
            }
        }
        #expect(error.resultCode == .SQLITE_ABORT)
        #expect(try values(queue) == [])
        #expect(try queue.writeWithoutTransaction { db in db.isInsideTransaction } == false)
    }

    @Test func aFailedCommitRollsBack() throws {
        // A deferred foreign key is checked at COMMIT: the commit fails, and nothing of the transaction stays.
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE parent (id INTEGER PRIMARY KEY);
                CREATE TABLE child (parent_id INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
                """)
        }
        #expect(throws: DatabaseError.self) {
            try queue.immediateTransaction { db in try db.execute(sql: "INSERT INTO child (parent_id) VALUES (7)") }
        }
        let (inside, count) = try queue.writeWithoutTransaction { db in
            (db.isInsideTransaction, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM child"))
        }
        #expect(!inside)
        #expect(count == 0)
    }
}
