import Foundation
import Testing
import TestSupport

/// Issue 31 with the real binaries: tags, pinned and archived notes, and history, between devices that each have their
/// own `--home`, through a real `notesyncd`.
@Suite("tags and history end to end", .serialized, .enabled(if: NotesE2E.binariesExist, "build notes and notesyncd first (swift build)"))
struct TagsEndToEndTests {
    /// The fields of `notes list --json` these tests read.
    struct Listed: Decodable {
        var id: String
        var text: String
        var tags: [String]
        var pinned: Bool
        var archived: Bool
        var deleted: Bool
    }

    struct Version: Decodable {
        var version: Int64
        var text: String
        var deleted: Bool
        var tags: [String]
        var pinned: Bool
        var device: String?
    }

    struct History: Decodable {
        var versions: [Version]
        var fetched: Int
    }

    struct Counted: Decodable, Equatable {
        var name: String
        var notes: Int
    }

    func signIn(_ device: NotesDevice, _ server: NotesE2EServer, _ username: String, signUp: Bool = false) async throws {
        ok(
            try await device.run(
                (signUp ? ["signup", "--no-encryption"] : ["login"]) + ["--server", server.url, "--username", username, "--password-stdin"],
                stdin: NotesE2E.password + "\n"))
    }

    func listed(_ device: NotesDevice, _ extra: [String] = ["--all"]) async throws -> [Listed] {
        try ok(try await device.run(["list", "--json"] + extra)).json([Listed].self).filter { !$0.deleted }
    }

    @Test func twoDevicesTaggingOfflineThenSyncingKeepBothChanges() async throws {
        try await withServer { server in
            let a = try NotesDevice("a")
            let b = try NotesDevice("b")
            defer { a.remove(); b.remove() }
            try await signIn(a, server, "alice", signUp: true)
            try await signIn(b, server, "alice")
            let added = try ok(try await a.run(["add", "-t", "shop", "--tag", "home", "groceries", "--json"])).json(Listed.self)
            #expect(added.tags == ["home", "shop"])
            ok(try await a.run(["sync"]))
            ok(try await b.run(["sync"]))

            // Offline on both: a adds work and takes shop off, b adds errands and takes home off, and pins it.
            ok(try await a.run(["tag", added.id, "+work", "-shop"]))
            ok(try await b.run(["tag", added.id, "+Errands", "-home"]))
            ok(try await b.run(["pin", added.id]))
            ok(try await a.run(["sync"]))
            ok(try await b.run(["sync"]))
            ok(try await a.run(["sync"]))
            for device in [a, b] {
                let note = try #require(try await listed(device).first)
                #expect(note.tags == ["Errands", "work"] && note.pinned, "\(note)")
                #expect(try ok(try await device.run(["tags", "--json"])).json([Counted].self) == [
                    Counted(name: "Errands", notes: 1), Counted(name: "work", notes: 1),
                ])
            }
            let tagged = try ok(try await b.run(["list", "--tag", "WORK", "--tag", "errands"]))
            #expect(tagged.stdout.contains("groceries  [pinned]  #Errands #work"), "\(tagged)")
            #expect(try ok(try await b.run(["search", "tag:work", "groceries"])).stdout.contains("groceries"))
            #expect(try ok(try await b.run(["list", "--tag", "shop"])).stdout.contains("No note has the tag #shop"))

            // Archived: out of the list, in --archived, searched and marked.
            ok(try await a.run(["archive", added.id]))
            ok(try await a.run(["sync"]))
            ok(try await b.run(["sync"]))
            #expect(try await listed(b, []).isEmpty)
            #expect(try await listed(b, ["--archived"]).map(\.text) == ["groceries"])
            #expect(try ok(try await b.run(["search", "groceries"])).stdout.contains("[archived]"))

