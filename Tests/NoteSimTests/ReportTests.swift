import Foundation
import MiniFlake
import Testing

@testable import NoteSim

@Suite struct TimelineReportTests {
    /// A recording with one note on the server and on two devices, device 1 holding an older text.
    static func diverged() -> RunRecording {
        var recording = RunRecording()
        let one = try! FlakeID(validating: 111_111_111_111), origin = try! FlakeID(validating: 222_222_222_222)
        recording.notes = [
            .init(label: "t1", originDevice: 0, clientID: one, origin: origin, conflictOf: -1),
            .init(label: "t9", originDevice: 1, clientID: try! FlakeID(validating: 333_333_333_333), origin: origin, conflictOf: -1),
        ]
        recording.texts = ["t1\n", "t1\nt7\n", "t9\n"]
        recording.touches = [
            .init(step: 1, lane: 0, note: 0, kinds: .created, text: 0, state: 0, account: 0),
            .init(step: 2, lane: -1, note: 0, kinds: .stored, text: 0, state: 0, account: 0),
            .init(step: 3, lane: 1, note: 0, kinds: .pulled, text: 0, state: 0, account: 0),
            .init(step: 3, lane: 1, note: 1, kinds: .created, text: 2, state: 0, account: 0),
            .init(step: 4, lane: -1, note: 0, kinds: .changed, text: 1, state: 0, account: 0),
            .init(step: 5, lane: 1, note: 1, kinds: .pushed, text: 2, state: 0, account: 0),
            .init(step: 5, lane: -1, note: 1, kinds: .stored, text: 2, state: 0, account: 0),
        ]
        recording.pending = [[], []]
        return recording
    }

    @Test func aConvergenceViolationInvolvesTheNotesWhoseTextsDiffer() {
        let violation = Violation(step: 6, invariant: .convergence, detail: "device 1 differs from account 0: 0 missing, 0 extra, 1 with other text")
        let found = Involvement.find(violation, in: Self.diverged())
        #expect(found.notes == [0])
        #expect(found.lanes == [-1, 1])
    }

    @Test func aLostTokenOrANamedClientIDInvolvesItsNote() {
        let lost = Violation(step: 6, invariant: .noLostEdit, detail: "account 0 lost t7 (written by device 0); nobody who saw it removed it")
        #expect(Involvement.find(lost, in: Self.diverged()).notes == [0])
        let duplicate = Violation(step: 6, invariant: .noDuplicates, detail: "account 0 holds two notes for client ID 333333333333 origin 222222222222")
        #expect(Involvement.find(duplicate, in: Self.diverged()).notes == [1])
    }

    @Test func thePageIsSelfContainedAndItsDataCannotEndTheScript() throws {
        var outcome = SimOutcome(
            summary: SimSummary(), violation: Violation(step: 4, invariant: .convergence, detail: "device 1 differs from account 0: </script><b>x"),
            events: [SimEvent(step: 2, device: 1, kind: .signIn, detail: "a&b \"x\" </script><img src=x>")])
        outcome.recording = Self.diverged()
        let run = TimelineReport.Run(
            seed: 9, parameters: SimParameters(seed: 9, accounts: 1, devices: 2, steps: 6), steps: Array(repeating: .restartServer, count: 6),
            outcome: outcome, trace: [2, 4], command: "notes-sim --seed 9")
        let html = TimelineReport.render(run)
        for external in ["<script src", "<link", "@import", "url(http", "fetch(", "XMLHttpRequest", "<iframe", "<img"] {
            #expect(!html.contains(external), "\(external)")
        }
        #expect(html.components(separatedBy: "</script>").count == 3, "only the data's and the script's own end tags")
        let data = try #require(Self.data(of: html))
        let violation = try #require(data["violation"] as? [String: Any])
        #expect(violation["trace"] as? [Int] == [2, 4])
        // At step 4 device 1 holds t1's first text and t9, which the server does not have yet.
        #expect(violation["notes"] as? [Int] == [0, 1])
        #expect((data["events"] as? [[String: Any]])?.first?["d"] as? String == "a&b \"x\" </script><img src=x>")
        #expect((data["touches"] as? [Int])?.count == 7 * 7)
        #expect((data["steps"] as? [String])?.count == 5, "steps 0...4: the violation's is the last drawn")
    }

    @Test func aSweepIndexLinksFailingSeedsAndOffersTheOthersOnDemand() throws {
        var failing = SimOutcome(summary: SimSummary(), violation: Violation(step: 3, invariant: .noLostEdit, detail: "lost t3"), events: [])
        failing.duration = .milliseconds(1500)
        let html = SweepReport.render(
            title: "sweep", shape: "2 accounts", seconds: 3,
            rows: [
                .init(seed: 1, outcome: SimOutcome(summary: SimSummary(), violation: nil, events: []), link: nil),
                .init(seed: 2, outcome: failing, link: "sweep-seed-2.html"),
            ], command: "notes-sim --seed {seed} --report seed-{seed}.html", note: nil)
        let data = try #require(Self.data(of: html))
        let seeds = try #require(data["seeds"] as? [[String: Any]])
        #expect(seeds.map { $0["passed"] as? Bool } == [true, false])
        #expect(seeds[1]["link"] as? String == "sweep-seed-2.html" && seeds[1]["seconds"] as? Double == 1.5)
        #expect(seeds[0]["link"] == nil && data["command"] as? String == "notes-sim --seed {seed} --report seed-{seed}.html")
        #expect(SweepReport.timelinePath(forSeed: 17, besideIndex: "/tmp/out/sweep.html") == "/tmp/out/sweep-seed-17.html")
        #expect(SweepReport.timelinePath(forSeed: 3, besideIndex: "/tmp/index") == "/tmp/index-seed-3.html")
    }

    /// The JSON a page carries.
    static func data(of html: String) -> [String: Any]? {
        guard let start = html.range(of: #"<script type="application/json" id="data">"#),
            let end = html.range(of: "</script>", range: start.upperBound..<html.endIndex)
        else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(html[start.upperBound..<end.lowerBound].utf8)) as? [String: Any]
    }
}
