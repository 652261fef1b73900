import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import NoteSyncProtocol
import NotesClient
import Testing
import TestSupport

/// Issue 28, item 1, with the real binaries on SQLite: an operator's command run as a process of its own (`notesyncd
/// sessions revoke`, `users disable`, `users delete --yes`, `users reset-password`) reaches a pull waiting on the
/// running daemon within about a second: 401 `unauthorized`, long before the wait's deadline. Failed before: the pull
/// got 200 with an empty page at its deadline (20 s here), and only the next request learnt of the sign-out.
@Suite("operator sign-outs reach waiting pulls, end to end", .serialized, .enabled(if: Binaries.exist(Binaries.notesyncd), "build notesyncd first (swift build)"))
struct OperatorSignOutEndToEndTests {
    @Test(arguments: [["sessions", "revoke", "alice", "--all"], ["users", "disable", "alice"], ["users", "delete", "alice", "--yes"], ["users", "reset-password", "alice"]])
    func anOperatorsSignOutAnswersAWaitingPullWithin1Second(command: [String]) async throws {
        let directory = try NotesE2E.temporaryDirectory("operator-sign-out")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = ["--data-dir", directory.appendingPathComponent("data").path]
        let (daemon, metricsURL) = try await Self.startWithMetrics(store, directory: directory)
        defer { daemon.child.stopBlocking() }
        let api = APIClient(transport: URLSessionTransport(baseURL: try #require(URL(string: daemon.url)), timeout: 60))
        let phone = try await api.account("alice")

        let wait = 20
        let started = ContinuousClock.now
        let pull = Task {
            try await api.call(.pull, token: phone.token, query: [(PullQuery.since, "c0"), (PullQuery.wait, "\(wait)")])
        }
        // Until the daemon holds the pull (its gauge of waiting pulls), so the command ends a waiting one.
        while try await Self.waitingPulls(metricsURL) != 1 {
            try #require(ContinuousClock.now - started < .seconds(wait / 2), "the pull never waited")
            try await Task.sleep(for: .milliseconds(20))
        }
        let (status, output) = try await OperatorsEndToEndTests.notesyncd(command + store)
        #expect(status == 0, "\(output)")
        let commandDone = ContinuousClock.now
        let answer = try await pull.value
        let heard = ContinuousClock.now - commandDone
        #expect(answer.status == 401, "\(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
        #expect(answer.errorCode == .unauthorized)
        #expect(heard < .seconds(2), "the waiting pull heard the sign-out after \(heard)")
        #expect(ContinuousClock.now - started < .seconds(wait / 2), "answered near the deadline, not by the sign-out")
    }

    /// A daemon with metrics on a port of their own (whose gauge of waiting pulls tells when the daemon holds the
    /// pull). The port was free a moment before; another test may take it first, so a daemon whose metrics do not
    /// answer is replaced on other ports, twice at most.
    static func startWithMetrics(_ store: [String], directory: URL) async throws -> (DaemonProcess, URL) {
        var failures: [String] = []
        for _ in 0..<3 {
            let port = try DaemonProcess.freePort()
            let metricsURL = try #require(URL(string: "http://127.0.0.1:\(port)/metrics"))
            var started: DaemonProcess?
            do {
                let daemon = try await OperatorsEndToEndTests.start(store + ["--metrics-address", "127.0.0.1:\(port)"], directory: directory)
                started = daemon
                _ = try await waitingPulls(metricsURL)
                // Still running (a daemon that lost its metrics port exits after its listening line).
                let health = try await OperatorsEndToEndTests.client(daemon.url).call(.health)
                guard health.status == 200 else { throw SubprocessError("/healthz answered \(health.status)") }
                return (daemon, metricsURL)
            } catch {
                failures.append("\(port): \(error)")
                started?.child.signal(SIGKILL)
                _ = await started?.child.waitForExit()
            }
        }
        throw SubprocessError("no daemon with metrics: \(failures)")
    }

    /// The daemon's gauge of the waiting pulls it holds.
    static func waitingPulls(_ metricsURL: URL) async throws -> Double? {
        let (data, _) = try await URLSession.shared.data(from: metricsURL)
        return OperatorsEndToEndTests.sample(String(decoding: data, as: UTF8.self), "notesyncd_waiting_pulls")
    }
}
