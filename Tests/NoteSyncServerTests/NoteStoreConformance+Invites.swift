import Foundation
import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// Invite codes (``InviteStore``), checked on every store by the conformance suite.
extension NoteStoreConformance {
    static func inviteStore(_ store: any NoteStore) throws -> any InviteStore {
        try #require(store as? any InviteStore, "\(type(of: store)) is not an InviteStore")
    }

    static func account(_ name: String) -> AccountRecord {
        AccountRecord(id: minter.mint(), username: name, passwordHash: "$2b$04$hash", createdAt: testEpoch)
    }

    static let inviteChecks: [Check] = [
        Check(name: "invites: create, list, look up, consume") { store in
            let invites = try inviteStore(store)
            let first = try await invites.createInvite(codeHash: "h1", note: "for grandma", uses: 2, expiresAt: nil, createdAt: 10)
            let second = try await invites.createInvite(codeHash: "h2", note: nil, uses: 1, expiresAt: 5_000, createdAt: 11)
            #expect(first.id > 0 && second.id > first.id)
            #expect(
                first
                    == InviteRecord(
                        id: first.id, codeHash: "h1", note: "for grandma", usesTotal: 2, usesLeft: 2, expiresAt: nil, createdAt: 10,
                        revokedAt: nil))
            #expect(try await invites.invites() == [first, second])
            #expect(try await invites.invite(byCodeHash: "h2") == second)
            #expect(try await invites.invite(byCodeHash: "h3") == nil)

            // Each sign-up takes one use; the last one leaves it used up, and the next is refused with nothing inserted.
            try await invites.createAccount(account("alice"), consumingInvite: "h1", now: 20)
            #expect(try await invites.invite(byCodeHash: "h1")?.usesLeft == 1)
            try await invites.createAccount(account("bob"), consumingInvite: "h1", now: 21)
            #expect(try await invites.invite(byCodeHash: "h1")?.usesLeft == 0)
            #expect(try await invites.invite(byCodeHash: "h1")?.isUsable(at: 21) == false)
            await #expect(throws: NoteStoreError.inviteNotUsable) {
                try await invites.createAccount(account("carol"), consumingInvite: "h1", now: 22)
            }
            #expect(try await store.account(byUsername: "alice") != nil)
            #expect(try await store.account(byUsername: "bob") != nil)
            #expect(try await store.account(byUsername: "carol") == nil)
            // An unknown code: refused, nothing inserted.
            await #expect(throws: NoteStoreError.inviteNotUsable) {
                try await invites.createAccount(account("carol"), consumingInvite: "nope", now: 22)
            }
            #expect(try await store.account(byUsername: "carol") == nil)
            // A taken username consumes nothing.
            await #expect(throws: NoteStoreError.usernameTaken) {
                try await invites.createAccount(account("alice"), consumingInvite: "h2", now: 22)
            }
            #expect(try await invites.invite(byCodeHash: "h2")?.usesLeft == 1)
        },
        Check(name: "invites: expiry") { store in
            let invites = try inviteStore(store)
            _ = try await invites.createInvite(codeHash: "h1", note: nil, uses: 5, expiresAt: 1_000, createdAt: 10)
            #expect(try await invites.invite(byCodeHash: "h1")?.isUsable(at: 999) == true)
            #expect(try await invites.invite(byCodeHash: "h1")?.isUsable(at: 1_000) == false)
            // Expired at its time exactly, not a millisecond later.
            await #expect(throws: NoteStoreError.inviteNotUsable) {
                try await invites.createAccount(account("late"), consumingInvite: "h1", now: 1_000)
            }
            #expect(try await store.account(byUsername: "late") == nil)
            try await invites.createAccount(account("early"), consumingInvite: "h1", now: 999)
            #expect(try await invites.invite(byCodeHash: "h1")?.usesLeft == 4)
        },
        Check(name: "invites: revoke") { store in
            let invites = try inviteStore(store)
            let invite = try await invites.createInvite(codeHash: "h1", note: nil, uses: 3, expiresAt: nil, createdAt: 10)
            let other = try await invites.createInvite(codeHash: "h2", note: nil, uses: 3, expiresAt: nil, createdAt: 10)
            try await invites.createAccount(account("alice"), consumingInvite: "h1", now: 20)
            #expect(try await invites.revokeInvite(id: invite.id, revokedAt: 30))
            // Revoking again keeps the first time; an unknown ID is false.
            #expect(try await invites.revokeInvite(id: invite.id, revokedAt: 40))
            #expect(try await invites.invite(byCodeHash: "h1")?.revokedAt == 30)
            #expect(try await invites.revokeInvite(id: other.id + 1000, revokedAt: 40) == false)
            await #expect(throws: NoteStoreError.inviteNotUsable) {
                try await invites.createAccount(account("bob"), consumingInvite: "h1", now: 50)
            }
            #expect(try await store.account(byUsername: "bob") == nil)
            // The account made with it stays; the other invite is untouched.
            #expect(try await store.account(byUsername: "alice") != nil)
            #expect(try await invites.invite(byCodeHash: "h2")?.revokedAt == nil)
            try await invites.createAccount(account("bob"), consumingInvite: "h2", now: 50)
        },
        Check(name: "invites: racing for the last use") { store in
            // Two sign-ups at once for each one-use invite: exactly one of each pair gets it, the other is refused,
            // and the store holds exactly the winners.
            let invites = try inviteStore(store)
            let rounds = 12
            for round in 0..<rounds {
                _ = try await invites.createInvite(codeHash: "race\(round)", note: nil, uses: 1, expiresAt: nil, createdAt: 1)
            }
            let outcomes = try await withThrowingTaskGroup(of: (Int, String, Bool).self) { group in
                for round in 0..<rounds {
                    for side in ["a", "b"] {
                        group.addTask {
                            do {
                                try await invites.createAccount(account("racer\(round)\(side)"), consumingInvite: "race\(round)", now: 2)
                                return (round, side, true)
                            } catch NoteStoreError.inviteNotUsable {
                                return (round, side, false)
                            }
                        }
                    }
                }
                var outcomes: [(Int, String, Bool)] = []
                for try await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            for round in 0..<rounds {
                let winners = outcomes.filter { $0.0 == round && $0.2 }
                #expect(winners.count == 1, "round \(round): \(winners.count) sign-ups took a one-use invite")
                #expect(try await invites.invite(byCodeHash: "race\(round)")?.usesLeft == 0)
                for side in ["a", "b"] {
                    let won = winners.contains { $0.1 == side }
                    #expect((try await store.account(byUsername: "racer\(round)\(side)") != nil) == won)
                }
            }
        },
    ]
}
