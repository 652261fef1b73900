import Foundation
import MiniFlake
import Testing
import TestSupport

@testable import NoteMerge

@Suite("ThreeWayMerge")
struct ThreeWayMergeTests {
    typealias Outcome = ThreeWayMerge.Outcome

    @Test func trivialCases() {
        #expect(ThreeWayMerge.merge(base: "a\n", ours: "b\n", theirs: "a\n") == .clean("b\n"))
        #expect(ThreeWayMerge.merge(base: "a\n", ours: "a\n", theirs: "c\n") == .clean("c\n"))
        #expect(ThreeWayMerge.merge(base: "a\n", ours: "x\n", theirs: "x\n") == .clean("x\n"))
        #expect(ThreeWayMerge.merge(base: "", ours: "", theirs: "") == .clean(""))
    }

    @Test func nonOverlappingEditsMerge() {
        let base = "one\ntwo\nthree\nfour\nfive\n"
        let ours = "ONE\ntwo\nthree\nfour\nfive\n"
        let theirs = "one\ntwo\nthree\nfour\nFIVE\n"
        #expect(ThreeWayMerge.merge(base: base, ours: ours, theirs: theirs) == .clean("ONE\ntwo\nthree\nfour\nFIVE\n"))
    }

    @Test func insertionsAndDeletionsOnBothSides() {
        let base = "a\nb\nc\nd\ne\n"
        let ours = "a\nnew1\nb\nc\nd\ne\n"  // insert after a
        let theirs = "a\nb\nc\ne\n"  // delete d
        #expect(ThreeWayMerge.merge(base: base, ours: ours, theirs: theirs) == .clean("a\nnew1\nb\nc\ne\n"))
    }

    @Test func overlappingEditsConflict() {
        let base = "a\nb\nc\n"
        #expect(ThreeWayMerge.merge(base: base, ours: "a\nX\nc\n", theirs: "a\nY\nc\n") == .conflict)
        // Touching lines changed on different sides are a conflict too (classic diff3).
        #expect(ThreeWayMerge.merge(base: base, ours: "A\nb\nc\n", theirs: "a\nB\nc\n") == .conflict)
        // Two different insertions at the same place.
        #expect(ThreeWayMerge.merge(base: base, ours: "a\nb\nc\nX\n", theirs: "a\nb\nc\nY\n") == .conflict)
    }

    @Test func identicalChangesOnBothSidesAreClean() {
        let base = "a\nb\nc\nd\n"
        let ours = "a\nB\nc\nD!\n"
        let theirs = "a\nB\nc\nd\n"
        #expect(ThreeWayMerge.merge(base: base, ours: ours, theirs: theirs) == .clean("a\nB\nc\nD!\n"))
    }

    @Test func textsWithoutTrailingNewline() {
        // Last line lacks "\n"; an edit at the top and the end merge.
        #expect(ThreeWayMerge.merge(base: "a\nb\nc", ours: "A\nb\nc", theirs: "a\nb\nC") == .clean("A\nb\nC"))
        // Adding a trailing newline on one side, an edit far away on the other.
        #expect(ThreeWayMerge.merge(base: "a\nb\nc", ours: "a\nb\nc\n", theirs: "A\nb\nc") == .clean("A\nb\nc\n"))
        // Appending on both sides to a line without newline conflicts.
        #expect(ThreeWayMerge.merge(base: "a", ours: "a\nb", theirs: "a\nc") == .conflict)
    }

    @Test func emptyTexts() {
        #expect(ThreeWayMerge.merge(base: "", ours: "x\n", theirs: "") == .clean("x\n"))
        #expect(ThreeWayMerge.merge(base: "", ours: "", theirs: "y\n") == .clean("y\n"))
        #expect(ThreeWayMerge.merge(base: "", ours: "x\n", theirs: "y\n") == .conflict)
        #expect(ThreeWayMerge.merge(base: "a\nb\n", ours: "", theirs: "a\nb\nc\n") == .conflict)
        #expect(ThreeWayMerge.merge(base: "a\nb\nc\n", ours: "a\nc\n", theirs: "") == .conflict)
    }

    @Test func comparesBytesNotCanonicalEquivalence() {
        // "é" precomposed vs decomposed: equal as Swift strings, different bytes. The merge keeps the bytes.
        let composed = "caf\u{E9}\n"
        let decomposed = "cafe\u{301}\n"
        #expect(composed == decomposed)
        #expect(!ThreeWayMerge.sameBytes(composed, decomposed))
        let base = "title\n" + composed + "end\n"
        let ours = "title\n" + decomposed + "end\n"
        let theirs = "TITLE\n" + composed + "end\n"
        guard case .conflict = ThreeWayMerge.merge(base: base, ours: ours, theirs: theirs) else {
            Issue.record("touching edits must conflict")
            return
        }
        let theirsFar = "title\n" + composed + "end\nmore\n"
        let merged = ThreeWayMerge.merge(base: base, ours: ours, theirs: theirsFar)
        guard case .clean(let text) = merged else {
            Issue.record("expected a clean merge")
            return
        }
        #expect(ThreeWayMerge.sameBytes(text, "title\n" + decomposed + "end\nmore\n"))
    }

