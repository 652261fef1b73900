#!/usr/bin/env python3
"""Whole-process timings of the daily `notes` commands on a store of N notes (Docs/PERFORMANCE.md, "notes search
and add at 200,000 notes", and issue 31's `notes tags` and `notes list --tag`).

Seeds a fresh NOTES_HOME through `notes import` of a generated export (make-export.py), then runs each command
RUNS times after one warm-up, the commands in turn (A B C ... A B C ...) so a drift in the machine's speed touches
them alike, and prints the median, minimum and maximum wall time of each, and each median as a ratio to the
baseline measured in the same run: `notes --version`, which starts the process and exits without opening the store;
and the median CPU time (user + system) of each, the steadier figure on a machine other work shares.

usage: bench.py NOTES_BINARY [N=200000] [RUNS=9]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

from timing import timed

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    binary = os.path.abspath(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    with tempfile.TemporaryDirectory(prefix="notes-bench-") as work:
        export = os.path.join(work, "export.json")
        subprocess.run([sys.executable, os.path.join(HERE, "make-export.py"), str(count), export], check=True)
        env = dict(os.environ, NOTES_HOME=os.path.join(work, "home"))
        env.pop("VISUAL", None)
        started = time.perf_counter()
        subprocess.run([binary, "import", export], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"seeded {count} notes with `notes import` in {time.perf_counter() - started:.1f} s")
        commands = {
            "notes --version (baseline: process start)": [binary, "--version"],
            "notes search quetzalcoatl (a rare word)": [binary, "search", "quetzalcoatl"],
            "notes search --limit 20 garden (a common word)": [binary, "search", "--limit", "20", "garden"],
            "notes add TEXT": [binary, "add", "a benchmark note"],
            "notes list --limit 20": [binary, "list", "--limit", "20"],
            "notes tags (50 tags and a rare one)": [binary, "tags"],
            "notes list --tag rare-tag (1 note)": [binary, "list", "--tag", "rare-tag"],
            "notes list --tag topic-07 --limit 20": [binary, "list", "--tag", "topic-07", "--limit", "20"],
            "notes list --tag topic-07 (every match)": [binary, "list", "--tag", "topic-07"],
        }
        times = {name: [] for name in commands}
        cpu = {name: [] for name in commands}
        for round_ in range(runs + 1):
            for name, argv in commands.items():
                elapsed, cpu_ms, _ = timed(argv, env)
                if round_ > 0:  # the first round warms the page cache
                    times[name].append(elapsed)
                    cpu[name].append(cpu_ms)
        # Wall time, and CPU time (user + system: the steadier figure when other work shares the machine's cores).
        baseline = statistics.median(next(iter(times.values())))
        cpu_baseline = statistics.median(next(iter(cpu.values())))
        print(f"{'command':50} {'median ms':>9} {'min':>7} {'max':>7} {'vs baseline':>11} {'CPU ms':>7} {'vs baseline':>11}")
        for name, values in times.items():
            median = statistics.median(values)
            cpu_median = statistics.median(cpu[name])
            print(f"{name:50} {median:9.1f} {min(values):7.1f} {max(values):7.1f} {median / baseline:10.2f}x"
                  f" {cpu_median:7.1f} {cpu_median / cpu_baseline:10.2f}x")


if __name__ == "__main__":
    main()
