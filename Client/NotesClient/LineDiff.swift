/// A line-by-line difference between two texts (Myers' O(ND) algorithm: a shortest edit script), for showing a
/// conflict copy against its note and for the merge the editor starts from.
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
    /// come before additions where both replace the same stretch.
    public static func lines(from old: String, to new: String) -> [Line] {
        let a = split(old)
        let b = split(new)
        // Common head and tail first: most conflicts differ in a few lines of long texts.
        var head = 0
        while head < a.count && head < b.count && a[head] == b[head] { head += 1 }
        var tail = 0
        while tail < a.count - head && tail < b.count - head && a[a.count - 1 - tail] == b[b.count - 1 - tail] { tail += 1 }
        let middle = myers(Array(a[head..<(a.count - tail)]), Array(b[head..<(b.count - tail)]))
        return a[..<head].map(Line.same) + middle + a[(a.count - tail)...].map(Line.same)
    }

    /// The text's lines (a final newline ends the last line; it does not start an empty one).
    static func split(_ text: String) -> [String] {
        guard !text.isEmpty else { return [] }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if text.hasSuffix("\n") { lines.removeLast() }
        return lines
    }

    /// The shortest edit script from `a` to `b`.
    private static func myers(_ a: [String], _ b: [String]) -> [Line] {
        let n = a.count
        let m = b.count
        if n == 0 { return b.map(Line.added) }
        if m == 0 { return a.map(Line.removed) }
        let max = n + m
        var v = [Int](repeating: 0, count: 2 * max + 2)
        var trace: [[Int]] = []
        var found = false
        for d in 0...max {
            trace.append(v)
            for k in stride(from: -d, through: d, by: 2) {
                var x: Int
                if k == -d || (k != d && v[max + k - 1] < v[max + k + 1]) {
                    x = v[max + k + 1]
                } else {
                    x = v[max + k - 1] + 1
                }
                var y = x - k
                while x < n && y < m && a[x] == b[y] {
                    x += 1
                    y += 1
                }
                v[max + k] = x
                if x >= n && y >= m {
                    found = true
                    break
                }
            }
            if found { break }
        }
        // Walk back through the saved frontiers.
        var result: [Line] = []
        var x = n
        var y = m
        for d in stride(from: trace.count - 1, through: 0, by: -1) {
            let v = trace[d]
            let k = x - y
            let previousK = (k == -d || (k != d && v[max + k - 1] < v[max + k + 1])) ? k + 1 : k - 1
            let previousX = d == 0 ? 0 : v[max + previousK]
            let previousY = previousX - previousK
            while x > previousX && y > previousY {
                result.append(.same(a[x - 1]))
                x -= 1
                y -= 1
            }
            if d > 0 {
                if x == previousX {
                    result.append(.added(b[y - 1]))
                } else {
                    result.append(.removed(a[x - 1]))
                }
            }
            x = previousX
            y = previousY
        }
        return reorder(result.reversed())
    }

    /// Puts each run of removals before the additions mixed into it, so that a replaced stretch reads as
    /// "these lines, then those".
    private static func reorder(_ lines: [Line]) -> [Line] {
        var result: [Line] = []
        var removed: [Line] = []
        var added: [Line] = []
        func flush() {
            result += removed + added
            removed = []
            added = []
        }
        for line in lines {
            switch line {
            case .same: flush(); result.append(line)
            case .removed: removed.append(line)
            case .added: added.append(line)
            }
        }
        flush()
        return result
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
}
