/// A line-based three-way merge (diff3): combines two texts edited concurrently from a common base.
///
/// Texts are compared as UTF-8 bytes, never by Unicode canonical equivalence, so a merge never swaps one byte
/// sequence for another that merely looks the same. A line is the bytes up to and including `\n`; the last line
/// may lack it (so `"a"` and `"a\n"` are different lines) and the empty text has no lines.
///
/// The merge diffs base→ours and base→theirs (Myers' O(ND) algorithm after trimming the common prefix and suffix),
/// then walks the regions between lines that both sides kept: a region changed on one side takes that side, a
/// region changed identically on both sides takes it once, and a region changed differently on both sides (including
/// two different insertions at the same place, or changes in touching lines) is a conflict.
///
/// Cost bound: each diff gives up after ``maxEditDistance`` line insertions plus deletions or ``workBudget``
/// comparison steps, whichever comes first, and the merge then reports ``Outcome/conflict`` (the caller keeps
/// both texts, so nothing is lost). With the defaults a merge of two 256 KiB notes takes at most a few tens of
/// milliseconds and about 8 MB of memory, whatever the input.
public enum ThreeWayMerge {
    /// The result of a merge.
    public enum Outcome: Sendable, Equatable {
        /// The edits did not overlap: the merged text.
        case clean(String)
        /// The edits overlapped (or the texts differ too much to diff within the bounds).
        case conflict
    }

    /// The most line insertions plus deletions one diff may need before the merge gives up.
    public static let maxEditDistance = 1000
    /// The most comparison steps one diff may take before the merge gives up.
    public static let workBudget = 10_000_000

    /// Merges `ours` and `theirs`, both edited from `base`.
    public static func merge(base: String, ours: String, theirs: String) -> Outcome {
        if sameBytes(ours, theirs) || sameBytes(theirs, base) { return .clean(ours) }
        if sameBytes(ours, base) { return .clean(theirs) }

        var interner = LineInterner()
        let baseText = interner.split(base)
        let oursText = interner.split(ours)
        let theirsText = interner.split(theirs)

        guard let oursMatch = matchBase(baseText.ids, oursText.ids),
            let theirsMatch = matchBase(baseText.ids, theirsText.ids)
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

    /// Gives equal byte sequences equal integers, so the diff compares integers.
    struct LineInterner {
        var table: [ArraySlice<UInt8>: Int] = [:]

        mutating func split(_ text: String) -> Lines {
            let bytes = Array(text.utf8)
            var starts: [Int] = [0]
            var ids: [Int] = []
            var start = 0
            var index = 0
            while index < bytes.count {
                if bytes[index] == 0x0A || index == bytes.count - 1 {
                    let line = bytes[start...index]
                    let id: Int
                    if let existing = table[line] {
                        id = existing
                    } else {
                        id = table.count
                        table[line] = id
                    }
                    ids.append(id)
                    start = index + 1
                    starts.append(start)
                }
                index += 1
            }
            return Lines(bytes: bytes, starts: starts, ids: ids)
        }
    }

    // MARK: - Diff

    /// For each line of `a`, the index of the line of `b` it is matched with in a shortest edit script, or -1.
    /// Nil when the diff exceeds the bounds.
    static func matchBase(_ a: [Int], _ b: [Int]) -> [Int]? {
        var match = [Int](repeating: -1, count: a.count)
        var prefix = 0
        while prefix < a.count, prefix < b.count, a[prefix] == b[prefix] {
            match[prefix] = prefix
            prefix += 1
        }
        var suffix = 0
        while suffix < a.count - prefix, suffix < b.count - prefix, a[a.count - 1 - suffix] == b[b.count - 1 - suffix] {
            match[a.count - 1 - suffix] = b.count - 1 - suffix
            suffix += 1
        }
        let aMid = a[prefix..<(a.count - suffix)]
        let bMid = b[prefix..<(b.count - suffix)]
        if aMid.isEmpty || bMid.isEmpty { return match }
        guard let pairs = myers(aMid, bMid) else { return nil }
        for (x, y) in pairs { match[x] = y }
        return match
    }

    /// Myers' greedy shortest-edit-script search; returns the matched index pairs (absolute indices), or nil past
    /// the bounds. Memory is O(D²) for the saved frontiers, D ≤ ``maxEditDistance``.
    static func myers(_ a: ArraySlice<Int>, _ b: ArraySlice<Int>) -> [(Int, Int)]? {
        let n = a.count, m = b.count
        let a0 = a.startIndex, b0 = b.startIndex
        let maxD = min(n + m, maxEditDistance)
        let offset = maxD + 1
        var v = [Int](repeating: 0, count: 2 * maxD + 3)
        var trace: [[Int]] = []
        var work = 0
        var found = -1
        search: for d in 0...maxD {
            for k in stride(from: -d, through: d, by: 2) {
                var x: Int
                if k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1]) {
                    x = v[offset + k + 1]
                } else {
                    x = v[offset + k - 1] + 1
                }
                var y = x - k
                while x < n, y < m, a[a0 + x] == b[b0 + y] {
                    x += 1; y += 1
                    work += 1
                }
                work += 1
                v[offset + k] = x
                if x >= n, y >= m {
                    trace.append(Array(v[(offset - d)...(offset + d)]))
                    found = d
                    break search
                }
            }
            if work > workBudget { return nil }
            trace.append(Array(v[(offset - d)...(offset + d)]))
        }
        guard found >= 0 else { return nil }

        // Walk back through the saved frontiers to recover the matched pairs.
        var pairs: [(Int, Int)] = []
        var x = n, y = m
        var d = found
        while d > 0 {
            let previous = trace[d - 1]  // frontier of d - 1, indexed by k + (d - 1)
            let k = x - y
            let fromAbove = k == -d || (k != d && previous[k - 1 + d - 1] < previous[k + 1 + d - 1])
            let previousK = fromAbove ? k + 1 : k - 1
            let previousX = previous[previousK + d - 1]
            let startX = fromAbove ? previousX : previousX + 1
            let startY = startX - k
            while x > startX, y > startY {
                x -= 1; y -= 1
                pairs.append((a0 + x, b0 + y))
            }
            x = previousX
            y = previousX - previousK
            d -= 1
        }
        while x > 0, y > 0 {
            x -= 1; y -= 1
            pairs.append((a0 + x, b0 + y))
        }
        return pairs
    }
}
