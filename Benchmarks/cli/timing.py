"""The whole-process timer of the CLI benchmarks (bench.py, history.py)."""
import resource
import subprocess
import sys
import time


def timed(argv, env):
    """Runs `argv` once with `env`; returns its wall time and its CPU time (user + system), in ms, and its stdout.

    Exits the benchmark with the command's stderr when it fails.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {done.stderr.decode(errors='replace')}")
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000, done.stdout
