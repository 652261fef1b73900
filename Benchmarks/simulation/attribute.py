#!/usr/bin/env python3
"""Where notes-sim's CPU goes, by whose code runs (Docs/PERFORMANCE.md, notes-sim, ninth session).

Reads `perf script -F comm,tid,ip,sym,dso` of a `perf record --call-graph dwarf` of notes-sim and counts each sample
for the first package module found walking its stack from the leaf to the root: the product (client, server, wire
protocol, merge, crypto, MiniFlake) or the simulation's own code (NoteSim). Library frames (SQLite, GRDB, Swift's
runtime, libc, the kernel) count for the module that called them. A second table names the simulation function
nearest the root of each sample's stack (the step, the checks after it, set-up); samples of the client's and the
server's async work (a sync's push and pull, which run in tasks a step awaits) have none.

Usage: attribute.py STACKS.txt
"""
import collections
import re
import subprocess
import sys

PRODUCT = {"NotesClient": "client", "NoteSyncServer": "server", "NoteSyncProtocol": "wire protocol",
           "NoteMerge": "merge", "NoteCrypto": "crypto", "MiniFlake": "MiniFlake", "SQLiteSupport": "SQLite support"}
HARNESS = {"NoteSim": "simulation", "SyncHarness": "simulation"}
MODULE = re.compile(r"\$s(\d+)([A-Za-z_][A-Za-z0-9_]*)")


def module(symbol):
    match = MODULE.match(symbol)
    if not match:
        return None
    return match.group(2)[: int(match.group(1))]


def read_samples(path):
    samples, frames = [], None
    for line in open(path, errors="replace"):
        if not line.strip():
            if frames is not None:
                samples.append(frames)
            frames = None
        elif not line.startswith("\t"):
            frames = []
        elif frames is not None:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                symbol, _, dso = parts[1].rpartition(" (")
                frames.append((symbol, dso.rstrip(")")))
    if frames:
        samples.append(frames)
    return samples


def demangled(symbols):
    if not symbols:
        return {}
    try:
        out = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(symbols), capture_output=True,
                             text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return {s: s for s in symbols}
    return {s: re.sub(r"\(.*", "", d) for s, d in zip(symbols, out)}


def main():
    samples = read_samples(sys.argv[1])
    total = len(samples)
    if total == 0:
        sys.exit("attribute.py: no samples (was the profile recorded with --call-graph dwarf?)")
    owner, leaf = collections.Counter(), collections.defaultdict(collections.Counter)
    sim_symbols = set()
    for frames in samples:
        who = "unattributed"
        for symbol, _ in frames:
            name = module(symbol)
            if name in PRODUCT:
                who = "product: " + PRODUCT[name]
                break
            if name in HARNESS:
                who = HARNESS[name]
                break
        owner[who] += 1
        library = re.sub(r"\.so[.0-9]*$", ".so", frames[0][1].split("/")[-1]) if frames else "?"
        leaf[who][library] += 1
        sim_symbols.update(s for s, _ in frames if module(s) == "NoteSim")
    names = demangled(sorted(sim_symbols))
    print(f"{total} samples, by the first package module from the leaf:")
    product = sum(n for who, n in owner.items() if who.startswith("product"))
    for who, n in owner.most_common():
        libraries = ", ".join(f"{d} {c * 100 / n:.0f} %" for d, c in leaf[who].most_common(3))
        print(f"  {who:26s} {n:6d} {n * 100 / total:5.1f} %   (leaf: {libraries})")
    print(f"  {'the product, all':26s} {product:6d} {product * 100 / total:5.1f} %")
    print("by the simulation function nearest the root:")
    roots = collections.Counter()
    for frames in samples:
        outer = [names.get(s, s) for s, _ in frames if module(s) == "NoteSim"]
        roots[outer[-1] if outer else "(none: the client's or server's async work)"] += 1
    for name, n in roots.most_common(10):
        print(f"  {name[:60]:60s} {n:6d} {n * 100 / total:5.1f} %")


if __name__ == "__main__":
    main()
