import SyncHarness

/// Runs `/bin/sh -c COMMAND` (a `--restart-command`) and waits for that shell to exit, and for nothing it leaves
/// running.
///
/// A restart command kills the daemon and starts it again in the background (`notesyncd ... &`), so the daemon
/// outlives the shell: ``Subprocess`` waits for the shell's process ID itself, and the shell inherits no descriptor
/// beyond 0–2. Standard input is `/dev/null`; standard output goes to this process's standard error (so a daemon
/// that keeps it open cannot hold a reader of `notes-sim`'s output, or its `--json`, open); standard error is
/// shared. The shell runs in a process group of its own, so an interrupt of `notes-sim` does not reach a daemon the
/// command started.
enum ShellCommand {
    /// Runs `command` with `/bin/sh -c` and returns when the shell has exited (or was killed at `timeLimit`).
    ///
    /// - Throws: ``SimSetupError`` when the shell cannot be started.
    static func run(_ command: String, timeLimit: Duration) async throws -> Termination {
        let child: ChildProcess
        do {
            child = try Subprocess.spawn(
                "/bin/sh", ["-c", command], stdout: .otherStream, stderr: .inherit, newProcessGroup: true)
        } catch {
            throw SimSetupError("cannot start /bin/sh for the restart command: \(error)")
        }
        return await child.waitForExit(timeLimit: timeLimit)
    }
}
