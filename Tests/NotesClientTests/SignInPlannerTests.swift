import Foundation
import MiniFlake
import Testing

@testable import NotesClient

/// `SignInPlanner`: what a sign-in changes locally. Values only, no database.
@Suite("Sign-in planner")
struct SignInPlannerTests {
    static let alice = try! FlakeID(validating: 111)
    static let bob = try! FlakeID(validating: 222)
    static let url = "http://notes.test"

    // MARK: - The plan

    struct PlanCase: Sendable, CustomTestStringConvertible {
        var name: String
        var stored: SignInPlanner.Stored
        var account: FlakeID
        var serverURL: String
        var plan: SignInPlanner.Plan
        var testDescription: String { name }
    }

    static func owners(_ setAside: FlakeID?, _ account: FlakeID) -> OwnerPlanner.Plan {
        OwnerPlanner.Plan(setAside: setAside, wipe: nil, restore: account, unowned: .keepAside)
    }

    static let planCases: [PlanCase] = [
        PlanCase(
            name: "the first sign-in reconciles and has no notes to set aside",
            stored: SignInPlanner.Stored(token: nil, accountID: nil, serverURL: nil, shownAccountID: nil),
            account: alice, serverURL: url,
            plan: SignInPlanner.Plan(reconciling: true, owners: owners(nil, alice), revoke: nil)),
        PlanCase(
            name: "signing in again to the signed-in account only replaces the session",
            stored: SignInPlanner.Stored(token: "old", accountID: alice, serverURL: url, shownAccountID: alice),
            account: alice, serverURL: url,
            plan: SignInPlanner.Plan(
                reconciling: false, owners: owners(nil, alice), revoke: SignInPlanner.Session(token: "old", serverURL: url))),
        PlanCase(
            name: "signing back in after sign-out reconciles the account's own notes",
            stored: SignInPlanner.Stored(token: nil, accountID: nil, serverURL: url, shownAccountID: alice),
            account: alice, serverURL: url,
            plan: SignInPlanner.Plan(reconciling: true, owners: owners(nil, alice), revoke: nil)),
        PlanCase(
            name: "the same account through another URL reconciles and sets nothing aside",
            stored: SignInPlanner.Stored(token: "old", accountID: alice, serverURL: url, shownAccountID: alice),
            account: alice, serverURL: "http://other.test",
            plan: SignInPlanner.Plan(
                reconciling: true, owners: owners(nil, alice), revoke: SignInPlanner.Session(token: "old", serverURL: url))),
        PlanCase(
            name: "another account sets the previous one's notes aside and brings its own back",
            stored: SignInPlanner.Stored(token: "old", accountID: alice, serverURL: url, shownAccountID: alice),
            account: bob, serverURL: url,
            plan: SignInPlanner.Plan(
                reconciling: true, owners: owners(alice, bob), revoke: SignInPlanner.Session(token: "old", serverURL: url))),
        PlanCase(
            name: "another account after sign-out",
            stored: SignInPlanner.Stored(token: nil, accountID: nil, serverURL: url, shownAccountID: alice),
            account: bob, serverURL: url,
            plan: SignInPlanner.Plan(reconciling: true, owners: owners(alice, bob), revoke: nil)),
    ]

    @Test(arguments: planCases)
    func plan(_ example: PlanCase) {
        #expect(SignInPlanner.plan(stored: example.stored, accountID: example.account, serverURL: example.serverURL) == example.plan)
    }