            // A bad tag: one line, usage status, nothing changed.
            fails(try await a.run(["tag", added.id, "+two words"]), 2, saying: "A tag holds only letters")
            fails(try await a.run(["add", "-t", "/x", "text"]), 2, saying: "A tag does not start")
            #expect(try await listed(a).count == 1)
        }
    }

    @Test func historyShowDiffAndRestoreAVersion() async throws {
        try await withServer { server in
            let a = try NotesDevice("a")
            let c = try NotesDevice("c")
            defer { a.remove(); c.remove() }
            try await signIn(a, server, "alice", signUp: true)
            let note = try ok(try await a.run(["add", "-t", "draft", "line one", "--json"])).json(Listed.self)
            fails(try await a.run(["history", note.id]), 2, saying: "not been synced yet")
            ok(try await a.run(["sync"]))
            ok(try await a.run(["edit", note.id, "--text", "line one\nline two"]))
            ok(try await a.run(["sync"]))
            ok(try await a.run(["tag", note.id, "+final", "-draft"]))
            ok(try await a.run(["sync"]))

            let history = try ok(try await a.run(["history", note.id, "--json"])).json(History.self)
            #expect(history.versions.map(\.version) == [1, 2, 3] && history.fetched == 3)
            #expect(history.versions.map(\.tags) == [["draft"], ["draft"], ["final"]])
            #expect(history.versions.allSatisfy { $0.device != nil })
            #expect(try ok(try await a.run(["history", note.id, "--json"])).json(History.self).fetched == 0, "kept here")
            let human = try ok(try await a.run(["history", note.id])).stdout.split(separator: "\n")
            #expect(human.count == 3 && human[0].hasPrefix("v3") && human[0].hasSuffix("+#final -#draft"), "\(human)")
            #expect(human[1].hasSuffix("+1 -0 lines") && human[2].hasSuffix("created, 1 line"), "\(human)")

            let first = try ok(try await a.run(["show", note.id, "--version", "1", "--json"])).json(Version.self)
            #expect(first.text == "line one" && first.tags == ["draft"])
            let diff = try ok(try await a.run(["diff", note.id, "1", "3"])).stdout
            #expect(diff.contains("tags: +#final -#draft") && diff.contains("+ line two"), "\(diff)")
            fails(try await a.run(["show", note.id, "--version", "9"]), 2, saying: "no version 9")

            // Deleted on a; a fresh device pulls only its tombstone, and brings version 1 back.
            ok(try await a.run(["rm", note.id]))
            ok(try await a.run(["sync"]))
            try await signIn(c, server, "alice")
            #expect(try ok(try await c.run(["trash"])).stdout.contains("The trash is empty"))
            fails(try await c.run(["restore", note.id, "--version", "4"]), 2, saying: "delete")
            ok(try await c.run(["restore", note.id, "--version", "1"]))
            ok(try await c.run(["sync"]))
            ok(try await a.run(["sync"]))
            let back = try #require(try await listed(a).first)
            #expect(back.text == "line one" && back.tags == ["draft"])
        }
    }

    @Test func markdownExportsCarryTagsAndFlagsToAnotherDevice() async throws {
        let a = try NotesDevice("a")
        let b = try NotesDevice("b")
        defer { a.remove(); b.remove() }
        let note = try ok(try await a.run(["add", "-t", "Work", "-t", "idea", "a plan", "--json"])).json(Listed.self)
        ok(try await a.run(["pin", note.id]))
        let directory = a.home.deletingLastPathComponent().appendingPathComponent("markdown")
        ok(try await a.run(["export", "--format", "markdown", directory.path]))
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        let content = try String(contentsOf: directory.appendingPathComponent(try #require(files.first)), encoding: .utf8)
        #expect(content == "---\ntags: [idea, Work]\npinned: true\n---\na plan\n")
        ok(try await b.run(["import", directory.path]))
        let imported = try #require(try await listed(b).first)
        #expect(imported.text == "a plan" && imported.tags == ["idea", "Work"] && imported.pinned)
    }
}