    @Test func hugeEditDistanceGivesUpAsConflict() {
        // 5,000 lines each replaced on both sides: beyond the edit-distance bound, so the merge declares a conflict
        // quickly instead of searching.
        let base = (0..<5000).map { "base \($0)\n" }.joined()
        let ours = (0..<5000).map { "ours \($0)\n" }.joined()
        let theirs = (0..<5000).map { "theirs \($0)\n" }.joined()
        let start = ContinuousClock.now
        #expect(ThreeWayMerge.merge(base: base, ours: ours, theirs: theirs) == .conflict)
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test func largeNotesWithSmallEditsMergeQuickly() {
        // ~256 KiB of lines, a small edit at each end.
        let lines = (0..<8000).map { "line \($0) of a long note, padded to be realistic...\n" }
        let base = lines.joined()
        var oursLines = lines
        oursLines[10] = "ours changed this line\n"
        var theirsLines = lines
        theirsLines[7990] = "theirs changed this one\n"
        theirsLines.insert("and added one\n", at: 4000)
        var expected = oursLines
        expected[7990] = "theirs changed this one\n"
        expected.insert("and added one\n", at: 4000)
        let start = ContinuousClock.now
        #expect(ThreeWayMerge.merge(base: base, ours: oursLines.joined(), theirs: theirsLines.joined()) == .clean(expected.joined()))
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    // MARK: - Properties

    /// Random texts of lines; each line unique unless `duplicates`, the last maybe without newline.
    static func randomLines(_ count: Int, tag: String, using rng: inout SplitMix64) -> [String] {
        (0..<count).map { "\(tag)-\($0)-\(rng.next() % 1000)\n" }
    }

    @Test func mergeWithUnchangedSideIsTheOtherSide() {
        for seed in propertySeeds(200) {
            var rng = SplitMix64(seed: seed)
            let base = Self.randomText(using: &rng)
            let x = Self.randomText(using: &rng)
            #expect(ThreeWayMerge.merge(base: base, ours: x, theirs: base) == .clean(x), "seed \(seed)")
            #expect(ThreeWayMerge.merge(base: base, ours: base, theirs: x) == .clean(x), "seed \(seed)")
            #expect(ThreeWayMerge.merge(base: base, ours: x, theirs: x) == .clean(x), "seed \(seed)")
        }
    }

    /// A random text over a small alphabet of lines (so lines repeat), maybe without trailing newline.
    static func randomText(using rng: inout SplitMix64) -> String {
        let count = Int(rng.next() % 12)
        var text = (0..<count).map { _ in "l\(rng.next() % 5)\n" }.joined()
        if !text.isEmpty, rng.next() % 3 == 0 { text.removeLast() }
        return text
    }

    @Test func nonOverlappingRandomEditsAlwaysMergeCleanlyWithBothEdits() {
        for seed in propertySeeds(300) {
            var rng = SplitMix64(seed: seed)
            let n = 3 + Int(rng.next() % 40)
            var base = Self.randomLines(n, tag: "b", using: &rng)
            let noFinalNewline = rng.next() % 2 == 0
            if noFinalNewline { base[n - 1].removeLast() }

            // Disjoint regions [start, end) of base lines 0..<n-1 (the last line is never touched), separated by at
            // least one untouched line; each region is replaced (or deleted, or an insertion when empty) by one side.
            struct Edit { var start: Int; var end: Int; var replacement: [String]; var ours: Bool }
            var edits: [Edit] = []
            var position = Int(rng.next() % 3)
            var counter = 0
            while position < n - 1 {
                let length = min(Int(rng.next() % 3), n - 1 - position)
                let replacementCount = Int(rng.next() % 3)
                let replacement = (0..<replacementCount).map { _ -> String in counter += 1; return "new-\(counter)\n" }
                if length > 0 || replacementCount > 0 {
                    edits.append(Edit(start: position, end: position + length, replacement: replacement, ours: rng.next() % 2 == 0))
                }
                position += length + 1 + Int(rng.next() % 3)
            }
            func apply(_ selected: [Edit]) -> String {
                var result: [String] = []
                var index = 0
                for edit in selected {
                    result += base[index..<edit.start]
                    result += edit.replacement
                    index = edit.end
                }
                result += base[index...]
                return result.joined()
            }
            let ours = apply(edits.filter(\.ours))
            let theirs = apply(edits.filter { !$0.ours })
            let expected = apply(edits)
            let merged = ThreeWayMerge.merge(base: base.joined(), ours: ours, theirs: theirs)
            #expect(merged == .clean(expected), "seed \(seed)")
        }
    }

    @Test func mergeNeverLosesAnEditWhenClean() {
        // Whatever the inputs, a clean merge contains every line either side added (lines unique to a side).
        for seed in propertySeeds(300) {
            var rng = SplitMix64(seed: seed)
            let base = Self.randomText(using: &rng)
            var ours = Self.randomText(using: &rng)
            var theirs = Self.randomText(using: &rng)
            ours += "ours-only\n"
            theirs = "theirs-only\n" + theirs
            if case .clean(let merged) = ThreeWayMerge.merge(base: base, ours: ours, theirs: theirs) {
                #expect(merged.contains("ours-only\n"), "seed \(seed)")
                #expect(merged.contains("theirs-only\n"), "seed \(seed)")
            }
        }
    }
}
