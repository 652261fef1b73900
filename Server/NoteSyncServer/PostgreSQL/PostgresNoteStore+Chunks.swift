import Crypto
import MiniFlake
import NIOCore
import NoteSyncProtocol
import PostgresNIO

/// The PostgreSQL store's chunks: rows in `chunks` (the same table as SQLite's), bytes in `chunk_data`, one `bytea`
/// per chunk (at most 1 MiB, stored out of line without compression), so every daemon on the database serves every
/// chunk. See PERFORMANCE.md for why `bytea` rather than large objects.
///
/// A body is received into one buffer (hashed as it arrives, never more than ``ChunkRules/maxChunkBytes``), then
/// stored in one transaction that locks the account row (`FOR UPDATE`, as pushes do: chunk writes and pushes of an
/// account are serialized across daemons, so the byte limit holds), checks that the chunk is not there yet and that
/// the limit allows it, inserts the row and the bytes and raises `chunk_bytes`; the commit is durable
/// (`synchronous_commit = on`) before the 201.
extension PostgresNoteStore: ChunkStore {
    public func missingChunks(accountID: FlakeID, among hashes: [ContentHash], now: Int64) async throws -> [ContentHash] {
        let unique = SQLiteNoteStore.unique(hashes)
        guard !unique.isEmpty else { return [] }
        let hexes = unique.map(\.hex)
        let present = try await run { client in
            var present = Set<String>()
            // One statement: the present ones are referenced again and returned.
            for try await hex in try await client.query(
                """
                UPDATE chunks SET referenced_at = GREATEST(referenced_at, \(now))
                WHERE account_id = \(accountID.rawValue) AND hash = ANY(\(hexes)) RETURNING hash
                """, logger: self.logger
            ).decode(String.self) {
                present.insert(hex)
            }
            return present
        }
        return unique.filter { !present.contains($0.hex) }
    }

    public func chunkSize(accountID: FlakeID, hash: ContentHash) async throws -> Int? {
        try await run { client in
            var size: Int?
            for try await value in try await client.query(
                "SELECT size FROM chunks WHERE account_id = \(accountID.rawValue) AND hash = \(hash.hex)", logger: self.logger
            ).decode(Int64.self) {
                size = Int(value)
            }
            return size
        }
    }

    public func storeChunk(
        accountID: FlakeID, hash: ContentHash, body: some AsyncSequence<ByteBuffer, any Error>, byteLimit: Int64, now: Int64
    ) async throws -> ChunkWrite {
        if let size = try await chunkSize(accountID: accountID, hash: hash) { return .existed(size: size) }
        var bytes = ByteBuffer()
        let size = try await ChunkReceiver.receive(body, expected: hash) { piece in
            var piece = piece
            bytes.writeBuffer(&piece)
        }
        let data = bytes
        let account = accountID.rawValue
        return try await transaction { connection in
            var stored: Int64?
            for try await value in try await connection.query(
                "SELECT \(unescaped: ChunkQueries.storedBytes) FROM accounts WHERE id = \(account) FOR UPDATE", logger: self.logger
            ).decode(Int64.self) {
                stored = value
            }
            guard let stored else { throw NoteStoreError.accountNotFound }
            var existing: Int64?
            for try await value in try await connection.query(
                "SELECT size FROM chunks WHERE account_id = \(account) AND hash = \(hash.hex)", logger: self.logger
            ).decode(Int64.self) {
                existing = value
            }
            if let existing { return .existed(size: Int(existing)) }
            guard stored + Int64(size) <= byteLimit else {
                throw ChunkStoreError.quotaExceeded(wouldStore: stored + Int64(size), limit: byteLimit)
            }
            try await connection.execute(
                """
                INSERT INTO chunks (account_id, hash, size, created_at, referenced_at)
                VALUES (\(account), \(hash.hex), \(Int64(size)), \(now), \(now))
                """, logger: self.logger)
            try await connection.execute(
                "INSERT INTO chunk_data (account_id, hash, data) VALUES (\(account), \(hash.hex), \(data))", logger: self.logger)
            try await connection.execute(
                "UPDATE accounts SET chunk_bytes = chunk_bytes + \(Int64(size)) WHERE id = \(account)", logger: self.logger)
            return .created(size: size)
        }
    }

    public func readChunk(accountID: FlakeID, hash: ContentHash) async throws -> ChunkContent? {
        let found = try await run { client -> ByteBuffer? in
            var data: ByteBuffer?
            for try await value in try await client.query(
                "SELECT data FROM chunk_data WHERE account_id = \(accountID.rawValue) AND hash = \(hash.hex)", logger: self.logger
            ).decode(ByteBuffer.self) {
                data = value
            }
            return data
        }
        guard let found else { return nil }
        return ChunkContent(size: found.readableBytes) { body in try await body(found) }
    }

