import GRDB
import Synchronization

/// What a client's store did (``NotesClient/storeActivity()``): the measure of the budgets the tests hold for a
/// sign-in (issue 30), which does not depend on how busy the machine is.
public struct StoreActivity: Sendable, Equatable {
    /// Statements the client ran (GRDB's trace), the transactions' `BEGIN` and `COMMIT` included.
    public var statements: Int
    /// Statements SQLite ran inside them: a trigger's, or the FTS5 index's own bookkeeping (one per indexed text).
    public var nestedStatements: Int
    /// Pages its connection wrote to the database (its WAL): 4 KiB each.
    public var pagesWritten: Int

    /// What happened between `earlier` and this.
    public func since(_ earlier: StoreActivity) -> StoreActivity {
        StoreActivity(
            statements: statements - earlier.statements, nestedStatements: nestedStatements - earlier.nestedStatements,
            pagesWritten: pagesWritten - earlier.pagesWritten)
    }
}

/// Counts the statements a connection runs, its own and the nested ones (SQLite traces those with their text
/// behind `-- `).
final class StatementCounter: Sendable {
    let statements = Atomic<Int>(0)
    let nested = Atomic<Int>(0)

    func install(on db: Database) {
        db.trace(options: .statement) { [self] event in
            guard case .statement(let statement) = event else { return }
            if statement.sql.hasPrefix("--") {
                nested.add(1, ordering: .relaxed)
            } else {
                statements.add(1, ordering: .relaxed)
            }
        }
    }
}
