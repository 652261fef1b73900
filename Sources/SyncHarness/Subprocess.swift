import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs programs with `posix_spawn` and waits for them with `waitpid`: the one process runner of the tests and the
/// simulation.
///
/// Not Foundation's `Process`: on Linux it learns that a child exited when a socket it hands to the child reaches
/// end of file, so a child that leaves a daemon running in the background (a restart script) is reported as exited
/// only when that daemon dies. A spawned child here inherits descriptors 0–2 only.
public enum Subprocess {
    /// Where a child's standard input comes from.
    public enum Input: Sendable {
        case null
        case file(String)
        /// A descriptor of this process (a pseudo-terminal's slave, say), duplicated into the child.
        case descriptor(Int32)
    }

    /// Where a child's standard output or error goes.
    public enum Output: Sendable {
        /// `/dev/null`.
        case null
        /// This process's own descriptor.
        case inherit
        /// A file, created or truncated (or appended to).
        case file(String, append: Bool = false)
        /// A pipe whose reading end ``ChildProcess/output`` holds (standard output only).
        case pipe
        /// The same as the other stream (`2>&1` for standard error, `1>&2` for standard output).
        case otherStream
        /// A descriptor of this process (a pseudo-terminal's slave, say), duplicated into the child.
        case descriptor(Int32)
    }

    /// Starts `executable` (an absolute path) with `arguments`.
    ///
    /// - Parameters:
    ///   - environment: The child's environment; nil for this process's.
    ///   - newProcessGroup: Start the child in a process group of its own, so a terminal's interrupt of this
    ///     process does not reach it (or what it leaves running).
    /// - Throws: ``SubprocessError`` when the program cannot be started.
    public static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: Input = .null,
        stdout: Output = .inherit, stderr: Output = .inherit, newProcessGroup: Bool = false
    ) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }

        switch stdin {
        case .null: posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        case .file(let path): posix_spawn_file_actions_addopen(&actions, 0, path, O_RDONLY, 0)
        case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, 0)
        }
        var pipeEnds: [Int32] = [-1, -1]
        if case .pipe = stdout {
            guard pipe(&pipeEnds) == 0 else { throw SubprocessError("pipe failed: \(String(cString: strerror(errno)))") }
            // Both ends close-on-exec (the child gets the writing end by a duplication, which clears it): no other
            // child may hold the writing end, or its reader would see end of file only when that child exits.
            for fd in pipeEnds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        }
        func redirect(_ output: Output, to fd: Int32, other: Int32) {
            switch output {
            case .null: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0)
            case .inherit, .pipe: break
            case .file(let path, let append):
                posix_spawn_file_actions_addopen(&actions, fd, path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0o644)
            case .otherStream: posix_spawn_file_actions_adddup2(&actions, other, fd)
            case .descriptor(let source): posix_spawn_file_actions_adddup2(&actions, source, fd)
            }
        }
        // Standard output first, so `2>&1` copies where it now goes; `1>&2` copies this process's standard error.
        redirect(stdout, to: 1, other: 2)
        redirect(stderr, to: 2, other: 1)
        closeEverythingAboveStandardStreams(&actions)

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
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if newProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let environmentStrings = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp: [UnsafeMutablePointer<CChar>?] = environmentStrings.map { strdup($0) } + [nil]
        defer { envp.forEach { free($0) } }
        var pid = pid_t()
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        if pipeEnds[1] >= 0 { close(pipeEnds[1]) }
        guard result == 0 else {
            if pipeEnds[0] >= 0 { close(pipeEnds[0]) }
            throw SubprocessError("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        return ChildProcess(pid: pid, output: pipeEnds[0] >= 0 ? pipeEnds[0] : nil)
    }

    /// Runs a program to completion with standard output and error together in a file, and returns its status and
    /// that output. Kills it (SIGKILL) if it outlives `timeLimit` (by default 3 minutes: well inside the 10 minutes
    /// of silence after which `scripts/watched.sh` ends a test run as hung, so a stuck program fails its own test).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: Input = .null,
        timeLimit: Duration = .seconds(180)
    ) async throws -> (status: Termination, output: String) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("subprocess-\(UUID().uuidString).out").path
        defer { unlink(file) }
        let child = try spawn(executable, arguments, environment: environment, stdin: stdin, stdout: .file(file), stderr: .otherStream)
        let status = await child.waitForExit(timeLimit: timeLimit)
        return (status, (try? String(contentsOfFile: file, encoding: .utf8)) ?? "")
    }

    /// Adds the file action that closes every descriptor above 2 in the child. glibc 2.34 and later do it in one
    /// action, race-free (`posix_spawn_file_actions_addclosefrom_np`, looked up at run time: Swift's Glibc module
    /// does not export it); elsewhere each descriptor open now is closed, which misses one another thread opens
    /// between this listing and the spawn.
    static func closeEverythingAboveStandardStreams(_ actions: inout posix_spawn_file_actions_t) {
        if let closeFrom = closeFromAction, closeFrom(&actions, 3) == 0 { return }
        for fd in openDescriptors() where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
    }

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let closeFromAction: CloseFrom? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
        #else
        return nil
        #endif
    }()

    /// This process's open descriptors (from `/proc/self/fd`; where there is none, every number below the
    /// descriptor limit). Closing one that is no longer open is harmless in a spawn's file actions.
    static func openDescriptors() -> [Int32] {
        if let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            return names.compactMap { Int32($0) }.sorted()
        }
        return Array(0..<Int32(clamping: min(sysconf(Int32(_SC_OPEN_MAX)), 4096)))
    }

    /// Runs blocking work on a thread of its own, never on the cooperative pool.
    public static func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }
}

