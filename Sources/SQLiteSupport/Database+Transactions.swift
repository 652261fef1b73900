import GRDB

extension Database {
    /// Runs `body` in a transaction of the given kind and commits it, or rolls it back if `body` throws.
    ///
    /// GRDB's `inTransaction` (and so `DatabaseWriter.write`) compiles `BEGIN` and `COMMIT` anew for every transaction,
    /// through its authorizer; this runs them as cached statements (Docs/PERFORMANCE.md has the measurement). Call it
    /// where GRDB would start the transaction (in `writeWithoutTransaction`), never inside another transaction.
    ///
    /// - Throws: What `body` throws (after the rollback), or `SQLITE_ABORT` when SQLite rolled the transaction back on
    ///   its own during `body` (after some I/O, memory or busy errors) and `body` went on anyway.
    public func transaction<T>(_ kind: TransactionKind, _ body: () throws -> T) throws -> T {
        try cachedStatement(sql: kind == .deferred ? "BEGIN DEFERRED TRANSACTION" : kind == .immediate ? "BEGIN IMMEDIATE TRANSACTION" : "BEGIN EXCLUSIVE TRANSACTION")
            .execute()
        do {
            let result = try body()
            guard isInsideTransaction else {
                throw DatabaseError(resultCode: .SQLITE_ABORT, message: "Transaction was aborted")
            }
            try cachedStatement(sql: "COMMIT TRANSACTION").execute()
            return result
        } catch {
            if isInsideTransaction { try? cachedStatement(sql: "ROLLBACK TRANSACTION").execute() }
            throw error
        }
    }
}

extension DatabaseWriter {
    /// A deferred transaction: a consistent snapshot that takes no write lock until it writes.
    ///
    /// Use it for reads on a `DatabaseQueue` instead of GRDB's `read`: on a queue, `read` runs in read-only mode by
    /// setting and clearing `PRAGMA query_only`, and SQLite expires every prepared statement of the connection after
    /// a flag pragma, so every cached statement would compile again after each read. (A `DatabasePool` reads on its
    /// own read-only connections and has no such cost.) Blocks the calling thread.
    public func deferredTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try writeWithoutTransaction { db in try db.transaction(.deferred) { try body(db) } }
    }

    /// An immediate (write-locking) transaction, as GRDB's `write`, with cached `BEGIN` and `COMMIT`. Blocks the
    /// calling thread.
    public func immediateTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try writeWithoutTransaction { db in try db.transaction(.immediate) { try body(db) } }
    }
}
