import Foundation
import MiniFlake
import NoteMerge
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NotesClient
@testable import NotesCommand

/// Issue 31 on one device: tags, pinned and archived notes, their listings, and export and import.
@Suite("Tags and flags on one device")
struct TagsTests {
    func device(_ clock: ManualFlakeClock? = nil) throws -> NotesClient { try makeDevice(NoNetwork(), seed: 5, clock: clock) }

    @Test func tagsAreASetComparedByKeyShownAsFirstWritten() throws {
        let client = try device()
        let note = try client.add("text", tags: ["Work", "idea", "WORK", "caf\u{e9}"])
        #expect(try note.tags == ["café", "idea", "Work"] && client.note(note.id).tags == note.tags)
        let same = try client.tag(note.id, adding: ["work", "CAFE\u{301}"])
        #expect(same.revision == note.revision, "the tags are there already (by key): nothing is written")
        let changed = try client.tag(note.id, adding: ["new/sub-tag_1.2"], removing: ["WORK", "absent"])
        #expect(changed.tags == ["café", "idea", "new/sub-tag_1.2"] && changed.revision == note.revision + 1 && changed.isDirty)
        #expect(changed.updatedAt == note.updatedAt, "tags are not the text's edit")
        try expectTagIndexMatchesNotes(client)
    }

    @Test(arguments: ["", "two words", "/lead", "trail.", "comma,", "#hash", String(repeating: "x", count: 65)])
    func aTagBreakingTheRulesIsRefusedWithTheRule(_ tag: String) throws {
        let client = try device()
        let error = #expect(throws: NotesError.self) { try client.add("text", tags: [tag]) }
        #expect(error?.code == .invalidInput && error?.message.hasPrefix("A tag") == true)
        #expect(try client.notes().isEmpty, "nothing was stored")
    }

    @Test func aNoteHasAtMostFiftyTags() throws {
        let client = try device()
        let fifty = (1...50).map { "t\($0)" }
        let note = try client.add("text", tags: fifty)
        let error = #expect(throws: NotesError.self) { try client.tag(note.id, adding: ["one-more"]) }
        #expect(error?.code == .invalidInput)
        #expect(throws: NotesError.self) { try client.add("text", tags: fifty + ["t51"]) }
        #expect(try client.note(note.id).tags.count == 50)
    }

    @Test func deletedNotesLoseTheirTagsFromTheIndexAndGetThemBack() async throws {
        let client = try device()
        let note = try client.add("text", tags: ["a"])
        _ = try client.add("other", tags: ["A", "b"])
        try client.delete(note.id)
        #expect(try client.tagCounts() == [TagCount(name: "A", notes: 1), TagCount(name: "b", notes: 1)])
        #expect(try client.note(note.id).tags == ["a"])
        #expect(throws: NotesError.self) { try client.tag(note.id, adding: ["b"]) }
        try client.restore(note.id)
        #expect(try client.tagCounts() == [TagCount(name: "a", notes: 2), TagCount(name: "b", notes: 1)])
        try expectTagIndexMatchesNotes(client)
        // A wipe deletes the notes whole (their tags go with them, ON DELETE CASCADE): the counts are counted again.
        try await client.signOut(wipe: true)
        #expect(try client.tagCounts().isEmpty)
        try expectTagIndexMatchesNotes(client)
    }

