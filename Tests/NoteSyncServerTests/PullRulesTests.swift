import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// ``PullPlanner`` alone: every decision of a pull from values, no store, no feed, no clock.
@Suite("Pull planner")
struct PullRulesTests {
    static let limits = SyncLimits(maxPageSize: 50, defaultPageSize: 20)
    static let live = LiveLimits(maxWaitSeconds: 55, maxWaitersPerAccount: 4)

    static func query(_ since: String?, _ limit: String?, _ wait: String?) throws(SyncError) -> PullPlanner.Query {
        try PullPlanner.query(since: since, limit: limit, wait: wait, limits: limits, live: live)
    }

    @Test func queriesAreParsedClampedAndDefaulted() throws {
        #expect(try Self.query(nil, nil, nil) == PullPlanner.Query(cursor: .start, pageSize: 20, waitSeconds: 0))
        #expect(try Self.query("c42", "7", "30") == PullPlanner.Query(cursor: SyncCursor(sequence: 42), pageSize: 7, waitSeconds: 30))
        #expect(try Self.query("c0", "51", "56") == PullPlanner.Query(cursor: .start, pageSize: 50, waitSeconds: 55))
        #expect(try Self.query(nil, "99999999999999999999999", "0").pageSize == 50)
    }

    @Test(arguments: [
        ("x42", nil, nil, APIErrorCode.invalidCursor, PullQuery.since), ("c-1", nil, nil, .invalidCursor, PullQuery.since),
        ("c01", nil, nil, .invalidCursor, PullQuery.since), (nil, "0", nil, .invalidLimit, PullQuery.limit),
        (nil, "-3", nil, .invalidLimit, PullQuery.limit), (nil, " 3", nil, .invalidLimit, PullQuery.limit),
        (nil, "", nil, .invalidLimit, PullQuery.limit), (nil, nil, "-1", .invalidWait, PullQuery.wait),
        (nil, nil, "1.5", .invalidWait, PullQuery.wait), (nil, nil, "", .invalidWait, PullQuery.wait),
    ] as [(String?, String?, String?, APIErrorCode, String)])
    func badQueriesAreRefusedNamingTheParameter(since: String?, limit: String?, wait: String?, code: APIErrorCode, field: String) {
        #expect {
            _ = try Self.query(since, limit, wait)
        } throws: { error in
            (error as? SyncError)?.code == code && (error as? SyncError)?.body.field == field
        }
    }

    static func note(_ sequence: Int64) -> StoredNote {
        StoredNote(
            accountID: id(1), serverID: id(sequence << 22), clientID: id(sequence), origin: id(9), version: 1, text: "n\(sequence)",
            deleted: false, conflictOf: nil, changeSeq: sequence, createdAt: testEpoch, updatedAt: testEpoch)
    }

    @Test func aPageEndsAtItsLastNoteAndSaysWhetherMoreFollow() throws {
        let full = try PullPlanner.page(PullPage(notes: [Self.note(3), Self.note(5)], currentSequence: 9), after: SyncCursor(sequence: 2), pageSize: 2)
        #expect(full.changes.map(\.text) == ["n3", "n5"])
        #expect(full.cursor == SyncCursor(sequence: 5))
        #expect(full.hasMore)
        // A full page ending at the account's last change has no more; neither has a short one.
        #expect(try PullPlanner.page(PullPage(notes: [Self.note(3), Self.note(5)], currentSequence: 5), after: .start, pageSize: 2).hasMore == false)
        #expect(try PullPlanner.page(PullPage(notes: [Self.note(3)], currentSequence: 9), after: .start, pageSize: 2).hasMore == false)
        // No note: the request's cursor again.
        let empty = try PullPlanner.page(PullPage(notes: [], currentSequence: 9), after: SyncCursor(sequence: 9), pageSize: 2)
        #expect(empty == PullResponse(changes: [], cursor: SyncCursor(sequence: 9), hasMore: false, remaining: 0))
        // A cursor beyond the account's sequence was never issued for it.
        #expect(throws: SyncError.self) {
            try PullPlanner.page(PullPage(notes: [], currentSequence: 9), after: SyncCursor(sequence: 10), pageSize: 2)
        }
    }

    /// Issue 30: a page cut at its bytes before its limit still says more follow; `remaining` counts what is left,
    /// exactly for a pull from the start (each note once: the note count less the page), else at most the changes
    /// after the page's cursor, never more than the account's notes.
    @Test func aPageCutAtItsBytesSaysMoreFollowAndRemainingCountsWhatIsLeft() throws {
        let cut = try PullPlanner.page(
            PullPage(notes: [Self.note(3)], currentSequence: 9, noteCount: 6, cutByBytes: true), after: .start, pageSize: 1000)
        #expect(cut.hasMore && cut.remaining == 5)
        let uncut = try PullPlanner.page(
            PullPage(notes: [Self.note(3)], currentSequence: 9, noteCount: 6, cutByBytes: false), after: .start, pageSize: 1000)
        #expect(!uncut.hasMore && uncut.remaining == 0)
        let later = try PullPlanner.page(
            PullPage(notes: [Self.note(3), Self.note(5)], currentSequence: 9, noteCount: 6), after: SyncCursor(sequence: 2), pageSize: 2)
        #expect(later.hasMore && later.remaining == 4)  // changes 6...9 after cursor 5
        let capped = try PullPlanner.page(
            PullPage(notes: [Self.note(3), Self.note(5)], currentSequence: 90, noteCount: 6), after: SyncCursor(sequence: 2), pageSize: 2)
        #expect(capped.remaining == 6)
    }

    @Test func aTransportHoldsEveryPullThatMayWait() {
        #expect(!PullPlanner.mayWait(nil))
        #expect(!PullPlanner.mayWait("0"))
        for wait in ["1", "55", "00", "abc", ""] as [Substring] { #expect(PullPlanner.mayWait(wait), "\(wait)") }
    }

    @Test func onlyAnEmptyPageOfAPullThatAskedWaits() {
        let empty = PullResponse(changes: [], cursor: .start, hasMore: false)
        let waiting = PullPlanner.Query(pageSize: 20, waitSeconds: 30)
        #expect(PullPlanner.waits(waiting, first: empty, feedAvailable: true))
        #expect(!PullPlanner.waits(waiting, first: empty, feedAvailable: false))
        #expect(!PullPlanner.waits(PullPlanner.Query(pageSize: 20), first: empty, feedAvailable: true))
        let page = PullResponse(changes: [Self.note(1).record], cursor: SyncCursor(sequence: 1), hasMore: false)
        #expect(!PullPlanner.waits(waiting, first: page, feedAvailable: true))
        #expect(PullPlanner.afterRegistering(currentSequence: 4, cursor: SyncCursor(sequence: 4)) == .wait)
        #expect(PullPlanner.afterRegistering(currentSequence: 5, cursor: SyncCursor(sequence: 4)) == .read)
    }

    /// Rule 4: shutdown and a client gone answer without a read; a change and the deadline check the session first,
    /// and an ended session is 401 either way (issue 28, item 1: the deadline answered 200 without the check).
    @Test func aWakeUpChecksTheSessionUnlessNobodyWaitsOrTheDaemonStops() {
        #expect(PullPlanner.afterWake(.shutdown, sessionStands: nil) == .answerEmpty)
        #expect(PullPlanner.afterWake(.gone, sessionStands: nil) == .answerEmpty)
        for wake in [ChangeFeed.Wake.changed, .expired] {
            #expect(PullPlanner.afterWake(wake, sessionStands: nil) == .checkSession)
            #expect(PullPlanner.afterWake(wake, sessionStands: false) == .unauthorized)
        }
        #expect(PullPlanner.afterWake(.changed, sessionStands: true) == .register)
        #expect(PullPlanner.afterWake(.expired, sessionStands: true) == .answerEmpty)
    }
}
