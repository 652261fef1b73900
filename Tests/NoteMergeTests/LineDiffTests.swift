import MiniFlake
import Testing
import TestSupport

@testable import NoteMerge

@Suite("LineDiff")
struct LineDiffTests {
    typealias Line = LineDiff.Line

    @Test func examples() {
        #expect(LineDiff.lines(from: "", to: "") == [])
        #expect(LineDiff.lines(from: "", to: "a\nb\n") == [.added("a"), .added("b")])
        #expect(LineDiff.lines(from: "a\nb", to: "") == [.removed("a"), .removed("b")])
        // A final newline ends the last line: it does not make one.
        #expect(LineDiff.lines(from: "a", to: "a\n") == [.same("a")])
        #expect(
            LineDiff.lines(from: "title\nline from a\n", to: "title\nline from b\n")
                == [.same("title"), .removed("line from a"), .added("line from b")])
        // A replaced stretch reads "these lines, then those".
        #expect(
            LineDiff.lines(from: "a\nx\ny\nb\n", to: "a\n1\n2\n3\nb\n")
                == [.same("a"), .removed("x"), .removed("y"), .added("1"), .added("2"), .added("3"), .same("b")])
    }

    /// Lines are bytes: a composed and a decomposed "é" are two lines, however alike they look.
    @Test func linesAreComparedAsBytes() {
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed)
        #expect(LineDiff.lines(from: composed, to: decomposed) == [.removed(composed), .added(decomposed)])
    }

    @Test func mergeDraftAndMarkers() {
        let draft = LineDiff.mergeDraft("a\nb\nc\n", "a\nB\nc\n", oldLabel: "note", newLabel: "copy")
        #expect(draft == "a\n<<<<<<< note\nb\n=======\nB\n>>>>>>> copy\nc\n")
        #expect(LineDiff.hasConflictMarkers(draft))
        #expect(!LineDiff.hasConflictMarkers("a\nB\nc\n"))
    }

    /// Texts too far apart to diff within the bounds: the whole of one removed, the whole of the other added.
    @Test func pastTheBoundsEverythingIsReplaced() {
        let old = (0..<1200).map { "old \($0)\n" }.joined()
        let new = (0..<1200).map { "new \($0)\n" }.joined()
        let lines = LineDiff.lines(from: old, to: new)
        #expect(lines.count == 2400)
        #expect(lines.prefix(1200).allSatisfy { if case .removed = $0 { true } else { false } })
        #expect(lines.suffix(1200).allSatisfy { if case .added = $0 { true } else { false } })
    }

    /// On random texts over few distinct lines: the diff spells both texts, keeps a longest common subsequence of
    /// lines (it is a shortest edit script), and puts each stretch's removals before its additions.
    @Test(arguments: propertySeeds(300))
    func randomTextsGiveAShortestReadableScript(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let a = Self.randomLines(using: &rng)
        let b = Self.randomLines(using: &rng)
        let lines = LineDiff.lines(from: a.map { $0 + "\n" }.joined(), to: b.map { $0 + "\n" }.joined())
        var old: [String] = []
        var new: [String] = []
        var same = 0
        var previous: Line?
        for line in lines {
            switch line {
            case .same(let text): old.append(text); new.append(text); same += 1
            case .removed(let text):
                old.append(text)
                if case .added = previous { Issue.record("seed \(seed): a removal after an addition in \(lines)") }
            case .added(let text): new.append(text)
            }
            previous = line
        }
        #expect(old == a, "seed \(seed)")
        #expect(new == b, "seed \(seed)")
        #expect(same == Self.longestCommonSubsequence(a, b), "seed \(seed)")
    }

    static func randomLines(using rng: inout SplitMix64) -> [String] {
        (0..<Int.random(in: 0...12, using: &rng)).map { _ in ["a", "b", "c", "d", ""].randomElement(using: &rng)! }
    }

    static func longestCommonSubsequence(_ a: [String], _ b: [String]) -> Int {
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in stride(from: a.count - 1, through: 0, by: -1) {
            for j in stride(from: b.count - 1, through: 0, by: -1) {
                table[i][j] = a[i] == b[j] ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
            }
        }
        return table[0][0]
    }
}
