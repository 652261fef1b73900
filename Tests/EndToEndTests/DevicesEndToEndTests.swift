import Foundation
import Testing
import TestSupport

/// Issue 18 for the people who sync, with the real binaries: `notes devices`, `notes devices revoke`,
/// `notes logout --everywhere`, `notes password` (on a real pseudo-terminal) and `notes account delete`, against a
/// real notesyncd. A revoked device, or a device of a deleted account, behaves as signed out and keeps its notes.
@Suite("devices, password and account deletion, end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct DevicesEndToEndTests {
    /// The pseudo-terminal driver of the issue-16 tests.
    let terminal = AccountsEndToEndTests()

    func serverTexts(_ server: NotesE2EServer, _ username: String, password: String = NotesE2E.password) async throws -> [String] {
        let viewer = try NotesDevice("viewer")
        defer { viewer.remove() }
        _ = ok(try await account(viewer, "login", server.url, username, password: password))
        return try await viewer.texts()
    }

    struct ListedDevice: Decodable {
        var id: String
        var name: String?
        var thisDevice: Bool
        var lastSeenAt: String?
    }

    @Test func aRevokedDeviceIsSignedOutAndKeepsItsNotesAndLogoutEverywhereSignsOutAll() async throws {
        try await withServer { server in
            let laptop = try NotesDevice("laptop")
            let phone = try NotesDevice("phone")
            defer { laptop.remove(); phone.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "alice"))
            _ = ok(try await laptop.run(["add", "from the laptop"]))
            _ = ok(try await laptop.run(["sync"]))
            _ = ok(try await account(phone, "login", server.url, "alice"))

            let devices = try ok(try await laptop.run(["devices", "--json"])).json([ListedDevice].self)
            #expect(devices.count == 2)
            #expect(devices.filter(\.thisDevice).count == 1)
            let phoneID = try #require(devices.first { !$0.thisDevice }?.id)
            let listed = ok(try await laptop.run(["devices"]))
            #expect(listed.stdout.contains("* ") && listed.stdout.contains(phoneID) && listed.stdout.contains("2 devices"), "\(listed)")
            // Refusals: this device, an unknown one, a too-short prefix; none revokes anything.
            let this = try #require(devices.first(where: \.thisDevice)?.id)
            let own = try await laptop.run(["devices", "revoke", this])
            #expect(own.status == 2 && own.stderr.contains("notes logout"), "\(own)")
            #expect(try await laptop.run(["devices", "revoke", "99999999"]).status == 2)
            #expect(try await laptop.run(["devices", "revoke", "12"]).status == 2)

            let revoked = ok(try await laptop.run(["devices", "revoke", String(phoneID.prefix(16))]))
            #expect(revoked.stdout.contains("Signed out \(phoneID)"), "\(revoked)")
            #expect(try await laptop.run(["devices", "--json"]).json([ListedDevice].self).count == 1)

            // The phone learns at its next request and behaves as signed out: its notes, and one written now, stay.
            _ = ok(try await phone.run(["add", "written on the revoked phone"]))
            let sync = try await phone.run(["sync"])
            #expect(sync.status == 4 && sync.stderr.contains("Signed out by the server"), "\(sync)")
            #expect(try await phone.status().signedIn == false)
            #expect(try await phone.texts() == ["from the laptop", "written on the revoked phone"])
            // Signing in again sends the new note once; nothing is duplicated.
            _ = ok(try await account(phone, "login", server.url, "alice"))
            #expect(try await serverTexts(server, "alice") == ["from the laptop", "written on the revoked phone"])

            // Everywhere: every device of the account is signed out, each keeps its notes.
            let everywhere = ok(try await laptop.run(["logout", "--everywhere"]))
            #expect(everywhere.stdout.contains("Signed out 2 other devices too"), "\(everywhere)")  // the phone and the viewer
            #expect(try await laptop.status().signedIn == false)
            #expect(try await phone.run(["sync"]).status == 4)
            #expect(try await phone.texts() == ["from the laptop", "written on the revoked phone"])
            #expect(try await laptop.texts() == ["from the laptop"])  // it never synced the phone's note
        }
    }

    @Test func changingThePasswordOnATerminalSignsTheOtherDevicesOut() async throws {
        try await withServer { server in
            let laptop = try NotesDevice("pw-laptop")
            let phone = try NotesDevice("pw-phone")
            defer { laptop.remove(); phone.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "alice"))
            _ = ok(try await account(phone, "login", server.url, "alice"))
            _ = ok(try await phone.run(["add", "phone note"]))

            // A wrong current password changes nothing (exit 4); differing new passwords are refused before asking.
            let wrong = try await laptop.run(["password", "--password-stdin"], stdin: "not the password\nnew password 123\n")
            #expect(wrong.status == 4 && wrong.stderr.contains("Wrong password"), "\(wrong)")
            let short = try await laptop.run(["password", "--password-stdin"], stdin: NotesE2E.password + "\nshort\n")
            #expect(short.status == 2, "\(short)")
            let differ = try await terminal.runInTerminal(
                laptop, ["password"],
                answers: [
                    ("Current password for alice: ", NotesE2E.password), ("New password: ", "new password 123"),
                    ("Repeat the new password: ", "new password 456"),
                ])
            #expect(differ.status == 1 && differ.output.contains("the new passwords differ"), "\(differ)")
            #expect(try await phone.run(["sync"]).status == 0)

            // Typed on a terminal with echo off: the passwords never appear in the output.
            let changed = try await terminal.runInTerminal(
                laptop, ["password"],
                answers: [
                    ("Current password for alice: ", NotesE2E.password), ("New password: ", "new password 123"),
                    ("Repeat the new password: ", "new password 123"),
                ])
            #expect(changed.status == 0 && changed.output.contains("Password changed for alice; 1 other device signed out"), "\(changed)")
            #expect(!changed.output.contains(NotesE2E.password) && !changed.output.contains("new password 123"), "\(changed)")
            #expect(try await laptop.run(["sync"]).status == 0)
            _ = ok(try await phone.run(["add", "written after the change"]))
            #expect(try await phone.run(["sync"]).status == 4)
            let old = try await account(phone, "login", server.url, "alice")
            #expect(old.status == 4, "\(old)")
            _ = ok(try await account(phone, "login", server.url, "alice", password: "new password 123"))
            #expect(try await serverTexts(server, "alice", password: "new password 123") == ["phone note", "written after the change"])
        }
    }

    @Test func deletingTheAccountKeepsEveryDevicesNotesAsLocalNotes() async throws {
        try await withServer { server in
            let laptop = try NotesDevice("del-laptop")
            let phone = try NotesDevice("del-phone")
            defer { laptop.remove(); phone.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "alice"))
            _ = ok(try await laptop.run(["add", "first"]))
            _ = ok(try await laptop.run(["add", "second"]))
            _ = ok(try await laptop.run(["sync"]))
            _ = ok(try await account(phone, "login", server.url, "alice"))  // then offline until the account is gone
            let bob = try NotesDevice("del-bob")
            defer { bob.remove() }
            _ = ok(try await account(bob, "signup", server.url, "bob"))

            // Without a terminal: refused unless --yes and --password-stdin; --yes with stdin closed has no password.
            let bare = try await laptop.run(["account", "delete"])
            #expect(bare.status == 2 && bare.stderr.contains("--yes and --password-stdin"), "\(bare)")
            let closed = try await laptop.run(["account", "delete", "--yes", "--password-stdin"])
            #expect(closed.status == 2 && closed.stderr.contains("no password"), "\(closed)")
            let wrong = try await laptop.run(["account", "delete", "--yes", "--password-stdin"], stdin: "wrong password!\n")
            #expect(wrong.status == 4 && wrong.stderr.contains("nothing was deleted"), "\(wrong)")
            // On a terminal: a mistyped username deletes nothing.
            let mistyped = try await terminal.runInTerminal(
                laptop, ["account", "delete"], answers: [("Password for alice: ", NotesE2E.password), ("to delete it: ", "alicia")])
            #expect(mistyped.status == 1 && mistyped.output.contains("nothing was deleted"), "\(mistyped)")
            #expect(try await laptop.status().signedIn)

            let deleted = try await terminal.runInTerminal(
                laptop, ["account", "delete"], answers: [("Password for alice: ", NotesE2E.password), ("to delete it: ", "alice")])
            #expect(deleted.status == 0 && deleted.output.contains("Kept 2 notes on this device as notes of no account"), "\(deleted)")
            #expect(try await laptop.status().signedIn == false)
            #expect(try await laptop.texts() == ["first", "second"])
            #expect(try await account(laptop, "login", server.url, "alice", ["--no-carry"]).status == 4)
            #expect(try await serverTexts(server, "bob") == [])

            // The username is free. A new alice gets the laptop's notes only when asked, as new notes.
            _ = ok(try await account(laptop, "signup", server.url, "alice", ["--no-carry"]))
            #expect(try await serverTexts(server, "alice") == [])
            _ = ok(try await laptop.run(["logout"]))
            let carried = ok(try await account(laptop, "login", server.url, "alice", ["--carry"]))
            #expect(carried.stdout.contains("2 notes written while signed out added to alice"), "\(carried)")
            #expect(try await serverTexts(server, "alice") == ["first", "second"])

            // The phone was offline: its next sync finds it signed out; its notes stay. Signing in to the new alice
            // treats the deleted account's notes as local notes: carried, they match the laptop's (same client IDs),
            // so nothing is duplicated.
            _ = ok(try await phone.run(["add", "phone, offline"]))
            #expect(try await phone.run(["sync"]).status == 4)
            #expect(try await phone.texts() == ["first", "phone, offline", "second"])
            let phoneCarried = ok(try await account(phone, "login", server.url, "alice", ["--carry"]))
            #expect(phoneCarried.stdout.contains("3 notes written while signed out added to alice"), "\(phoneCarried)")
            #expect(try await serverTexts(server, "alice") == ["first", "phone, offline", "second"])
        }
    }

    @Test func statusShowsTheAccountsUsageAndLimits() async throws {
        try await withServer(["--max-notes-per-account", "3", "--max-bytes-per-account", "1000"]) { server in
            let laptop = try NotesDevice("quota")
            defer { laptop.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "alice"))
            for text in ["one", "two", "three", "four"] { _ = ok(try await laptop.run(["add", text])) }
            let sync = try await laptop.run(["sync"])
            #expect(sync.status == 1 && sync.stderr.contains("quota_exceeded"), "\(sync)")
            let status = ok(try await laptop.run(["status"]))
            #expect(status.stdout.contains("Server:     3 of 3 notes (deleted ones included)"), "\(status)")
            struct Status: Decodable {
                struct Storage: Decodable { var notes: Int; var textBytes: Int; var replayTextBytes: Int; var maxNotes: Int; var maxTextBytes: Int }
                var storage: Storage?
            }
            let json = try ok(try await laptop.run(["status", "--json"])).json(Status.self)
            #expect(json.storage?.notes == 3 && json.storage?.maxNotes == 3 && json.storage?.maxTextBytes == 1000)
            #expect(json.storage?.replayTextBytes == 0)
            // The refused note stays on this device, waiting.
            #expect(try await laptop.texts().count == 4)
        }
    }

    /// A note refused for the account's byte quota is not lost and needs no edit: every sync tries it again, and
    /// the first one after space was freed (another note shortened) sends it. Until then each sync says why it
    /// waits, and `notes status` counts it as pending, in words and in JSON (issue 28: it said "nothing to send" and
    /// "edit them to retry" while its JSON said pending). Before, it stayed refused until the user edited that note.
    @Test func aNoteOverTheQuotaSyncsOnceSpaceIsFreed() async throws {
        try await withServer(["--max-bytes-per-account", "1000"]) { server in
            let laptop = try NotesDevice("quota-retry")
            defer { laptop.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "alice"))
            // Each note's text counts twice (the note and its version in the history): 600 bytes of the 1,000 for the
            // first, the second would make 1,200; shortening the first to "short" frees its 300 (its old version
            // stays in the history), enough for the second.
            let first = String(repeating: "a", count: 300)
            let second = String(repeating: "b", count: 300)
            _ = ok(try await laptop.run(["add", first]))
            _ = ok(try await laptop.run(["sync"]))
            _ = ok(try await laptop.run(["add", second]))
            for _ in 1...2 {
                let refused = try await laptop.run(["sync"])
                #expect(refused.status == 1, "\(refused)")
                #expect(refused.stderr.contains("(quota_exceeded); every sync tries it again"), "\(refused)")
                #expect(refused.stderr.hasSuffix("notes: 1 note over the account's quota is not synced; every sync tries again\n"), "\(refused)")
            }
            #expect(try await serverTexts(server, "alice") == [first])
            // `notes status` says what the sync does, in both forms: the note is pending, and needs no edit.
            let status = ok(try await laptop.run(["status"]))
            #expect(
                status.stdout.contains("Pending:    1 note with changes to send (1 over the account's quota, tried again at every sync"),
                "\(status)")
            #expect(!status.stdout.contains("Refused:") && !status.stdout.contains("edit them"), "\(status)")
            let counts = try await laptop.status()
            #expect(counts.pending == 1 && counts.failed == 0 && counts.overQuota == 1, "\(counts)")
            let notes = try ok(try await laptop.run(["list", "--json"])).json([NotesE2EListedNote].self)
            let id = try #require(notes.first { $0.text == first }?.id)
            _ = ok(try await laptop.run(["edit", id, "--text", "short"]))
            _ = ok(try await laptop.run(["sync"]))
            #expect(try await serverTexts(server, "alice").sorted() == [second, "short"])
        }
    }

    @Test func statusShowsTheTextsKeptForReplays() async throws {
        try await withServer(["--max-bytes-per-account", "1000"]) { server in
            let laptop = try NotesDevice("replay-laptop")
            let phone = try NotesDevice("replay-phone")
            defer { laptop.remove(); phone.remove() }
            _ = ok(try await account(laptop, "signup", server.url, "alice"))
            _ = ok(try await laptop.run(["add", "plan\nmonday\nmiddle\nfriday"]))
            _ = ok(try await laptop.run(["sync"]))
            _ = ok(try await account(phone, "login", server.url, "alice"))
            let id = try #require(try await laptop.run(["list", "--json"]).json([NotesE2EListedNote].self).first?.id)
            _ = ok(try await laptop.run(["edit", id, "--text", "plan\nMONDAY\nmiddle\nfriday"]))
            _ = ok(try await phone.run(["edit", id, "--text", "plan\nmonday\nmiddle\nFRIDAY"]))
            _ = ok(try await laptop.run(["sync"]))
            // The phone's edit merges on the server; the merged text is the answer, kept to answer a replay.
            _ = ok(try await phone.run(["sync"]))
            #expect(try await phone.texts() == ["plan\nMONDAY\nmiddle\nFRIDAY"])
            let merged = Int64("plan\nMONDAY\nmiddle\nFRIDAY".utf8.count)
            let status = ok(try await phone.run(["status"]))
            #expect(status.stdout.contains("(and \(merged) bytes kept for replays)"), "\(status)")
            struct Status: Decodable {
                struct Storage: Decodable { var textBytes: Int64; var replayTextBytes: Int64 }
                var storage: Storage?
            }
            let json = try ok(try await laptop.run(["status", "--json"])).json(Status.self)
            #expect(json.storage?.textBytes == merged && json.storage?.replayTextBytes == merged)
        }
    }
}
