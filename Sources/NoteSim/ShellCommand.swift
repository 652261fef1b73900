import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs `/bin/sh -c COMMAND` and waits for that shell to exit, and for nothing it leaves running.
///
/// A restart command kills the daemon and starts it again in the background (`notesyncd ... &`), so the daemon
/// outlives the shell. Foundation's `Process.waitUntilExit()` cannot wait for such a command on Linux:
/// swift-corelibs-foundation learns that a child exited when a socket it passes to the child reaches end of file,
/// and the daemon inherits that socket, so `waitUntilExit()` returned only when the daemon died (the shell stayed a
/// zombie meanwhile). This runner waits for the shell's process ID itself, and the shell inherits no descriptor
/// beyond 0–2: standard input is `/dev/null`, standard output goes to this process's standard error (so a daemon
/// that keeps it open cannot hold a reader of `notes-sim`'s output, or its `--json`, open), standard error is shared.
enum ShellCommand {
    /// The outcome of one run.
    enum Outcome: Equatable, Sendable {
        /// The shell exited with this status.
        case exited(Int32)
        /// The shell was killed by this signal.
        case signaled(Int32)
        /// The shell was still running at the time limit and was killed (SIGKILL).
        case timedOut
    }

    /// Runs `command` with `/bin/sh -c` and returns when the shell has exited (or was killed at `timeLimit`).
    ///
    /// - Throws: ``SimSetupError`` when the shell cannot be started.
    static func run(_ command: String, timeLimit: Duration) async throws -> Outcome {
        let pid = try spawn(command)
        let child = Child(pid)
        let limit = Task {
            try await Task.sleep(for: timeLimit)
            child.killUnlessExited()
        }
        let status = await child.waitForExit()
        limit.cancel()
        if child.killedAtLimit { return .timedOut }
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
    }

    /// This process's open descriptors (from `/proc/self/fd`; where there is none, every number below the
    /// descriptor limit). Closing one that is no longer open is harmless in a spawn's file actions.
    static func openDescriptors() -> [Int32] {
        if let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            return names.compactMap { Int32($0) }.sorted()
        }
        return Array(0..<Int32(clamping: min(sysconf(Int32(_SC_OPEN_MAX)), 4096)))
    }

    /// Starts `/bin/sh -c command` with descriptors 0–2 only, in its own process group (an interrupt of
    /// `notes-sim` does not reach a daemon the command started), with no blocked signal.
    private static func spawn(_ command: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, 2, 1)
        for fd in openDescriptors() where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let arguments: [UnsafeMutablePointer<CChar>?] = ["/bin/sh", "-c", command].map { (text: String) in strdup(text) }
        defer { arguments.forEach { free($0) } }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments + [nil]
        var pid = pid_t()
        let result = posix_spawn(&pid, "/bin/sh", &actions, &attributes, &argv, environ)
        guard result == 0 else {
            throw SimSetupError("cannot start /bin/sh for the restart command: \(String(cString: strerror(result)))")
        }
        return pid
    }
}

/// A spawned shell: waits for it and kills it, never signalling a process ID that may have been reused.
private final class Child: Sendable {
    let pid: pid_t
    private let state = Mutex((exited: false, killed: false))

    init(_ pid: pid_t) { self.pid = pid }

    var killedAtLimit: Bool { state.withLock { $0.killed } }

    /// SIGKILL, unless the child has exited (while it is unreaped its process ID cannot be reused).
    func killUnlessExited() {
        state.withLock { state in
            guard !state.exited else { return }
            kill(pid, SIGKILL)
            state.killed = true
        }
    }

    /// Waits on a thread of its own (not the cooperative pool): first for the exit without reaping, then marks it
    /// exited and reaps. Returns the wait status.
    func waitForExit() async -> Int32 {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread.detachNewThread { [self] in
                var info = siginfo_t()
                while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
                state.withLock { $0.exited = true }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                continuation.resume(returning: status)
            }
        }
    }
}
