import GRDB

extension Database {
    /// Runs `body` in a transaction of the given kind and commits it, or rolls it back if `body` throws.
    ///
    /// GRDB's `inTransaction` (and so `DatabaseWriter.write`) compiles `BEGIN` and `COMMIT` anew for every transaction,
    /// through its authorizer; this runs them as cached statements, which measured about 4 % of the simulation's time
    /// (Docs/PERFORMANCE.md). Call it where GRDB would start the transaction (in `writeWithoutTransaction`), never
    /// inside another transaction.
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
    /// A deferred transaction: a consistent snapshot that takes no write lock until it writes, like GRDB's `read`
    /// but not in GRDB's read-only mode, whose `PRAGMA query_only` makes SQLite expire every prepared statement of the
    /// connection (each cached statement would compile again after every read). Blocks the calling thread.
    public func deferredTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try writeWithoutTransaction { db in try db.transaction(.deferred) { try body(db) } }
    }

    /// An immediate (write-locking) transaction, as GRDB's `write`, with cached `BEGIN` and `COMMIT`. Blocks the
    /// calling thread.
    public func immediateTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try writeWithoutTransaction { db in try db.transaction(.immediate) { try body(db) } }
    }
}