/// How a child ended.
public enum Termination: Equatable, Sendable, CustomStringConvertible {
    /// It exited with this status.
    case exited(Int32)
    /// A signal killed it.
    case signaled(Int32)
    /// It was still running at the time limit and was killed (SIGKILL).
    case timedOut

    /// The shell's view: the exit status, or 128 + the signal.
    public var code: Int32 {
        switch self {
        case .exited(let status): status
        case .signaled(let signal): 128 + signal
        case .timedOut: 128 + SIGKILL
        }
    }

    public var description: String {
        switch self {
        case .exited(let status): "exit \(status)"
        case .signaled(let signal): "signal \(signal)"
        case .timedOut: "killed at the time limit"
        }
    }
}

/// A spawned child: waits for it and signals it, never signalling a process ID that may have been reused.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    /// The reading end of its standard output, when it was spawned with `.pipe`.
    public let output: Int32?
    private let state = Mutex((exited: false, timedOut: false, status: Optional<Termination>.none, cpuSeconds: Optional<Double>.none))

    /// The CPU time (user and system) the child used, once it has exited and been waited for.
    public var cpuSeconds: Double? { state.withLock { $0.cpuSeconds } }

    init(pid: pid_t, output: Int32?) {
        self.pid = pid
        self.output = output
    }

    /// Sends `signal` unless the child has exited (while it is unreaped its process ID cannot be reused).
    public func signal(_ signal: Int32) {
        state.withLock { state in
            guard !state.exited else { return }
            kill(pid, signal)
        }
    }

    /// Whether it has exited (only known once something waited for it).
    public var hasExited: Bool { state.withLock { $0.exited } }

    /// Waits for the child to exit (on a thread of its own) and reaps it; kills it (SIGKILL) first if it is still
    /// running after `timeLimit`. Waiting again returns the same termination.
    public func waitForExit(timeLimit: Duration? = nil) async -> Termination {
        if let known = state.withLock({ $0.status }) { return known }
        let limit = timeLimit.map { limit in
            Task { [self] in
                try await Task.sleep(for: limit)
                state.withLock { state in
                    guard !state.exited else { return }
                    kill(pid, SIGKILL)
                    state.timedOut = true
                }
            }
        }
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Termination, Never>) in
            Thread.detachNewThread { [self] in continuation.resume(returning: waitBlocking()) }
        }
        limit?.cancel()
        return status
    }

    /// SIGTERM, then waits on this thread (blocking) at most `grace` for the exit; SIGKILL after that. For `defer`
    /// blocks, which cannot await: a child that ignores SIGTERM holds the calling thread for `grace`, not forever.
    @discardableResult
    public func stopBlocking(grace: Duration = .seconds(20)) -> Termination {
        signal(SIGTERM)
        let exited = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            _ = waitBlocking()
            exited.signal()
        }
        let (seconds, attoseconds) = grace.components
        if exited.wait(timeout: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))) == .timedOut {
            state.withLock { state in
                guard !state.exited else { return }
                kill(pid, SIGKILL)
                state.timedOut = true
            }
            exited.wait()
        }
        return waitBlocking()
    }

    /// Waits on this thread (blocking).
    public func waitBlocking() -> Termination {
        if let known = state.withLock({ $0.status }) { return known }
        var info = siginfo_t()
        // First wait without reaping: until it is reaped, the process ID cannot be reused by another process.
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        state.withLock { $0.exited = true }
        var raw: Int32 = 0
        var usage = rusage()
        while wait4(pid, &raw, 0, &usage) == -1 && errno == EINTR {}
        let signal = raw & 0x7f
        let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        return state.withLock { state in
            state.cpuSeconds = cpu
            if let known = state.status { return known }
            let status: Termination = state.timedOut ? .timedOut : (signal == 0 ? .exited((raw >> 8) & 0xff) : .signaled(signal))
            state.status = status
            return status
        }
    }

    /// Reads its standard output pipe until a line for which `match` returns a value, and returns that value;
    /// afterwards a thread keeps draining the pipe so the child never blocks on it. Blocking: call through
    /// ``Subprocess/blocking(_:)``.
    ///
    /// - Throws: ``SubprocessError`` when the output ends first (the child exited), or when no such line came within
    ///   `timeLimit` (a child that neither prints it nor exits, such as a daemon stuck before it listens, fails its
    ///   test instead of hanging the run), with what it printed.
    public func readLine<T>(until match: (String) -> T?, timeLimit: Duration = .seconds(120)) throws -> T {
        guard let fd = output else { throw SubprocessError("the child's output is not a pipe") }
        let deadline = ContinuousClock.now + timeLimit
        var line: [UInt8] = []
        var seen = ""
        var byte: UInt8 = 0
        while true {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else {
                throw SubprocessError("no expected line within \(timeLimit); the program printed: \(seen.suffix(500))")
            }
            let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = poll(&poller, 1, milliseconds)
            if ready == -1 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            guard read(fd, &byte, 1) == 1 else {
                throw SubprocessError("the program ended its output before the expected line: \(seen.suffix(500))")
            }
            guard byte == UInt8(ascii: "\n") else {
                line.append(byte)
                continue
            }
            let text = String(decoding: line, as: UTF8.self)
            line.removeAll()
            seen += text + "\n"
            if let value = match(text) {
                Thread.detachNewThread {
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    while read(fd, &buffer, buffer.count) > 0 {}
                    close(fd)
                }
                return value
            }
        }
    }
}

/// A program that could not be started or did not behave as expected.
public struct SubprocessError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
