import Foundation
import Testing
import TestSupport

/// The real `notes-sim` binary's `--report`: one run writes its timeline; a sweep writes an index and, with every seed
/// passing, no timeline (a passing seed's is written on demand, with the command the index shows).
@Suite(
    "notes-sim --report", .enabled(if: FileManager.default.isExecutableFile(atPath: NotesE2E.simBinary.path), "build notes-sim first (swift build)"))
struct NoteSimReportEndToEndTests {
    @Test func aRunWritesItsTimelineAndASweepItsIndex() async throws {
        let directory = try NotesE2E.temporaryDirectory("sim-report")
        defer { try? FileManager.default.removeItem(at: directory) }
        let run = try await Self.report(
            ["--seed", "2", "--steps", "60", "--devices", "4"], to: directory.appendingPathComponent("run.html"), kind: "timeline")
        #expect(run["devices"] as? Int == 4)
        #expect((run["command"] as? String)?.hasPrefix("notes-sim --seed 2 --steps 60 ") == true)
        let steps = try #require(run["steps"] as? [String])
        let tagSteps = steps.filter { $0.contains("tag") || $0.contains("pins") || $0.contains("archives") }.count
        let attachmentSteps = steps.filter { step in ["attach", "detach", "save", "cut upload", "cutUpload"].contains { step.contains($0) } }.count
        #expect(steps.count == 61 + tagSteps + attachmentSteps, "60 steps, the tag and attachment steps on top of them, and the end: \(steps)")

        let sweepData = try await Self.report(
            ["--seeds", "1..3", "--steps", "40", "--jobs", "2"], to: directory.appendingPathComponent("sweep.html"), kind: "sweep")
        let seeds = try #require(sweepData["seeds"] as? [[String: Any]])
        #expect(seeds.map { $0["seed"] as? Int } == [1, 2, 3] && seeds.allSatisfy { $0["passed"] as? Bool == true && $0["link"] == nil })
        let command = try #require(sweepData["command"] as? String)
        #expect(command.hasPrefix("notes-sim --seed {seed} --steps 40 ") && command.hasSuffix(" --report seed-{seed}.html"))
        let written = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(written == ["run.html", "sweep.html"], "no timeline for a passing seed")
    }

    /// Runs `notes-sim ARGUMENTS --report PAGE` and returns the JSON the page carries, expecting a page of `kind`
    /// (`timeline`, `sweep`).
    static func report(_ arguments: [String], to page: URL, kind: String) async throws -> [String: Any] {
        let run = try await Subprocess.run(NotesE2E.simBinary.path, arguments + ["--report", page.path], timeLimit: .seconds(300))
        try #require(run.status == .exited(0), "\(run.output)")
        let html = try String(contentsOf: page, encoding: .utf8)
        #expect(html.contains("<body data-kind=\"\(kind)\">"))
        return try #require(data(of: html))
    }

    /// The JSON a report page carries.
    static func data(of html: String) -> [String: Any]? {
        guard let start = html.range(of: #"<script type="application/json" id="data">"#),
            let end = html.range(of: "</script>", range: start.upperBound..<html.endIndex)
        else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(html[start.upperBound..<end.lowerBound].utf8)) as? [String: Any]
    }
}
