import Logging
import PostgresNIO

/// The sign-in throttle of daemons sharing one PostgreSQL database: every attempt is a row of `sign_in_attempts`, so
/// every daemon counts the same failures (``SignInThrottle`` is the in-memory one of a single SQLite daemon).
///
/// ``begin(username:now:)`` runs in one transaction holding a transaction-level advisory lock on the username: it
/// deletes rows that aged out of the window, counts the rest and, below the limit, inserts a row for this attempt (an
/// attempt in progress counts as a failure, so concurrent guesses on several daemons cannot slip past the limit). A
/// failed attempt leaves its row; a success deletes the username's rows, or only one of them when it keeps the
/// failures (``AttemptOutcome/successKeepingFailures``). A daemon that dies mid-attempt leaves the row as a failure,
/// which ages out with the window.
public struct PostgresSignInThrottle: SignInThrottling {
    let database: PostgresDatabase
    public let maxFailures: Int
    /// The window, in milliseconds.
    public let windowMilliseconds: Int64

    public init(database: PostgresDatabase, maxFailures: Int = 5, windowMilliseconds: Int64 = 15 * 60 * 1000) {
        self.database = database
        self.maxFailures = maxFailures
        self.windowMilliseconds = windowMilliseconds
    }

    public func begin(username: String, now: Int64) async throws -> Int? {
        let cutoff = now - windowMilliseconds
        let logger = database.logger
        return try await database.transaction { connection in
            try await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.notesyncd.sign-in'), hashtext(\(username)))",
                logger: logger
            )
            // Rows that aged out, of this username and (bounded) of any other, so the table never outgrows the window.
            try await connection.execute(
                """
                DELETE FROM sign_in_attempts WHERE ctid IN (
                    SELECT ctid FROM sign_in_attempts WHERE attempted_at <= \(cutoff) LIMIT 100)
                """,
                logger: logger
            )
            var attempts: [Int64] = []
            for try await time in try await connection.query(
                """
                SELECT attempted_at FROM sign_in_attempts
                WHERE username = \(username) AND attempted_at > \(cutoff) ORDER BY attempted_at
                """,
                logger: logger
            ).decode(Int64.self) {
                attempts.append(time)
            }
            if attempts.count >= maxFailures {
                // When enough attempts age out to allow one more (at least one second away).
                let wait = attempts[attempts.count - maxFailures] + windowMilliseconds - now
                return max(1, Int((wait + 999) / 1000))
            }
            try await connection.execute(
                "INSERT INTO sign_in_attempts (username, attempted_at) VALUES (\(username), \(now))", logger: logger
            )
            return nil
        }
    }

    public func finish(username: String, outcome: AttemptOutcome, now: Int64) async throws {
        switch outcome {
        case .failure:
            return
        case .success:
            try await database.run { client in
                try await client.execute("DELETE FROM sign_in_attempts WHERE username = \(username)", logger: database.logger)
            }
        case .successKeepingFailures:
            // The attempt's own row goes; any one of the username's rows does, as only their number counts (the newest:
            // the failures before it keep their times, and with them the wait they impose).
            try await database.run { client in
                try await client.execute(
                    """
                    DELETE FROM sign_in_attempts WHERE ctid = (
                        SELECT ctid FROM sign_in_attempts WHERE username = \(username) ORDER BY attempted_at DESC LIMIT 1)
                    """,
                    logger: database.logger)
            }
        }
    }
}