    public func collectChunks(references: any ChunkReferences, unreferencedSince cutoff: Int64, now: Int64, batch: Int) async throws
        -> CollectedChunks
    {
        var collected = CollectedChunks()
        var after: (Int64, String) = (0, "")
        while true {
            let candidates = try await run { client in
                var rows: [(Int64, String)] = []
                for try await row in try await client.query(
                    """
                    SELECT account_id, hash FROM chunks WHERE referenced_at < \(cutoff) AND (account_id, hash) > (\(after.0), \(after.1))
                    ORDER BY account_id, hash LIMIT \(Int64(batch))
                    """, logger: self.logger
                ).decode((Int64, String).self) {
                    rows.append(row)
                }
                return rows
            }
            guard let last = candidates.last else { break }
            after = last
            for (account, hashes) in Dictionary(grouping: candidates, by: { $0.0 }) {
                let all = hashes.compactMap { ContentHash($0.1) }
                let referenced = try await references.referencedChunks(accountID: try flake(account), among: all)
                let garbage = all.filter { !referenced.contains($0) }.map(\.hex)
                let kept = referenced.map(\.hex)
                let freed = try await transaction { connection -> (Int, Int64) in
                    if !kept.isEmpty {
                        try await connection.execute(
                            "UPDATE chunks SET referenced_at = \(now) WHERE account_id = \(account) AND hash = ANY(\(kept))", logger: self.logger)
                    }
                    guard !garbage.isEmpty else { return (0, 0) }
                    var count = 0
                    var bytes: Int64 = 0
                    // Serialized with the account's pushes and chunk writes (the account row first, as they lock it).
                    try await connection.execute("SELECT 1 FROM accounts WHERE id = \(account) FOR UPDATE", logger: self.logger)
                    for try await size in try await connection.query(
                        """
                        DELETE FROM chunks WHERE account_id = \(account) AND referenced_at < \(cutoff) AND hash = ANY(\(garbage))
                        RETURNING size
                        """, logger: self.logger
                    ).decode(Int64.self) {
                        count += 1
                        bytes += size
                    }
                    try await connection.execute(
                        "UPDATE accounts SET chunk_bytes = chunk_bytes - \(bytes) WHERE id = \(account)", logger: self.logger)
                    return (count, bytes)
                }
                collected.chunks += freed.0
                collected.bytes += freed.1
            }
            if candidates.count < batch { break }
        }
        return collected
    }

    public func referencedChunks(accountID: FlakeID, among hashes: [ContentHash]) async throws -> Set<ContentHash> {
        try await run { client in
            var texts: [String] = []
            var query = PostgresQuery(unsafeSQL: ChunkQueries.accountReferences)
            try query.binds.append(accountID.rawValue, context: .default)
            for try await text in try await client.query(query, logger: self.logger).decode(String.self) { texts.append(text) }
            return ChunkQueries.referenced(hashes, by: texts)
        }
    }

    public func checkChunks(_ verification: ChunkVerification) async throws -> [String] {
        let sample = verification == .all ? "" : "ORDER BY random() LIMIT \(ChunkVerification.sampleSize)"
        return try await run { client in
            var problems: [String] = []
            var references: [(what: String, account: Int64, refs: String)] = []
            for try await (what, account, refs) in try await client.query(PostgresQuery(unsafeSQL: ChunkQueries.allReferences), logger: self.logger)
                .decode((String, Int64, String).self)
            {
                references.append((what, account, refs))
            }
            if !references.isEmpty {
                var stored = Set<String>()
                for try await (account, hash) in try await client.query("SELECT account_id, hash FROM chunks", logger: self.logger)
                    .decode((Int64, String).self)
                {
                    stored.insert("\(account)/\(hash)")
                }
                problems += ChunkQueries.absentChunks(references, stored: stored)
            }
            for try await line in try await client.query(PostgresQuery(unsafeSQL: ChunkQueries.runningTotal), logger: self.logger)
                .decode(String.self)
            {
                problems.append("chunk running total: \(line)")
            }
            for try await line in try await client.query(
                """
                SELECT 'chunk ' || c.hash || ' of account ' || c.account_id || ': '
                       || CASE WHEN d.hash IS NULL THEN 'its bytes are missing'
                               ELSE 'it holds ' || octet_length(d.data) || ' bytes, not ' || c.size END
                FROM chunks c LEFT JOIN chunk_data d ON d.account_id = c.account_id AND d.hash = c.hash
                WHERE d.hash IS NULL OR octet_length(d.data) <> c.size LIMIT 1000
                """, logger: self.logger
            ).decode(String.self) {
                problems.append(line)
            }
            // PostgreSQL hashes the bytes itself: nothing crosses the network but the problems.
            for try await line in try await client.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT 'chunk ' || s.hash || ' of account ' || s.account_id || ': its bytes hash to ' || s.actual
                        FROM (SELECT account_id, hash, encode(sha256(data), 'hex') AS actual FROM chunk_data \(sample)) s
                        WHERE s.actual <> s.hash
                        """), logger: self.logger
            ).decode(String.self) {
                problems.append(line)
            }
            return problems
        }
    }

    public func chunkStatistics() async throws -> ChunkStatistics {
        try await run { client in
            var statistics = ChunkStatistics(chunks: 0, bytes: 0)
            for try await (count, bytes) in try await client.query(
                "SELECT COUNT(*), COALESCE(SUM(size), 0)::BIGINT FROM chunks", logger: self.logger
            ).decode((Int64, Int64).self) {
                statistics = ChunkStatistics(chunks: Int(count), bytes: bytes)
            }
            return statistics
        }
    }
}
