import MiniFlake
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// What the protocol asks of a client's ID scheme (Docs/PROTOCOL.md, "Identity of a note"): one installation never
/// uses a client ID twice. These pin what happens to a client that breaks it (a faithful CDCounter restarted in the
/// same second, creation timestamps in one millisecond), next to what another device's equal client ID costs.
@Suite("Client IDs a scheme repeats")
struct ClientIDReuseTests {
    @Test func anotherDevicesEqualClientIDCostsNothing() {
        var h = PlannerHarness()
        let counterStart: Int64 = 1_767_225_600 * 1_000_000 + 1  // both devices' CDCounter, started in one second
        let results = h.push(alice, [
            change(counterStart, origin: 1, edit: 1, text: "phone\n"), change(counterStart, origin: 2, edit: 2, text: "laptop\n"),
        ])
        #expect(results.map(\.status) == [.created, .created])
        #expect(Set(h.notes(of: alice).map(\.text)) == ["phone\n", "laptop\n"])
    }

    @Test func oneInstallationReusingAClientIDHasItsNewNoteTakenForTheOld() {
        var h = PlannerHarness()
        let createdAt: Int64 = 1_767_225_600_123  // two notes in one millisecond, one origin
        let first = h.push(alice, [change(createdAt, origin: 1, edit: 1, text: "groceries\n")])
        let serverID = try! #require(first[0].serverID)
        let second = h.push(alice, [change(createdAt, origin: 1, edit: 2, text: "passwords\n")])
        // Not a new note: a reconciliation with the first, whose concurrent text became a conflict copy of it.
        #expect(second[0].serverID == serverID)
        #expect(second[0].status == .conflict)
        #expect(h.note(serverID)?.text == "groceries\n")
        let copy = try! #require(h.notes(of: alice).first { $0.conflictOf == serverID })
        #expect(copy.text == "passwords\n" && copy.clientID != id(createdAt))
    }
}
