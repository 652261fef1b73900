import Foundation
import Testing
import TestSupport

@testable import NoteSim

/// Headless Chromium for the report tests: `FLAKENOTES_CHROMIUM` when set (nil if it is not executable), else
/// Debian's `chromium` on the path
/// (scripts/install-deps.sh installs it; scripts/test.sh sets `FLAKENOTES_REQUIRE_CHROMIUM=1`, so a missing browser
/// fails the run instead of skipping these tests).
enum Browser {
    static let path: String? = {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["FLAKENOTES_CHROMIUM"], !path.isEmpty {
            return FileManager.default.isExecutableFile(atPath: path) ? path : nil
        }
        for directory in (environment["PATH"] ?? "/usr/bin").split(separator: ":") {
            for name in ["chromium", "chromium-browser"] {
                let candidate = "\(directory)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
        }
        return nil
    }()
    static let required = ProcessInfo.processInfo.environment["FLAKENOTES_REQUIRE_CHROMIUM"] == "1"

    /// Opens `html` in headless Chromium at `width` × `height` (`--no-sandbox`: CI runs as root), lets its scripts
    /// run, and returns what the probe measured once the page loaded: the page's width against the window's, the
    /// legend, the focused step and where it is, the lanes, and any script error.
    static func measure(_ html: String, width: Int = 1400, height: Int = 1800) async throws -> [String: Any] {
        let chromium = try #require(path, "headless Chromium is needed (apt-get install chromium, or set FLAKENOTES_CHROMIUM)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("report-browser-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let page = directory.appendingPathComponent("report.html")
        let probed = html.replacingOccurrences(of: "</body></html>", with: "<script>\(probe)</script></body></html>")
        try probed.write(to: page, atomically: true, encoding: .utf8)
        let dom = directory.appendingPathComponent("dom.html").path
        let child = try Subprocess.spawn(
            chromium,
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--user-data-dir=\(directory.appendingPathComponent("profile").path)", "--window-size=\(width),\(height)",
                "--virtual-time-budget=5000", "--dump-dom", page.absoluteString,
            ], stdout: .file(dom), stderr: .null)
        let status = await child.waitForExit(timeLimit: .seconds(120))
        let output = (try? String(contentsOfFile: dom, encoding: .utf8)) ?? ""
        guard let start = output.range(of: "<pre id=\"probe\">"), let end = output.range(of: "</pre>", range: start.upperBound..<output.endIndex)
        else {
            Issue.record("chromium (\(status)) dumped no probe: \(output.prefix(500))")
            return [:]
        }
        let json = output[start.upperBound..<end.lowerBound]
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&")
        return try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    }

    /// Runs at the page's load event; writes its measurements into `<pre id="probe">` for `--dump-dom`. The focused
    /// step is in view when it is inside both the timeline's scrolled area and the window.
    static let probe = """
        window.addEventListener("load", function () {
          var r = {}, root = document.documentElement;
          r.pageWidth = root.scrollWidth; r.windowWidth = root.clientWidth;
          r.error = document.body.getAttribute("data-error");
          r.legendItems = document.querySelectorAll("#legend .item").length;
          r.lanes = Array.prototype.map.call(document.querySelectorAll(".lanehead div"), function (d) { return d.textContent.trim(); });
          var cursor = document.querySelector("#tl [aria-current=step]"), scroller = document.getElementById("scroller");
          r.focusedStep = cursor ? Number(cursor.getAttribute("data-step")) : null;
          if (cursor && scroller) {
            var c = cursor.getBoundingClientRect(), s = scroller.getBoundingClientRect();
            r.focusedInView = c.top >= s.top && c.bottom <= s.bottom && c.top >= 0 && c.bottom <= window.innerHeight;
          }
          r.violation = !!document.getElementById("violation");
          r.followedRings = document.querySelectorAll("#tl circle.ring").length;
          r.traceChips = document.querySelectorAll("#violation .chip.trace").length;
          r.seedRows = Array.prototype.map.call(document.querySelectorAll("#seeds tr[id]"), function (t) { return t.id; });
          var pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(r);
          document.body.appendChild(pre);
        });
        """
}

@Suite(
    "reports in headless Chromium", .serialized,
    .enabled(if: Browser.path != nil || Browser.required, "chromium is not installed (scripts/install-deps.sh installs it)"))
