import Foundation
import MiniFlake
import NoteMerge
import NoteSyncProtocol
import Testing
import TestSupport

@Suite("TagMerge")
struct TagMergeTests {
    @Test func anAdditionOnOneSideAndARemovalOnTheOtherBothTakeEffect() {
        #expect(TagMerge.merge(base: ["home"], ours: ["home", "work"], theirs: []) == ["work"])
        #expect(TagMerge.merge(base: ["home", "idea"], ours: ["idea"], theirs: ["home", "idea", "work"]) == ["idea", "work"])
    }

    @Test func theSameTagAddedOnBothSidesIsOneTagShownAsTheServerWroteIt() {
        #expect(TagMerge.merge(base: [], ours: ["work"], theirs: ["Work"]) == ["Work"])
        #expect(TagMerge.merge(base: [], ours: ["Café"], theirs: ["cafe\u{301}"]) == ["cafe\u{301}"])
        #expect(TagMerge.merge(base: ["x"], ours: ["x", "New"], theirs: ["x"]) == ["New", "x"])
    }

    @Test func aRemovalOnEitherSideWins() {
        #expect(TagMerge.merge(base: ["a", "b"], ours: ["b"], theirs: ["a", "b"]) == ["b"])
        #expect(TagMerge.merge(base: ["a", "b"], ours: ["a", "b"], theirs: ["a"]) == ["a"])
        #expect(TagMerge.merge(base: ["a"], ours: [], theirs: []) == [])
    }

    @Test func aCaseChangeAloneIsNoChange() {
        // The key is unchanged, so the tag is kept, shown as the server shows it.
        #expect(TagMerge.merge(base: ["Work"], ours: ["work"], theirs: ["Work"]) == ["Work"])
    }

    @Test func theResultIsSortedByKeyAndCappedAtTheLimit() {
        let ours = (0..<30).map { "o\($0)" }
        let theirs = (0..<30).map { "t\($0)" }
        let merged = TagMerge.merge(base: [], ours: ["shared"] + ours, theirs: theirs + ["SHARED"])
        #expect(merged.count == TagRules.maxTagsPerNote)
        #expect(merged == TagRules.sorted(merged))
        #expect(merged.contains("SHARED"), "what both sides hold comes first")
        #expect(theirs.allSatisfy(merged.contains), "then the server's additions")
        let keptOfOurs = TagRules.sorted(ours).prefix(TagRules.maxTagsPerNote - 1 - theirs.count)
        #expect(Set(merged) == Set(["SHARED"] + theirs + keptOfOurs), "then ours, in key order")
        #expect(TagRules.violation(in: merged) == nil)
    }

    /// Display variants of twelve tags: the generator picks one spelling per appearance.
    static let pool: [[String]] = [
        ["work", "Work", "WORK"], ["home", "Home"], ["idea", "IDEA"], ["a/b", "A/B"], ["v1.2", "V1.2"], ["日本"],
        ["café", "Cafe\u{301}", "CAFÉ"], ["x_y-z", "X_Y-Z"], ["q4", "Q4"], ["हिंदी"], ["straße", "STRASSE"], ["z9"],
    ]

    /// A set derived from `base` by random removals and additions, each tag in a random spelling.
    static func edit(_ base: [Int], _ rng: inout SplitMix64) -> [Int] {
        var set = Set(base)
        for index in pool.indices where rng.next() % 4 == 0 {
            if set.contains(index) { set.remove(index) } else { set.insert(index) }
        }
        return set.sorted()
    }

    static func spelled(_ indices: [Int], _ rng: inout SplitMix64) -> [String] {
        indices.map { pool[$0][Int(rng.next() % UInt64(pool[$0].count))] }.shuffled(using: &rng)
    }

    /// Against a model of the rule written per key, on seeded random bases and two sides changed from them: the
    /// merge keeps every addition and every removal of both sides, shows the server's spelling, and is a valid set.
    @Test func everyChangeOfBothSidesSurvivesOnRandomSets() {
        for seed in propertySeeds(500) {
            var rng = SplitMix64(seed: seed)
            let baseIndices = (0..<TagMergeTests.pool.count).filter { _ in rng.next() % 2 == 0 }
            let oursIndices = Self.edit(baseIndices, &rng)
            let theirsIndices = Self.edit(baseIndices, &rng)
            let base = Self.spelled(baseIndices, &rng)
            let ours = Self.spelled(oursIndices, &rng)
            let theirs = Self.spelled(theirsIndices, &rng)
            let merged = TagMerge.merge(base: base, ours: ours, theirs: theirs)

            let key = TagRules.key
            let (b, o, t) = (Set(base.map(key)), Set(ours.map(key)), Set(theirs.map(key)))
            var expected: [String: String] = [:]
            for k in o.union(t) where (o.contains(k) && t.contains(k)) || !b.contains(k) {
                expected[k] = theirs.first { key($0) == k } ?? ours.first { key($0) == k }
            }
            #expect(Dictionary(uniqueKeysWithValues: merged.map { (key($0), $0) }) == expected, "seed \(seed)")
            #expect(merged == TagRules.sorted(merged), "seed \(seed)")
            #expect(TagRules.violation(in: merged) == nil, "seed \(seed)")
            // No side's change is lost.
            let result = Set(merged.map(key))
            for side in [o, t] {
                #expect(side.subtracting(b).isSubset(of: result), "seed \(seed): an addition was lost")
                #expect(result.isDisjoint(with: b.subtracting(side)), "seed \(seed): a removal was lost")
            }
            // The sides' roles differ only in the spelling.
            #expect(Set(TagMerge.merge(base: base, ours: theirs, theirs: ours).map(key)) == result, "seed \(seed)")
            // A side that changed nothing takes the other's set.
            #expect(Set(TagMerge.merge(base: base, ours: base, theirs: theirs).map(key)) == t, "seed \(seed)")
            #expect(Set(TagMerge.merge(base: base, ours: ours, theirs: base).map(key)) == o, "seed \(seed)")
            #expect(TagMerge.merge(base: base, ours: ours, theirs: ours) == TagRules.sorted(ours), "seed \(seed)")
        }
    }
}

@Suite("FlagMerge")
struct FlagMergeTests {
    @Test(arguments: [false, true])
    func whicheverSideChangedTheFlagWins(_ base: Bool) {
        // One side changed it: that side wins, whatever the other holds (it can only hold the base or agree).
        #expect(FlagMerge.merge(base: base, ours: !base, theirs: base) == !base)
        #expect(FlagMerge.merge(base: base, ours: base, theirs: !base) == !base)
        // Neither changed it: the base.
        #expect(FlagMerge.merge(base: base, ours: base, theirs: base) == base)
        // Both changed it: they agree.
        #expect(FlagMerge.merge(base: base, ours: !base, theirs: !base) == !base)
    }
}
