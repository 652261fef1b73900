import Foundation
import SyncHarness

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the built products are, and the real `notesyncd` as a child process: the one daemon launcher of the tests.
public enum Binaries {
    /// The package root (this file is `Tests/TestSupport/Daemon.swift`).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `$FLAKENOTES_BIN_DIR` (what `scripts/test.sh` sets), else beside the test bundle, else `.build/debug`.
    public static let directory: URL = {
        if let directory = ProcessInfo.processInfo.environment["FLAKENOTES_BIN_DIR"], !directory.isEmpty {
            return URL(fileURLWithPath: directory)
        }
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        if FileManager.default.isExecutableFile(atPath: beside.appendingPathComponent("notesyncd").path) { return beside }
        return packageRoot.appendingPathComponent(".build/debug")
    }()

    public static var notes: URL { directory.appendingPathComponent("notes") }
    public static var notesyncd: URL { directory.appendingPathComponent("notesyncd") }
    public static var notesSim: URL { directory.appendingPathComponent("notes-sim") }

    /// Whether every named program is built.
    public static func exist(_ programs: URL...) -> Bool {
        programs.allSatisfy { FileManager.default.isExecutableFile(atPath: $0.path) }
    }
}

/// A running `notesyncd`: started with its arguments, ready once it printed its listening line (read from its
/// standard output, no sleeping), stopped with SIGTERM or SIGKILL.
public final class DaemonProcess: Sendable {
    public let child: ChildProcess
    /// The port it listens on (the real one when 0 was asked).
    public let port: Int
    /// `http://HOST:PORT`, as its listening line gave it.
    public let url: String
    /// Where its standard error goes.
    public let log: URL

    private init(child: ChildProcess, url: String, log: URL) throws {
        self.child = child
        self.url = url
        self.log = log
        guard let port = url.split(separator: ":").last.flatMap({ Int($0) }) else {
            throw SubprocessError("no port in the listening line's URL \(url)")
        }
        self.port = port
    }

    /// Starts `notesyncd ARGUMENTS` (defaults added: loopback, bcrypt cost 4, log level `error`, open sign-up (the
    /// tests sign up their own accounts), unless the arguments name them) with standard error appended to `log`, and returns once it listens.
    ///
    /// - Throws: ``SubprocessError`` when it exits before listening, with the end of its log.
    public static func start(_ arguments: [String], log: URL) async throws -> DaemonProcess {
        var arguments = arguments
        for (flag, value) in [("--host", "127.0.0.1"), ("--bcrypt-cost", "4"), ("--log-level", "error"), ("--sign-up", "open")]
        where !arguments.contains(flag) {
            arguments += [flag, value]
        }
        let child = try Subprocess.spawn(
            Binaries.notesyncd.path, arguments, stdout: .pipe, stderr: .file(log.path, append: true))
        do {
            let url = try await Subprocess.blocking {
                try child.readLine { line in
                    line.range(of: "notesyncd listening on ").map { String(line[$0.upperBound...]).trimmingCharacters(in: .whitespaces) }
                }
            }
            return try DaemonProcess(child: child, url: url, log: log)
        } catch {
            child.signal(SIGKILL)
            _ = await child.waitForExit()
            let tail = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").suffix(800)
            throw SubprocessError("notesyncd did not start: \(error); its log ends: \(tail)")
        }
    }

    /// A daemon on `dataDirectory` at a port below the kernel's ephemeral range, so that while it is down between a
    /// kill and a restart no port-0 listener or outgoing connection of another test takes its port. Tries a few.
    public static func startOnRestartablePort(_ arguments: [String], log: URL) async throws -> DaemonProcess {
        var failures: [String] = []
        for port in restartablePorts() {
            do {
                return try await start(["--port", "\(port)"] + arguments, log: log)
            } catch {
                failures.append("\(port): \(error)")
            }
        }
        throw SubprocessError("no port worked: \(failures)")
    }

    /// A daemon still running when its last reference goes (a test that failed or threw before stopping it) is
    /// killed, so that no test leaves a notesyncd behind.
    deinit {
        child.signal(SIGKILL)
    }

    /// SIGKILL, then waits until it is gone (its sockets closed by the kernel).
    public func kill9() async {
        child.signal(SIGKILL)
        _ = await child.waitForExit()
    }

    /// SIGTERM (a graceful stop), then waits; returns how it ended. A daemon still running after `grace` is killed
    /// (SIGKILL) and the answer is ``Termination/timedOut``: a shutdown that never ends fails its test, it does not
    /// hang the run.
    @discardableResult
    public func terminate(grace: Duration = .seconds(60)) async -> Termination {
        child.signal(SIGTERM)
        return await child.waitForExit(timeLimit: grace)
    }

    /// Ports to try for a daemon that will be restarted on the same port, in random order: below the kernel's
    /// ephemeral range.
    public static func restartablePorts(count: Int = 20) -> [Int] {
        var low = 32768
        if let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8),
            let first = text.split(whereSeparator: \.isWhitespace).first.flatMap({ Int($0) })
        {
            low = first
        }
        return (0..<count).map { _ in Int.random(in: 10_000..<max(10_001, low)) }
    }

    /// A port that was free a moment ago on 127.0.0.1.
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw SubprocessError("cannot find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
