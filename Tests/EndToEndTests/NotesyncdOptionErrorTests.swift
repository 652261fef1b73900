import Foundation
import Testing
import TestSupport

/// Issue 15, item 8, with the real binary: a bad option prints one line on stderr and exits 64, as OPERATIONS.md
/// promises. (Failed before: three or four lines, and `--instance -1` was reported as a missing value.)
@Suite(.enabled(if: Binaries.exist(Binaries.notesyncd), "notesyncd is not built"))
struct NotesyncdOptionErrorTests {
    @Test(arguments: [
        (["--instance", "-1"], "instance must be 0...1023, got -1"),
        (["--port", "eighty"], "eighty"),
        (["--no-such-flag"], "no-such-flag"),
        (["--idle-timeout", "0"], "idle timeout"),
    ])
    func oneLineAndExit64(_ arguments: [String], _ expected: String) async throws {
        let (status, output) = try await Subprocess.run(Binaries.notesyncd.path, arguments + ["--data-dir", "/nonexistent/never-created"])
        #expect(status == .exited(64), "\(arguments): \(output)")
        let lines = output.split(separator: "\n", omittingEmptySubsequences: true)
        #expect(lines.count == 1, "\(arguments): \(output)")
        #expect(output.hasPrefix("notesyncd: ") && output.contains(expected), "\(arguments): \(output)")
    }
}
