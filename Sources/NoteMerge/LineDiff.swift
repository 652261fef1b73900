/// A line-by-line difference between two texts: Myers' O(ND) algorithm (a shortest edit script), the one diff of
/// the package. ``ThreeWayMerge`` diffs through ``matches(_:_:bounds:)``; a device shows a conflict copy against its
/// note with ``lines(from:to:)`` and starts a merge in the editor from ``mergeDraft(_:_:oldLabel:newLabel:)``.
///
/// Lines are compared as UTF-8 bytes, never by Unicode canonical equivalence: two lines that merely look the same
/// are different lines.
public enum LineDiff {
    /// One line of the difference.
    public enum Line: Sendable, Equatable {
        /// In both texts.
        case same(String)
        /// Only in the first (old) text.
        case removed(String)
        /// Only in the second (new) text.
        case added(String)
    }

    /// The lines of `old` and `new` in order, each marked as in both, only in `old`, or only in `new`; removals
    /// come before additions where both replace the same stretch. A final newline ends the last line (it does not
    /// start an empty one), so `"a"` and `"a\n"` have the same lines. Past ``Bounds/standard`` (texts too far apart
    /// to diff cheaply) every line of `old` is removed and every line of `new` added.
    public static func lines(from old: String, to new: String) -> [Line] {
        let a = split(old)
        let b = split(new)
        var interner = LineInterner()
        let aIDs = a.map { interner.id(of: ArraySlice($0.utf8)) }
        let bIDs = b.map { interner.id(of: ArraySlice($0.utf8)) }
        let match = matches(aIDs, bIDs, bounds: .standard) ?? [Int](repeating: -1, count: a.count)
        // Between two matched lines: the removals, then the additions.
        var result: [Line] = []
        result.reserveCapacity(max(a.count, b.count))
        var nextB = 0
        var unmatchedA: [String] = []
        for (x, y) in match.enumerated() {
            guard y >= 0 else {
                unmatchedA.append(a[x])
                continue
            }
            result += unmatchedA.map(Line.removed) + b[nextB..<y].map(Line.added)
            unmatchedA = []
            result.append(.same(a[x]))
            nextB = y + 1
        }
        return result + unmatchedA.map(Line.removed) + b[nextB...].map(Line.added)
    }

    /// The text's lines (a final newline ends the last line; it does not start an empty one).
    static func split(_ text: String) -> [String] {
        guard !text.isEmpty else { return [] }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if text.hasSuffix("\n") { lines.removeLast() }
        return lines
    }

    /// The text a person merges in the editor: the lines both have, and each stretch where they differ between
    /// conflict markers, `old`'s lines first.
    public static func mergeDraft(_ old: String, _ new: String, oldLabel: String, newLabel: String) -> String {
        var output: [String] = []
        var removed: [String] = []
        var added: [String] = []
        func flush() {
            guard !removed.isEmpty || !added.isEmpty else { return }
            output.append("<<<<<<< \(oldLabel)")
            output += removed
            output.append("=======")
            output += added
            output.append(">>>>>>> \(newLabel)")
            removed = []
            added = []
        }
        for line in lines(from: old, to: new) {
            switch line {
            case .same(let text): flush(); output.append(text)
            case .removed(let text): removed.append(text)
            case .added(let text): added.append(text)
            }
        }
        flush()
        return output.joined(separator: "\n") + "\n"
    }

    /// Whether a merged text still holds a conflict marker line.
    public static func hasConflictMarkers(_ text: String) -> Bool {
        split(text).contains { $0.hasPrefix("<<<<<<< ") || $0 == "=======" || $0.hasPrefix(">>>>>>> ") }
    }

    // MARK: - The diff

    /// How much one diff may cost before it gives up.
    public struct Bounds: Sendable, Equatable {
        /// The most line insertions plus deletions.
        public var maxEditDistance: Int
        /// The most comparison steps.
        public var workBudget: Int

        /// 1,000 edits or 10 million steps: two 256 KiB notes diff in a few tens of milliseconds and about 8 MB.
        public static let standard = Bounds(maxEditDistance: 1000, workBudget: 10_000_000)
    }

    /// For each line of `a` (interned: equal lines are equal integers), the index of the line of `b` it is matched
    /// with in a shortest edit script, or -1. Nil when the diff exceeds `bounds`.
    static func matches(_ a: [Int], _ b: [Int], bounds: Bounds) -> [Int]? {
        var match = [Int](repeating: -1, count: a.count)
        // Common head and tail first: most edits change a few lines of long texts.
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
        guard let pairs = myers(aMid, bMid, bounds: bounds) else { return nil }
        for (x, y) in pairs { match[x] = y }
        return match
    }

    /// Myers' greedy shortest-edit-script search; returns the matched index pairs (absolute indices), or nil past
    /// `bounds`. Memory is O(D²) for the saved frontiers, D ≤ ``Bounds/maxEditDistance``.
    static func myers(_ a: ArraySlice<Int>, _ b: ArraySlice<Int>, bounds: Bounds) -> [(Int, Int)]? {
        let n = a.count, m = b.count
        let a0 = a.startIndex, b0 = b.startIndex
        let maxD = min(n + m, bounds.maxEditDistance)
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
            if work > bounds.workBudget { return nil }
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

/// Gives equal byte sequences equal integers, so a diff compares integers.
struct LineInterner {
    var table: [ArraySlice<UInt8>: Int] = [:]

    /// The line's integer: a new one for bytes not seen before.
    mutating func id(of line: ArraySlice<UInt8>) -> Int {
        if let existing = table[line] { return existing }
        let id = table.count
        table[line] = id
        return id
    }
}