    @Test func listingsShowPinnedNotesFirstAndLeaveArchivedOnesOut() throws {
        let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        let client = try device(clock)
        var notes: [LocalNote] = []
        for index in 0..<5 {
            clock.advance(milliseconds: 1_000)
            notes.append(try client.add("note \(index)", tags: index % 2 == 0 ? ["even"] : ["odd"]))
        }
        try client.pin(notes[1].id)
        try client.archive(notes[3].id)
        try client.archive(notes[2].id)
        try client.pin(notes[2].id)
        let ids = { (listing: Listing) in listing.notes.map { summary in notes.firstIndex { $0.id == summary.id } ?? -1 } }
        #expect(ids(try client.listing()) == [1, 4, 0])
        #expect(ids(try client.listing(ListingFilter(archived: .only))) == [2, 3])
        #expect(ids(try client.listing(.all)) == [2, 1, 4, 3, 0])
        #expect(ids(try client.listing(ListingFilter(tags: ["EVEN"]))) == [4, 0])
        #expect(ids(try client.listing(ListingFilter(archived: .included, tags: ["even", "odd"]))).isEmpty)
        for filter in [ListingFilter(), .all, ListingFilter(archived: .only), ListingFilter(tags: ["odd"])] {
            let whole = try client.listing(filter)
            let page = try client.recent(limit: 2, filter: filter)
            #expect(page.listing.notes == Array(whole.notes.prefix(2)) && page.total == whole.notes.count, "\(filter)")
            for note in page.listing.notes { #expect(page.listing.displayIDs[note.id] == whole.displayIDs[note.id]) }
            #expect(try client.notes(filter).map(\.id) == whole.notes.map(\.id))
        }
        let line = String(decoding: NotesCommand.listing(try client.listing(.all).notes, ids: try client.displayIDs()), as: UTF8.self)
            .split(separator: "\n")[0]
        #expect(line.hasSuffix("note 2  [pinned]  [archived]  #even"))
    }

    /// A page of a tag many notes have is read in listing order (each note looked up in `note_tags`), and counted
    /// from `tag_counts`: the same notes and total as reading every note of the tag.
    @Test func aPageOfACommonTagIsTheStartOfItsListing() throws {
        let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        let client = try device(clock)
        for index in 0..<40 {
            clock.advance(milliseconds: index % 7 == 0 ? 0 : 1_000)
            let note = try client.add("note \(index)", tags: index % 4 == 0 ? ["rare"] : ["Common"])
            if index % 5 == 0 { try client.pin(note.id) }
            if index % 6 == 0 { try client.archive(note.id) }
            if index == 13 { try client.delete(note.id) }
        }
        for filter in [ListingFilter(tags: ["common"]), ListingFilter(archived: .only, tags: ["COMMON"]), ListingFilter(archived: .included, tags: ["common"])] {
            let whole = try client.listing(filter)
            for limit in [1, 5, 20, 100] {
                let page = try client.recent(limit: limit, filter: filter)
                #expect(page.listing.notes == Array(whole.notes.prefix(limit)), "\(filter) limit \(limit)")
                #expect(page.total == whole.notes.count, "\(filter) limit \(limit)")
            }
        }
    }

    // MARK: - Markdown

    @Test(arguments: [
        ("plain", [String](), false, false, "plain\n"),
        ("text\n", ["idea", "Work"], true, false, "---\ntags: [idea, Work]\npinned: true\n---\ntext\n"),
        ("text", [], false, true, "---\narchived: true\n---\ntext\n"),
        ("---\nlooks: like front matter\n---\nbody", [], false, false, "---\n---\n---\nlooks: like front matter\n---\nbody\n"),
    ])
    func markdownFrontMatterIsWrittenAndReadBack(text: String, tags: [String], pinned: Bool, archived: Bool, file: String) {
        #expect(MarkdownNote.render(text: text, tags: tags, pinned: pinned, archived: archived) == file)
        let parsed = MarkdownNote.parse(file)
        #expect(parsed.tags == tags && parsed.pinned == pinned && parsed.archived == archived)
        #expect(NotesClient.trimmingTrailingNewlines(parsed.text) == NotesClient.trimmingTrailingNewlines(text))
    }

    @Test func aFileThatOnlyLooksLikeFrontMatterIsAllText() {
        for file in ["---\ntitle: x\n---\nbody", "---\ntags: work\n---\n", "---\npinned: yes\n---\n", "---\ntags: [a]\nno end"] {
            #expect(MarkdownNote.parse(file).text == file && MarkdownNote.parse(file).tags.isEmpty, "\(file)")
        }
    }

    /// `notes history`'s count of the lines a version adds and removes, which diffs only between the lines both texts
    /// start and end with, counts what the whole diff counts (seeded texts from a few lines, empty ones among them).
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func historyLineCountsAreTheWholeDiffs(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let pool = ["a", "b", "c", "", "d e", "é", "e\u{301}"]
        func text() -> String {
            let lines = (0..<Int(random.next() % 8)).map { _ in pool[Int(random.next() % UInt64(pool.count))] }
            return lines.joined(separator: "\n") + (random.next() % 2 == 0 ? "\n" : "")
        }
        for _ in 0..<500 {
            let old = text()
            let new = text()
            var added = 0
            var removed = 0
            for line in LineDiff.lines(from: old, to: new) {
                if case .added = line { added += 1 }
                if case .removed = line { removed += 1 }
            }
            let counted = History.lineChanges(from: old, to: new)
            #expect(counted.added == added && counted.removed == removed, "\(old.debugDescription) -> \(new.debugDescription)")
        }
    }

    // MARK: - Export and import

    @Test func exportsKeepTagsAndFlagsAndImportsReadThemBack() throws {
        let client = try device()
        let note = try client.add("tagged", tags: ["Work", "idea"])
        try client.pin(note.id)
        try client.archive(note.id)
        _ = try client.add("plain")
        let export = try client.export()
        let tagged = try #require(export.notes.first { $0.text == "tagged" })
        #expect(tagged.tags == ["idea", "Work"] && tagged.pinned == true && tagged.archived == true)
        let plain = try #require(export.notes.first { $0.text == "plain" })
        #expect(plain.tags == nil && plain.pinned == nil && plain.archived == nil, "nothing written for nothing")

        // Through JSON onto another device.
        let data = try JSONEncoder().encode(export)
        let other = try makeDevice(NoNetwork(), seed: 6)
        #expect(try other.importNotes([.export(JSONDecoder().decode(NotesExport.self, from: data))]).added == 2)
        let imported = try #require(try other.notes().first { $0.text == "tagged" })
        #expect(imported.tags == ["idea", "Work"] && imported.isPinned && imported.isArchived)
        try expectTagIndexMatchesNotes(other)

        // An export older than tags still reads.
        let old = #"{"format":"flakenotes-export","version":1,"exportedAt":"2026-01-01T00:00:00.000Z","notes":[{"clientID":"77","origin":"42","text":"old","conflict":false}]}"#
        #expect(try other.importNotes([.export(JSONDecoder().decode(NotesExport.self, from: Data(old.utf8)))]).added == 1)

        // Markdown files.
        let third = try makeDevice(NoNetwork(), seed: 7)
        let file = MarkdownNote.render(text: "from markdown", tags: ["md"], pinned: true, archived: false)
        let report = try third.importNotes([.markdown(file, source: "a.md"), .text("---\ntags: [txt]\n---\nplain text", source: "b.txt")])
        #expect(report.added == 2)
        let md = try #require(try third.notes().first { $0.text == "from markdown" })
        #expect(md.tags == ["md"] && md.isPinned)
        #expect(try third.notes().contains { $0.text == "---\ntags: [txt]\n---\nplain text" && $0.tags.isEmpty }, "a text file is all text")

        // A bad tag refuses the whole import.
        let bad = MarkdownNote.render(text: "x", tags: ["bad tag"], pinned: false, archived: false)
        let error = #expect(throws: NotesError.self) { try third.importNotes([.markdown("fine", source: "c.md"), .markdown(bad, source: "d.md")]) }
        #expect(error?.code == .invalidInput)
        #expect(try third.notes().count == 2)
    }
}