    @Test func wipeDeletesThePreviousAccountsNotesInsteadOfSettingThemAside() {
        let plan = OwnerPlanner.signIn(shown: Self.alice, account: Self.bob, unowned: .carry, wipe: true)
        #expect(plan == OwnerPlanner.Plan(setAside: nil, wipe: Self.alice, restore: Self.bob, unowned: .carry))
        // The same account again: nothing to wipe, whatever the flag.
        let same = OwnerPlanner.signIn(shown: Self.alice, account: Self.alice, unowned: .keepAside, wipe: true)
        #expect(same == OwnerPlanner.Plan(setAside: nil, wipe: nil, restore: Self.alice, unowned: .keepAside))
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func planProperties(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let accounts: [FlakeID?] = [nil, Self.alice, Self.bob]
        let urls: [String?] = [nil, Self.url, "http://other.test"]
        for _ in 0..<500 {
            let stored = SignInPlanner.Stored(
                token: Bool.random(using: &random) ? "token" : nil, accountID: accounts.randomElement(using: &random)!,
                serverURL: urls.randomElement(using: &random)!, shownAccountID: accounts.randomElement(using: &random)!)
            let account = Bool.random(using: &random) ? Self.alice : Self.bob
            let url = Bool.random(using: &random) ? Self.url : "http://other.test"
            let unowned: UnownedNotes = Bool.random(using: &random) ? .carry : .keepAside
            let wipe = Bool.random(using: &random)
            let plan = SignInPlanner.plan(stored: stored, accountID: account, serverURL: url, unowned: unowned, wipe: wipe)
            let context = "seed \(seed): \(stored) → \(account) at \(url): \(plan)"
            let signedIn = stored.token != nil
            #expect(plan.reconciling == !(signedIn && stored.accountID == account && stored.serverURL == url), "\(context)")
            // The account signing in is always the one on show afterwards; no other account's notes stay on show.
            #expect(plan.owners.restore == account, "\(context)")
            #expect(plan.owners.unowned == unowned, "\(context)")
            let previous = stored.shownAccountID == account ? nil : stored.shownAccountID
            #expect((plan.owners.setAside ?? plan.owners.wipe) == previous, "\(context)")
            #expect(plan.owners.setAside == nil || plan.owners.wipe == nil, "\(context)")
            #expect(plan.owners.setAside != account && plan.owners.wipe != account, "\(context)")
            #expect((plan.revoke != nil) == (signedIn && stored.serverURL != nil), "\(context)")
        }
    }

    // MARK: - Queueing

    typealias State = SignInPlanner.NoteState

    struct QueueCase: Sendable, CustomTestStringConvertible {
        var name: String
        var state: State
        var queued: Bool
        var testDescription: String { name }
    }

    static let queueCases: [QueueCase] = [
        QueueCase(
            name: "a note whose text is its base waits for the pull",
            state: State(isDirty: false, isDeleted: false, hasBaseText: true, hasServerID: false, differsFromBase: false, hasSnapshot: false),
            queued: false),
        QueueCase(
            name: "a note edited since it was synced with this account",
            state: State(isDirty: false, isDeleted: false, hasBaseText: true, hasServerID: false, differsFromBase: true, hasSnapshot: false),
            queued: true),
        QueueCase(
            name: "a note never synced with this account",
            state: State(isDirty: false, isDeleted: false, hasBaseText: false, hasServerID: false, differsFromBase: true, hasSnapshot: false),
            queued: true),
        QueueCase(
            name: "a dirty note",
            state: State(isDirty: true, isDeleted: false, hasBaseText: true, hasServerID: false, differsFromBase: false, hasSnapshot: false),
            queued: true),
        QueueCase(
            name: "a tombstone synced with this account",
            state: State(isDirty: false, isDeleted: true, hasBaseText: true, hasServerID: false, differsFromBase: true, hasSnapshot: false),
            queued: true),
        QueueCase(
            name: "a tombstone never synced anywhere",
            state: State(isDirty: true, isDeleted: true, hasBaseText: false, hasServerID: false, differsFromBase: true, hasSnapshot: false),
            queued: false),
        QueueCase(
            name: "a tombstone whose snapshot waits for an answer",
            state: State(isDirty: true, isDeleted: true, hasBaseText: false, hasServerID: false, differsFromBase: true, hasSnapshot: true),
            queued: true),
        QueueCase(
            name: "an unchanged note whose snapshot waits for an answer",
            state: State(isDirty: false, isDeleted: false, hasBaseText: true, hasServerID: false, differsFromBase: false, hasSnapshot: true),
            queued: true),
    ]

    @Test(arguments: queueCases)
    func queueing(_ example: QueueCase) {
        #expect(SignInPlanner.queues(example.state) == example.queued)
    }

    /// The rule restated case by case, checked over every combination of the six flags.
    @Test func queueingOverEveryState() {
        for bits in 0..<64 {
            let state = State(
                isDirty: bits & 1 != 0, isDeleted: bits & 2 != 0, hasBaseText: bits & 4 != 0, hasServerID: bits & 8 != 0,
                differsFromBase: bits & 16 != 0, hasSnapshot: bits & 32 != 0)
            let expected: Bool
            if state.isDeleted && !state.hasBaseText && !state.hasServerID && !state.hasSnapshot {
                expected = false  // never synced anywhere: nothing to tell any account
            } else if state.hasSnapshot || state.isDeleted {
                expected = true  // an unacknowledged snapshot, or a delete the account may not have
            } else {
                expected = state.isDirty || !state.hasBaseText || state.differsFromBase  // changed for this account
            }
            #expect(SignInPlanner.queues(state) == expected, "\(state)")
        }
    }
}
