import Foundation
import Testing
import TestSupport

/// The files in `deploy/`: the systemd units pass `systemd-analyze verify` (an unknown key, a typo in a section or a
/// missing executable is reported there), with the built `notesyncd` standing in for `/usr/local/bin/notesyncd`.
@Suite("deployment files")
struct DeploymentTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy")

    static func which(_ program: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(program)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    static let units = ["notesyncd.service", "notesyncd-backup.service", "notesyncd-backup.timer"]

    @Test func systemdUnitsVerify() async throws {
        guard let analyze = Self.which("systemd-analyze") else {
            print("deployment files: systemd-analyze is not installed; skipping the unit check (apt-get install systemd)")
            return
        }
        try #require(Binaries.exist(Binaries.notesyncd), "build notesyncd first (swift build)")
        let directory = try makeTemporaryDirectory("units")
        defer { try? FileManager.default.removeItem(at: directory) }
        for unit in Self.units {
            let text = try String(contentsOf: Self.deploy.appendingPathComponent(unit), encoding: .utf8)
            #expect(unit.hasSuffix(".timer") || text.contains("/usr/local/bin/notesyncd"), "\(unit) runs the installed binary")
            try text.replacingOccurrences(of: "/usr/local/bin/notesyncd", with: Binaries.notesyncd.path)
                .write(to: directory.appendingPathComponent(unit), atomically: true, encoding: .utf8)
        }
        let (status, output) = try await Subprocess.run(analyze, ["verify"] + Self.units.map { directory.appendingPathComponent($0).path })
        #expect(status == .exited(0), "\(output)")
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "systemd-analyze warned:\n\(output)")
    }

    @Test func theServiceIsHardenedAndRunsTheDaemonOnLoopback() throws {
        let text = try String(contentsOf: Self.deploy.appendingPathComponent("notesyncd.service"), encoding: .utf8)
        for line in [
            "User=notesyncd", "StateDirectory=notesyncd", "ProtectSystem=strict", "NoNewPrivileges=yes", "ProtectHome=yes",
            "PrivateTmp=yes", "CapabilityBoundingSet=", "KillSignal=SIGTERM",
        ] {
            #expect(text.split(separator: "\n").contains(Substring(line)), "missing \(line)")
        }
        let exec = try #require(text.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
        #expect(exec.contains("--host 127.0.0.1") && exec.contains("--metrics-address 127.0.0.1:"))
        #expect(!exec.contains("--sign-up open"))
    }

    @Test func theCaddyfileIsValidWhereCaddyIsInstalled() async throws {
        guard let caddy = Self.which("caddy") else {
            print("deployment files: caddy is not installed; skipping `caddy validate`")
            return
        }
        let (status, output) = try await Subprocess.run(
            caddy, ["validate", "--adapter", "caddyfile", "--config", Self.deploy.appendingPathComponent("Caddyfile").path])
        #expect(status == .exited(0), "\(output)")
    }
}
