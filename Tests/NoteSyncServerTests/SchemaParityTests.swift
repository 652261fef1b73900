import Foundation
import GRDB
import PostgresNIO
import Testing

@testable import NoteSyncServer

/// The SQLite and PostgreSQL schemas are written by hand, once per backend; this reads both back from the databases'
/// catalogs and checks that they describe the same tables, columns, nullability, primary keys, indexes and foreign
/// keys.
@Suite("Schema parity", .enabled(if: TestPostgres.isAvailable, "FLAKENOTES_POSTGRES_URL is not set"))
struct SchemaParityTests {
    /// Tables only one backend has: each keeps its own migration bookkeeping, instance leases exist only where
    /// several daemons share a database, and PostgreSQL keeps chunk bytes in a table (SQLite in files).
    static let sqliteOnlyTables: Set<String> = ["grdb_migrations"]
    static let postgresOnlyTables: Set<String> = ["instance_leases", "notesyncd_migrations", "sign_in_attempts", "chunk_data"]

    @Test func sqliteAndPostgresDescribeTheSameSchema() async throws {
        var sqlite = try Self.sqliteSchema()
        let store = try await TestPostgres.store()
        let postgres: [String: Table]
        do {
            postgres = try await Self.postgresSchema(store.database.client)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()

        #expect(Set(sqlite.keys).subtracting(postgres.keys) == Self.sqliteOnlyTables)
        #expect(Set(postgres.keys).subtracting(sqlite.keys) == Self.postgresOnlyTables)

        // The one deliberate difference: SQLite stores the empty text as NULL (GRDB binds an empty blob as NULL), so
        // its `notes.text` is nullable; PostgreSQL stores an empty `bytea`.
        let text = try #require(sqlite["notes"]?.columns.firstIndex { $0.name == "text" })
        #expect(sqlite["notes"]?.columns[text].notNull == false)
        sqlite["notes"]?.columns[text].notNull = true

        for table in Set(sqlite.keys).intersection(postgres.keys).sorted() {
            #expect(sqlite[table] == postgres[table], "table \(table)")
        }
        // The comparison saw what matters (a catalog query that read nothing would compare equal).
        #expect(sqlite["applied_edits"]?.primaryKey == ["account_id", "edit_id", "client_id", "origin", "pusher"])
        #expect(sqlite["notes"]?.indexes.count == 4)
        #expect(sqlite["sessions"]?.foreignKeys == [ForeignKey(column: "account_id", table: "accounts", referenced: "id", onDelete: "CASCADE")])
    }

    // MARK: - Shapes

    struct Column: Equatable, CustomStringConvertible {
        var name: String
        /// `integer` (SQLite INTEGER; PostgreSQL BIGINT, INTEGER and BOOLEAN, which SQLite stores as INTEGER), `text`,
        /// `bytes` (BLOB, BYTEA), else the type as the catalog names it.
        var type: String
        /// Primary-key columns count as NOT NULL (SQLite's catalog reports an INTEGER PRIMARY KEY as nullable).
        var notNull: Bool
        var description: String { "\(name) \(type)\(notNull ? " NOT NULL" : "")" }
    }

    struct Index: Hashable, CustomStringConvertible {
        /// The name of an index made by `CREATE INDEX`; nil for one a UNIQUE constraint made (its name is the
        /// backend's own).
        var name: String?
        var unique: Bool
        var columns: [String]
        /// A partial index (`WHERE ...`; the two backends spell the predicate each their own way).
        var partial = false
        var description: String {
            "\(unique ? "UNIQUE " : "")\(name ?? "<constraint>")(\(columns.joined(separator: ", ")))\(partial ? " WHERE ..." : "")"
        }
    }

    struct ForeignKey: Hashable {
        var column: String
        var table: String
        var referenced: String
        var onDelete: String
    }

    struct Table: Equatable {
        /// In declaration order.
        var columns: [Column] = []
        var primaryKey: [String] = []
        /// Every index but the primary key's.
        var indexes: Set<Index> = []
        var foreignKeys: Set<ForeignKey> = []
    }

    static func normalized(_ type: String) -> String {
        switch type.lowercased() {
        case "integer", "bigint", "boolean": "integer"
        case "text": "text"
        case "blob", "bytea": "bytes"
        default: type.lowercased()
        }
    }

    // MARK: - SQLite

    /// The schema of a freshly migrated on-disk SQLite store, from `sqlite_master` and the table pragmas.
    static func sqliteSchema() throws -> [String: Table] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notesyncd-schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(SQLiteNoteStore.fileName).path
        _ = try SQLiteNoteStore(path: path)
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in
            var tables: [String: Table] = [:]
            let names = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            for name in names {
                let columnRows = try Row.fetchAll(db, sql: #"SELECT name, type, "notnull", pk FROM pragma_table_info(?) ORDER BY cid"#, arguments: [name])
                let columns = columnRows.map { row in
                    Column(name: row[0], type: normalized(row[1]), notNull: (row[2] as Int) != 0 || (row[3] as Int) > 0)
                }
                let primaryKey = columnRows.filter { ($0[3] as Int) > 0 }.sorted { ($0[3] as Int) < ($1[3] as Int) }.map { $0[0] as String }
                var indexes = Set<Index>()
                for index in try Row.fetchAll(db, sql: #"SELECT name, "unique", origin, partial FROM pragma_index_list(?)"#, arguments: [name]) {
                    let origin: String = index[2]
                    if origin == "pk" { continue }
                    let indexName: String = index[0]
                    let indexColumns = try String.fetchAll(db, sql: "SELECT name FROM pragma_index_info(?) ORDER BY seqno", arguments: [indexName])
                    indexes.insert(
                        Index(
                            name: origin == "c" ? indexName : nil, unique: (index[1] as Int) != 0, columns: indexColumns,
                            partial: (index[3] as Int) != 0))
                }
                let foreignKeys = try Row.fetchAll(db, sql: #"SELECT "from", "table", "to", on_delete FROM pragma_foreign_key_list(?)"#, arguments: [name])
                    .map { ForeignKey(column: $0[0], table: $0[1], referenced: $0[2], onDelete: $0[3]) }
                tables[name] = Table(columns: columns, primaryKey: primaryKey, indexes: indexes, foreignKeys: Set(foreignKeys))
            }
            return tables
        }
    }

    // MARK: - PostgreSQL

    /// The schema `client` sees as its current one, from `information_schema` and `pg_indexes`.
    static func postgresSchema(_ client: PostgresClient) async throws -> [String: Table] {
        let logger = TestPostgres.logger

        var tables: [String: Table] = [:]
        for try await (table, column, type, nullable) in try await client.query(
            """
            SELECT table_name::text, column_name::text, data_type::text, is_nullable::text
            FROM information_schema.columns WHERE table_schema = current_schema()
            ORDER BY table_name, ordinal_position
            """,
            logger: logger
        ).decode((String, String, String, String).self) {
            tables[table, default: Table()].columns.append(
                Column(name: column, type: normalized(type), notNull: nullable == "NO")
            )
        }
        for try await (table, column) in try await client.query(
            """
            SELECT k.table_name::text, k.column_name::text
            FROM information_schema.table_constraints c
            JOIN information_schema.key_column_usage k
              ON k.constraint_schema = c.constraint_schema AND k.constraint_name = c.constraint_name
            WHERE c.table_schema = current_schema() AND c.constraint_type = 'PRIMARY KEY'
            ORDER BY k.table_name, k.ordinal_position
            """,
            logger: logger
        ).decode((String, String).self) {
            tables[table]?.primaryKey.append(column)
        }
        let primaryKeyColumns = tables.mapValues { Set($0.primaryKey) }
        for (table, columns) in primaryKeyColumns {
            for index in tables[table]!.columns.indices where columns.contains(tables[table]!.columns[index].name) {
                tables[table]!.columns[index].notNull = true
            }
        }
        // `indexdef` reads `CREATE [UNIQUE] INDEX name ON schema.table USING btree (a, b)`.
        for try await (table, name, definition, constraint) in try await client.query(
            """
            SELECT i.tablename::text, i.indexname::text, i.indexdef, c.contype::text
            FROM pg_indexes i
            LEFT JOIN pg_constraint c ON c.conname = i.indexname AND c.connamespace = current_schema()::regnamespace
            WHERE i.schemaname = current_schema()
            """,
            logger: logger
        ).decode((String, String, String, String?).self) {
            if constraint == "p" { continue }
            // A partial index ends `... (a) WHERE predicate`.
            let keyPart = definition.range(of: " WHERE ").map { String(definition[..<$0.lowerBound]) } ?? definition
            let open = try #require(keyPart.lastIndex(of: "("))
            let columns = keyPart[keyPart.index(after: open)...].dropLast().split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            tables[table]?.indexes.insert(
                Index(
                    name: constraint == nil ? name : nil, unique: definition.hasPrefix("CREATE UNIQUE"), columns: columns,
                    partial: keyPart != definition)
            )
        }
        for try await (table, column, referencedTable, referenced, onDelete) in try await client.query(
            """
            SELECT k.table_name::text, k.column_name::text, u.table_name::text, u.column_name::text, r.delete_rule::text
            FROM information_schema.referential_constraints r
            JOIN information_schema.key_column_usage k
              ON k.constraint_schema = r.constraint_schema AND k.constraint_name = r.constraint_name
            JOIN information_schema.constraint_column_usage u
              ON u.constraint_schema = r.unique_constraint_schema AND u.constraint_name = r.unique_constraint_name
            WHERE r.constraint_schema = current_schema()
            """,
            logger: logger
        ).decode((String, String, String, String, String).self) {
            tables[table]?.foreignKeys.insert(ForeignKey(column: column, table: referencedTable, referenced: referenced, onDelete: onDelete))
        }
        return tables
    }
}