struct ReportBrowserTests {
    /// An eight-device run that fails at step 100: the page fits 1400 px with no horizontal scroll bar, has its
    /// legend, and opens on the failing step (the timeline's cursor on it, scrolled into view), with the notes
    /// involved followed and the shortened trace listed.
    @Test func aFailingRunOfEightDevicesOpensOnItsFailingStepAndFitsTheWindow() async throws {
        let parameters = SimParameters(seed: 3, accounts: 3, devices: 8, steps: 160, faultRate: 0.1, watchers: 2)
        let steps = ScheduleGenerator.generate(parameters)
        var outcome = try await Simulation.run(steps, parameters: parameters, recordEvents: true)
        try #require(outcome.violation == nil)
        // The run passed; the page is drawn as for a violation of convergence found after step 100 (what a planted
        // bug gives; scripts/check-planted-bugs.sh), on a device and an account that hold notes by then.
        let recording = try #require(outcome.recording)
        let late = try #require(recording.touches.last { $0.step <= 100 && $0.lane >= 0 && $0.account >= 0 })
        outcome.violation = Violation(
            step: 100, invariant: .convergence, detail: "device \(late.lane) differs from account \(late.account): 0 missing, 0 extra, 1 with other text")
        let html = TimelineReport.render(
            .init(seed: 3, parameters: parameters, steps: steps, outcome: outcome, trace: [0, 4, 57, 99, 100], command: "notes-sim --seed 3"))
        let page = try await Browser.measure(html)
        #expect(page["error"] is NSNull, "\(page)")
        #expect(try #require(page["pageWidth"] as? Int) <= (try #require(page["windowWidth"] as? Int)), "a horizontal scroll bar: \(page)")
        #expect(page["lanes"] as? [String] == ["step", "server"] + (0..<8).map { "device \($0)" + ($0 < 2 ? " watching" : "") })
        #expect((page["legendItems"] as? Int ?? 0) >= 17, "\(page)")
        #expect(page["violation"] as? Bool == true)
        #expect(page["focusedStep"] as? Int == 100, "\(page)")
        #expect(page["focusedInView"] as? Bool == true, "\(page)")
        #expect(page["traceChips"] as? Int == 5)
    }

    /// A passing run opens at its start; a sweep's index lists its failing seed first.
    @Test func aPassingRunAndASweepIndexFitTheWindow() async throws {
        let parameters = SimParameters(seed: 4, accounts: 2, devices: 3, steps: 80, faultRate: 0.05, watchers: 1)
        let steps = ScheduleGenerator.generate(parameters)
        let outcome = try await Simulation.run(steps, parameters: parameters, recordEvents: true)
        let passing = try await Browser.measure(
            TimelineReport.render(.init(seed: 4, parameters: parameters, steps: steps, outcome: outcome, command: "notes-sim --seed 4")))
        #expect(passing["error"] is NSNull, "\(passing)")
        #expect(try #require(passing["pageWidth"] as? Int) <= (try #require(passing["windowWidth"] as? Int)))
        #expect(passing["violation"] as? Bool == false && passing["focusedStep"] as? Int == 0)

        var failing = outcome
        failing.violation = Violation(step: 7, invariant: .noLostEdit, detail: "account 0 lost t3")
        let index = SweepReport.render(
            title: "sweep", shape: "shape", seconds: 2,
            rows: [
                .init(seed: 1, outcome: outcome, link: nil), .init(seed: 2, outcome: failing, link: "sweep-seed-2.html"),
                .init(seed: 3, outcome: outcome, link: nil),
            ], command: "notes-sim --seed {seed} --report seed-{seed}.html", note: nil)
        let sweep = try await Browser.measure(index)
        #expect(sweep["error"] is NSNull, "\(sweep)")
        #expect(sweep["seedRows"] as? [String] == ["seed-2", "seed-1", "seed-3"])
        #expect(try #require(sweep["pageWidth"] as? Int) <= (try #require(sweep["windowWidth"] as? Int)))
    }
}

/// Chromium must not be skipped where the run asked for it (scripts/test.sh sets `FLAKENOTES_REQUIRE_CHROMIUM=1`).
@Test func chromiumIsInstalledWhereRequired() {
    if Browser.required {
        #expect(Browser.path != nil, "FLAKENOTES_REQUIRE_CHROMIUM=1 but no chromium on the path (scripts/install-deps.sh installs it)")
    }
}
