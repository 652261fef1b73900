import Foundation
import Testing

/// Issue 15, item 9: nothing in the repository names a path of one machine (scripts find files relative to
/// themselves). Failed before: Benchmarks/loadgen/run.sh fell back to /work/shared/....
@Suite struct RepositoryHygieneTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Text files under the folders people and scripts use (the build folder and git's own are skipped).
    static func textFiles() throws -> [URL] {
        let extensions: Set<String> = ["sh", "py", "swift", "md", "yaml", "yml", "lua", "patch", "txt", "json", ""]
        var files: [URL] = []
        for folder in ["Benchmarks", "Client", "Docs", "Fuzz", "Server", "Simulation", "Sources", "Tests", "scripts", ".ci"] {
            let url = root.appendingPathComponent(folder)
            guard let walker = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey]) else { continue }
            for case let file as URL in walker {
                if file.path.contains("/.build") || file.path.contains("/results/") { continue }
                guard (try? file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true else { continue }
                if extensions.contains(file.pathExtension) { files.append(file) }
            }
        }
        for name in ["README.md", "Package.swift"] { files.append(root.appendingPathComponent(name)) }
        return files
    }

    @Test func noAbsolutePathOfOneMachine() throws {
        let forbidden = try Regex(#"(^|[^A-Za-z0-9_.~$-])/(work|root|home|Users|opt/swift-packages)/"#)
        var offenders: [String] = []
        for file in try Self.textFiles() where file.lastPathComponent != "RepositoryHygieneTests.swift" {
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { continue }
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.firstMatch(of: forbidden) != nil {
                offenders.append("\(file.path.dropFirst(Self.root.path.count + 1)):\(number + 1): \(line)")
            }
        }
        #expect(offenders.isEmpty, "\(offenders.joined(separator: "\n"))")
        #expect(try Self.textFiles().count > 100, "the walk saw the repository")
    }
}
