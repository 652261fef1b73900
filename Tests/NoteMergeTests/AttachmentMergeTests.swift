import Foundation
import MiniFlake
import NoteMerge
import NoteSyncProtocol
import Testing
import TestSupport

@Suite("AttachmentMerge")
struct AttachmentMergeTests {
    /// A manifest of a one-chunk file named `name` whose content is told apart by `content`.
    static func file(_ name: String, _ content: UInt8 = 1) -> AttachmentManifest {
        let hash = ContentHash(digest: [UInt8](repeating: content, count: 32))
        return AttachmentManifest(name: name, size: Int64(content), mediaType: "image/png", chunks: [hash], sha256: hash)
    }

    static func merge(_ base: [AttachmentManifest], _ ours: [AttachmentManifest], _ theirs: [AttachmentManifest]) -> [AttachmentManifest] {
        AttachmentMerge.merge(base: base, ours: ours, theirs: theirs)
    }

    @Test func aSideThatDidNotChangeANameTakesTheOthers() {
        let a = Self.file("a.png"), b = Self.file("b.png"), c = Self.file("c.png")
        // Ours added c, theirs removed b: both take effect.
        #expect(Self.merge([a, b], [a, b, c], [a]) == [a, c])
        // Theirs modified a, ours left it: theirs'; ours modified b, theirs left it: ours'.
        let a2 = Self.file("a.png", 2), b2 = Self.file("b.png", 2)
        #expect(Self.merge([a, b], [a, b2], [a2, b]) == [a2, b2])
        // Both removed, both unchanged, both made the same change.
        #expect(Self.merge([a, b], [b], [b]) == [b])
        #expect(Self.merge([a], [a], [a]) == [a])
        #expect(Self.merge([a], [a2], [a2]) == [a2])
        #expect(Self.merge([], [c], [c]) == [c])
    }

    @Test func aModificationBeatsARemoval() {
        let a = Self.file("a.png"), a2 = Self.file("a.png", 2)
        #expect(Self.merge([a], [a2], []) == [a2])
        #expect(Self.merge([a], [], [a2]) == [a2])
    }

    @Test func twoDifferentChangesOfOneNameKeepBothThePushedOneRenamed() {
        let a = Self.file("photo.png"), ours = Self.file("photo.png", 2), theirs = Self.file("photo.png", 3)
        let renamed = AttachmentManifest(name: "photo (2).png", size: ours.size, mediaType: ours.mediaType, chunks: ours.chunks, sha256: ours.sha256)
        #expect(Self.merge([a], [ours], [theirs]) == [renamed, theirs])
        // Both added a different file of one name.
        #expect(Self.merge([], [ours], [theirs]) == [renamed, theirs])
        // The renamed copy never takes a name already held, by either side.
        let taken = Self.file("photo (2).png", 9)
        let merged = Self.merge([a], [ours], [theirs, taken])
        #expect(merged.map(\.name) == ["photo (2).png", "photo (3).png", "photo.png"])
        #expect(merged[1].sha256 == ours.sha256 && merged[0] == taken)
    }

    @Test func renamingKeepsTheExtensionAndTheNameRules() {
        #expect(AttachmentMerge.renamed("photo.png", index: 2) == "photo (2).png")
        #expect(AttachmentMerge.renamed("archive.tar.gz", index: 3) == "archive.tar (3).gz")
        #expect(AttachmentMerge.renamed("notes", index: 2) == "notes (2)")
        #expect(AttachmentMerge.renamed(".profile", index: 2) == ".profile (2)")
        let long = String(repeating: "é", count: 127) + ".png"
        let renamed = AttachmentMerge.renamed(long, index: 12)
        #expect(renamed.hasSuffix(" (12).png") && renamed.utf8.count <= AttachmentManifest.maxNameBytes)
        #expect(AttachmentManifest.isAcceptableName(renamed))
        let longExtension = "x." + String(repeating: "e", count: 250)
        let shortened = AttachmentMerge.renamed(longExtension, index: 2)
        #expect(shortened.hasSuffix(" (2)") && AttachmentManifest.isAcceptableName(shortened))
    }

    @Test func theResultIsSortedAndCappedAtTheLimit() throws {
        let limit = AttachmentRules.maxAttachmentsPerNote
        let theirs = (0..<60).map { Self.file("t\($0)") }
        let ours = (0..<60).map { Self.file("o\($0)") }
        let merged = Self.merge([], ours, theirs)
        #expect(merged.count == limit)
        #expect(merged == AttachmentRules.sorted(merged))
        #expect(theirs.allSatisfy(merged.contains), "the server's names come first")
        #expect(AttachmentRules.violation(in: merged) == nil)
    }

    /// Whatever the three sets, the result is a valid set, holds every name both sides kept unchanged from the base,
    /// and loses no file that either side added or modified (while the limit allows).
    @Test func mergedSetsAreValidAndLoseNoChangedFile() {
        let names = ["a.png", "b", "a (2).png", ".x"]
        for seed in propertySeeds(300) {
            var rng = SplitMix64(seed: seed)
            func randomSet() -> [AttachmentManifest] {
                names.compactMap { rng.next() % 3 == 0 ? nil : Self.file($0, UInt8(1 + rng.next() % 3)) }
            }
            let base = randomSet(), ours = randomSet(), theirs = randomSet()
            let merged = Self.merge(base, ours, theirs)
            #expect(AttachmentRules.violation(in: merged) == nil, "seed \(seed)")
            #expect(merged == AttachmentRules.sorted(merged), "seed \(seed)")
            let contents = Set(merged.map(\.sha256))
            for side in [ours, theirs] {
                for manifest in side where !base.contains(manifest) {
                    #expect(contents.contains(manifest.sha256), "seed \(seed): \(manifest.name) lost")
                }
            }
            #expect(Self.merge(base, ours, ours) == AttachmentRules.sorted(ours), "seed \(seed)")
            #expect(Self.merge(base, base, theirs) == AttachmentRules.sorted(theirs), "seed \(seed)")
        }
    }
}
