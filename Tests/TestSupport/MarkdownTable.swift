import Foundation
import SyncHarness

/// The tables of a Markdown document, for tests that check a document against the code (Docs/OPERATIONS.md's
/// option table and its operator JSON fields).
public enum MarkdownTable {
    /// The rows of the first table after the first line that starts with `heading` (the header row and the
    /// `| --- |` line left out), each keyed by its header's cells.
    ///
    /// - Throws: ``SubprocessError`` when there is no such line or no table after it.
    public static func rows(after heading: String, in text: String) throws -> [[String: String]] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(where: { $0.hasPrefix(heading) }) else {
            throw SubprocessError("no line starting with \(heading)")
        }
        guard let first = lines[(start + 1)...].firstIndex(where: { $0.hasPrefix("|") }) else {
            throw SubprocessError("no table after \(heading)")
        }
        let table = lines[first...].prefix { $0.hasPrefix("|") }
        guard table.count >= 2 else { throw SubprocessError("the table after \(heading) has no rows") }
        let header = cells(table[table.startIndex])
        return table.dropFirst(2).map { line in
            Dictionary(zip(header, cells(line)).map { ($0, $1) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// The cells of one table row, trimmed; `\|` is a bar inside a cell, not a separator.
    public static func cells(_ line: String) -> [String] {
        var cells: [String] = []
        var cell = ""
        var escaped = false
        for character in line {
            if escaped {
                cell.append(character == "|" ? "|" : "\\\(character)")
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "|" {
                cells.append(cell.trimmingCharacters(in: .whitespaces))
                cell = ""
            } else {
                cell.append(character)
            }
        }
        // A row starts and ends with a bar: the text before the first and after the last is no cell.
        return Array(cells.dropFirst())
    }

    /// A cell's text without the backticks around it (`` `--port` `` → `--port`).
    public static func code(_ cell: String) -> String {
        cell.hasPrefix("`") && cell.hasSuffix("`") && cell.count >= 2 ? String(cell.dropFirst().dropLast()) : cell
    }
}
