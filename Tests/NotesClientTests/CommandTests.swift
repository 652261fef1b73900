import ArgumentParser
import Foundation
import MiniFlake
import NotesClient
import Testing
import TestSupport

@testable import NotesCommand

@Suite("The notes command")
struct CommandTests {
    @Test func subcommandsParse() throws {
        #expect(try Notes.parseAsRoot(["add", "buy", "milk", "--home", "/tmp/x"]) is Add)
        #expect(try Notes.parseAsRoot(["list", "--all", "--json"]) is List)
        #expect(try Notes.parseAsRoot(["rm", "0ABC"]) is Remove)
        #expect(try Notes.parseAsRoot(["logout", "--wipe", "--yes"]) is Logout)
        #expect(throws: (any Error).self) { try Notes.parseAsRoot(["search"]) }
        #expect(throws: (any Error).self) { try Notes.parseAsRoot(["signup", "--server", "http://x"]) }
        #expect(throws: (any Error).self) { try Notes.parseAsRoot(["frobnicate"]) }
        let add = try #require(try Notes.parseAsRoot(["add", "buy", "milk"]) as? Add)
        #expect(add.text == ["buy", "milk"])
    }

    /// Issue 31's commands: `-home` takes a tag off (it is no option), `--json` still is one.
    @Test func tagAndHistoryCommandsParse() throws {
        let tag = try #require(try Notes.parseAsRoot(["tag", "7F3K", "+work", "-home", "idea", "--json"]) as? TagNote)
        #expect(tag.id == "7F3K" && tag.options.json)
        #expect(tag.parsed.adding == ["work", "idea"] && tag.parsed.removing == ["home"])
        // -h alone asks for help; after `--` it takes the tag h off.
        #expect(try !(Notes.parseAsRoot(["tag", "7F3K", "-h"]) is TagNote))
        let short = try #require(try Notes.parseAsRoot(["tag", "7F3K", "--", "-h", "+x"]) as? TagNote)
        #expect(short.parsed.removing == ["h"] && short.parsed.adding == ["x"], "\(short.changes)")
        #expect(throws: (any Error).self) { try Notes.parseAsRoot(["tag", "7F3K"]) }
        let add = try #require(try Notes.parseAsRoot(["add", "-t", "work", "--tag", "idea", "text"]) as? Add)
        #expect(add.tags == ["work", "idea"] && add.text == ["text"])
        let list = try #require(try Notes.parseAsRoot(["list", "--tag", "a", "-t", "b", "--archived"]) as? List)
        #expect(list.filter == ListingFilter(archived: .only, tags: ["a", "b"]))
        #expect(try #require(try Notes.parseAsRoot(["ls", "--all"]) as? List).filter == .all)
        #expect(throws: (any Error).self) { try Notes.parseAsRoot(["list", "--all", "--archived"]) }
        #expect(try Notes.parseAsRoot(["tags"]) is TagList)
        #expect(try Notes.parseAsRoot(["pin", "7F3K"]) is Pin)
        #expect(try Notes.parseAsRoot(["unarchive", "7F3K"]) is Unarchive)
        #expect(try Notes.parseAsRoot(["history", "7F3K"]) is History)
        let diff = try #require(try Notes.parseAsRoot(["diff", "7F3K", "2", "5"]) as? Diff)
        #expect(diff.from == 2 && diff.to == 5)
        #expect(try #require(try Notes.parseAsRoot(["show", "7F3K", "--version", "3"]) as? Show).version == 3)
        #expect(try #require(try Notes.parseAsRoot(["restore", "7F3K", "--version", "3"]) as? Restore).version == 3)
        #expect(throws: (any Error).self) { try Notes.parseAsRoot(["show", "7F3K", "--version", "0"]) }
    }

    @Test func exitStatuses() {
        #expect(ExitStatus.for(NotesError(.noteNotFound, "x")) == .failure)
        #expect(ExitStatus.for(NotesError(.serverUnreachable, "x")) == .unavailable)
        #expect(ExitStatus.for(NotesError(.serverError, "x", httpStatus: 503)) == .unavailable)
        #expect(ExitStatus.for(NotesError(.serverError, "x", httpStatus: 409)) == .failure)
        #expect(ExitStatus.for(NotesError(.signedOutByServer, "x")) == .authentication)
        #expect(ExitStatus.for(NotesError(.invalidInput, "x")) == .usage)
    }

    @Test(arguments: [
        ("hello", "hello"), ("\n\n   hello  \nworld", "hello"), ("  \t\n\u{00A0}\n second ", "second"), ("   ", ""),
        ("\u{3000}wide\u{3000}", "wide"), ("é\n", "é"),
    ])
    func titles(text: String, title: String) throws {
        let client = try makeDevice(NoNetwork(), seed: 1)
        let note = try client.add(text.allSatisfy(\.isWhitespace) ? "x" : text)
        if text.allSatisfy(\.isWhitespace) { return }
        #expect(note.title == title)
        #expect(try client.listing().notes.first?.title == title)
    }

    @Test func listingLines() throws {
        let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        let client = try makeDevice(NoNetwork(), seed: 4, clock: clock)
        let first = try client.add("first line\nsecond line")
        clock.advance(milliseconds: 60_000)
        let gone = try client.add("to delete")
        try client.delete(gone.id)
        let listing = try client.listing(.all)
        #expect(listing.notes.map(\.id) == [gone.id, first.id])
        #expect(listing.displayIDs == (try client.displayIDs()))
        let text = String(decoding: NotesCommand.listing(listing.notes, ids: listing.displayIDs), as: UTF8.self)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix(listing.displayIDs[gone.id]!) && lines[0].hasSuffix("(deleted)"))
        #expect(lines[1].hasSuffix("  first line"))
        #expect(try client.listing().notes.map(\.id) == [first.id])
    }
}

/// Issue 30: the progress line of a long pull says how many notes of how many, the rate, and the time left.
@Suite("Progress line")
struct ProgressLineTests {
    @Test func aLongPullShowsItsCountTotalRateAndTimeLeft() {
        let start = ContinuousClock.now
        let later = start.advanced(by: .seconds(4))
        let text = ProgressLine.pullingText(
            SyncProgress(phase: .pulling, done: 41_000, total: 200_000), since: (start, 1_000), now: later)
        #expect(text == "Receiving notes: \(41_000.formatted()) of \(200_000.formatted()) (20%), \(10_000.formatted())/s, about 16 s left")
        // Before a rate can be told, and from a server that gives no total.
        #expect(ProgressLine.pullingText(SyncProgress(phase: .pulling, done: 1_000, total: nil), since: nil, now: later)
            == "Receiving notes: \(1_000.formatted())")
        #expect(ProgressLine.duration(125) == "2 min 5 s")
    }
}
