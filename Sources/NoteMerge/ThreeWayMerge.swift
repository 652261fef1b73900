/// A line-based three-way merge (diff3): combines two texts edited concurrently from a common base.
///
/// Texts are compared as UTF-8 bytes, never by Unicode canonical equivalence, so a merge never swaps one byte
/// sequence for another that merely looks the same. A line is the bytes up to and including `\n`; the last line
/// may lack it (so `"a"` and `"a\n"` are different lines) and the empty text has no lines.
///
/// The merge diffs base→ours and base→theirs (``LineDiff/matches(_:_:bounds:)``: Myers' O(ND) algorithm after
/// trimming the common prefix and suffix), then walks the regions between lines that both sides kept: a region changed
/// on one side takes that side, a region changed identically on both sides takes it once, and a region changed
/// differently on both sides (including two different insertions at the same place, or changes in touching lines) is
/// a conflict.
///
/// Cost bound: each diff gives up past ``LineDiff/Bounds/standard`` (1,000 line insertions plus deletions or 10
/// million comparison steps, whichever comes first), and the merge then reports ``Outcome/conflict`` (the caller
/// keeps both texts, so nothing is lost). A merge of two 256 KiB notes takes at most a few tens of milliseconds and
/// about 8 MB of memory, whatever the input.
public enum ThreeWayMerge {
    /// The result of a merge.
    public enum Outcome: Sendable, Equatable {
        /// The edits did not overlap: the merged text.
        case clean(String)
        /// The edits overlapped (or the texts differ too much to diff within the bounds).
        case conflict
    }

    /// Merges `ours` and `theirs`, both edited from `base`.
    public static func merge(base: String, ours: String, theirs: String) -> Outcome {
        if sameBytes(ours, theirs) || sameBytes(theirs, base) { return .clean(ours) }
        if sameBytes(ours, base) { return .clean(theirs) }

        var interner = LineInterner()
        let baseText = split(base, interner: &interner)
        let oursText = split(ours, interner: &interner)
        let theirsText = split(theirs, interner: &interner)

        guard let oursMatch = LineDiff.matches(baseText.ids, oursText.ids, bounds: .standard),
            let theirsMatch = LineDiff.matches(baseText.ids, theirsText.ids, bounds: .standard)
        else { return .conflict }

        var output: [UInt8] = []
        output.reserveCapacity(max(ours.utf8.count, theirs.utf8.count) + 64)
        let nb = baseText.ids.count
        var i = 0, o = 0, t = 0
        while true {
            // A stable run: lines all three texts share at the current positions.
            var run = 0
            while i + run < nb, oursMatch[i + run] == o + run, theirsMatch[i + run] == t + run { run += 1 }
            if run > 0 {
                baseText.append(lines: i..<(i + run), to: &output)
                i += run; o += run; t += run
                continue
            }
            // The next base line both sides kept ends the unstable region.
            var k = i
            while k < nb, oursMatch[k] < 0 || theirsMatch[k] < 0 { k += 1 }
            let baseEnd = k, oursEnd = k < nb ? oursMatch[k] : oursText.ids.count
            let theirsEnd = k < nb ? theirsMatch[k] : theirsText.ids.count
            let baseChunk = baseText.ids[i..<baseEnd]
            let oursChunk = oursText.ids[o..<oursEnd]
            let theirsChunk = theirsText.ids[t..<theirsEnd]
            if oursChunk.elementsEqual(baseChunk) {
                theirsText.append(lines: t..<theirsEnd, to: &output)
            } else if theirsChunk.elementsEqual(baseChunk) || oursChunk.elementsEqual(theirsChunk) {
                oursText.append(lines: o..<oursEnd, to: &output)
            } else {
                return .conflict
            }
            if k >= nb { break }
            i = baseEnd; o = oursEnd; t = theirsEnd
        }
        return .clean(String(decoding: output, as: UTF8.self))
    }

    /// Whether two strings hold the same UTF-8 bytes (Swift's `==` compares canonical equivalence instead).
    @inlinable
    public static func sameBytes(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.utf8.elementsEqual(b.utf8)
    }

    // MARK: - Lines

    /// A text split into lines, each line also as an interned integer.
    struct Lines {
        var bytes: [UInt8]
        /// Start offset of each line in `bytes`, plus one final entry for the end.
        var starts: [Int]
        var ids: [Int]

        func append(lines range: Range<Int>, to output: inout [UInt8]) {
            guard !range.isEmpty else { return }
            output.append(contentsOf: bytes[starts[range.lowerBound]..<starts[range.upperBound]])
        }
    }

    /// Splits a text into lines (each with its `\n`; the last one may lack it), interned by `interner`.
    static func split(_ text: String, interner: inout LineInterner) -> Lines {
        let bytes = Array(text.utf8)
        var starts: [Int] = [0]
        var ids: [Int] = []
        var start = 0
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x0A || index == bytes.count - 1 {
                ids.append(interner.id(of: bytes[start...index]))
                start = index + 1
                starts.append(start)
            }
            index += 1
        }
        return Lines(bytes: bytes, starts: starts, ids: ids)
    }
}
