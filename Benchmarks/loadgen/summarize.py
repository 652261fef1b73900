#!/usr/bin/env python3
"""Side-by-side table of workload.py results: notesyncd runs against Kinto runs (Markdown on stdout).

  summarize.py --notesyncd R1.json R2.json ... --kinto K1.json K2.json ...

Each file is the JSON line workload.py prints last (run.sh keeps it as result.json; the Kinto run.sh as
<config>.json). notesyncd figures are the median over its runs, with the range in brackets when there are several.
Kinto's figure is its best over every config and run given ("best": highest notes/s, lowest latency), the config
named. Ratios divide notesyncd's median by Kinto's best (throughput) or Kinto's best by notesyncd's median
(latency), so above 1 always means notesyncd is ahead. Phases are matched by name with the store size left out,
so notesyncd's growth phase (1M notes) lines up with Kinto's (100k; ~20k for the memory backend).

--quiet-box N keeps only runs whose median machine-busy % over the single-client phases (every phase but the
concurrent one) is at most N: with one client, server and load generator keep about one of the two cores busy
(box% ~50), so a higher figure means something else was running. Left-out runs are listed.
"""

import argparse
import json
import re
import statistics


def load(path):
    """The runs in a file: one workload.py JSON line, or the Kinto run.sh's combined {"configs": {...}}."""
    with open(path) as f:
        lines = [line for line in f if line.strip().startswith("{")]
    doc = json.loads(lines[-1])
    return list(doc["configs"].values()) if "configs" in doc else [doc]


def key(phase, first_size):
    """'pull_full@10k' -> 'pull_full@small'; the other size -> '@big'; growth phases -> 'grow'."""
    if phase.startswith("grow_to_"):
        return "grow"  # through the API (Kinto's PostgreSQL seeding with SQL is not an API figure: left out)
    m = re.match(r"(.+)@(.+)$", phase)
    if not m:
        return phase
    return f"{m.group(1)}@{'small' if m.group(2) == first_size else 'big'}"


def table(runs):
    out = {}
    for r in runs:
        res = r["results"]
        first = next((p.split("@")[1] for p in res if p.startswith("pull_full@")), None)
        for phase, v in res.items():
            out.setdefault(key(phase, first), []).append((phase, v, r))
    return out


def cfg_name(r):
    label = r.get("label", "")
    if "memory" in label:
        return "mem-waitress"
    if "granian" in label:
        return "pg-granian"
    if "waitress" in label:
        return "pg-waitress"
    return r.get("adapter", "?")


def fmt(x, unit=""):
    if x is None:
        return "–"
    if unit == "n/s":
        return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


ROWS = [  # (label, phase key, field, kind)
    ("push b100, 10k notes: notes/s", "push_b100", "notes_per_s", "tput"),
    ("· p99 ms per 100-note request", "push_b100", "p99_ms", "lat"),
    ("push b1, 1k notes: notes/s", "push_b1", "notes_per_s", "tput"),
    ("· single-note push p50 ms", "push_b1", "p50_ms", "lat"),
    ("· single-note push p99 ms", "push_b1", "p99_ms", "lat"),
    ("full pull @10k: notes/s", "pull_full@small", "notes_per_s", "tput"),
    ("modify 100 @10k: ms", "modify_100@small", "p50_ms", "lat"),
    ("incremental pull of 100 @10k: p50 ms", "pull_incr@small", "p50_ms", "lat"),
    ("· p99 ms", "pull_incr@small", "p99_ms", "lat"),
    ("empty poll @10k: p50 ms", "pull_empty@small", "p50_ms", "lat"),
    ("8 clients × 1,000, b50: notes/s", "concurrent_8x1000_b50", "notes_per_s", "tput"),
    ("· p99 ms per 50-note request", "concurrent_8x1000_b50", "p99_ms", "lat"),
    ("store growth through the API, b100: notes/s", "grow", "notes_per_s", "tput"),
    ("full pull @big: notes/s", "pull_full@big", "notes_per_s", "tput"),
    ("modify 100 @big: ms", "modify_100@big", "p50_ms", "lat"),
    ("incremental pull of 100 @big: p50 ms", "pull_incr@big", "p50_ms", "lat"),
    ("· p99 ms", "pull_incr@big", "p99_ms", "lat"),
    ("empty poll @big: p50 ms", "pull_empty@big", "p50_ms", "lat"),
]

CPU_PHASES = ["push_b100", "push_b1", "pull_full@small", "pull_incr@small", "concurrent_8x1000_b50", "grow",
              "pull_full@big", "pull_incr@big"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--notesyncd", nargs="+", required=True)
    p.add_argument("--kinto", nargs="+", required=True)
    p.add_argument("--quiet-box", type=float, default=None)
    p.add_argument("--wrk", nargs="*", default=[], help="wrk.json files from wrk.sh (medians per phase)")
    a = p.parse_args()
    ns_runs = [r for x in a.notesyncd for r in load(x)]
    k_runs = [r for x in a.kinto for r in load(x)]
    if a.quiet_box is not None:
        def busy(r):
            xs = [v["machine_busy_pct"] for ph, v in r["results"].items()
                  if not ph.startswith(("concurrent", "seed_to")) and v.get("machine_busy_pct") is not None]
            return statistics.median(xs)
        for name, runs in (("notesyncd", ns_runs), ("Kinto", k_runs)):
            for r in runs:
                if busy(r) > a.quiet_box:
                    print(f"left out (disturbed): {name} {cfg_name(r)} {r['utc']}, median box% {busy(r):.0f}")
        ns_runs = [r for r in ns_runs if busy(r) <= a.quiet_box]
        k_runs = [r for r in k_runs if busy(r) <= a.quiet_box]
        print()
    ns, k = table(ns_runs), table(k_runs)

    print(f"notesyncd: {len(ns_runs)} runs ({', '.join(r['utc'] for r in ns_runs)}); "
          f"Kinto: {len(k_runs)} runs ({', '.join(cfg_name(r) + ' ' + r['utc'] for r in k_runs)})\n")
    print("| phase | notesyncd (median [range]) | Kinto best (config) | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for label, pk, field, kind in ROWS:
        nv = [v.get(field) for _, v, _ in ns.get(pk, []) if v.get(field) is not None]
        kv = [(v.get(field), cfg_name(r), ph) for ph, v, r in k.get(pk, []) if v.get(field) is not None]
        if not nv:
            continue
        unit = "n/s" if kind == "tput" else ""
        med = statistics.median(nv)
        cell = fmt(med, unit) + (f" [{fmt(min(nv), unit)}–{fmt(max(nv), unit)}]" if len(nv) > 1 else "")
        sizes = sorted({ph.split("@")[1] for ph, _, _ in ns.get(pk, []) if "@" in ph})
        if sizes and pk.endswith("@big"):
            cell += f" (@{sizes[0]})"
        if kv:
            best = max(kv) if kind == "tput" else min(kv)
            ksize = f" @{best[2].split('@')[1]}" if "@" in best[2] and pk.endswith("@big") else ""
            kcell = f"{fmt(best[0], unit)} ({best[1]}{ksize})"
            ratio = med / best[0] if kind == "tput" else best[0] / med
            rcell = f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.1f}×"
        else:
            kcell, rcell = "–", "–"
        print(f"| {label} | {cell} | {kcell} | {rcell} |")

    configs = sorted({cfg_name(r) for r in k_runs})
    print("\nCPU, % of one core (medians over runs): srv = server, db = PostgreSQL, gen = load generator; "
          "box = whole machine, 100 = both cores.\n")
    print("| phase | notesyncd srv / gen, box | " + " | ".join(f"Kinto {c} srv / db / gen, box" for c in configs) + " |")
    print("| --- | --- |" + " --- |" * len(configs))

    def med(rows, f):
        xs = [r[f] for r in rows if r.get(f) is not None]
        return statistics.median(xs) if xs else float("nan")

    for pk in CPU_PHASES:
        rows = [v for _, v, _ in ns.get(pk, [])]
        if not rows:
            continue
        cells = [f"{med(rows, 'server_cpu_pct'):.0f} / {med(rows, 'loadgen_cpu_pct'):.0f}, {med(rows, 'machine_busy_pct'):.0f}"]
        for c in configs:
            kr = [v for _, v, r in k.get(pk, []) if cfg_name(r) == c]
            cells.append(f"{med(kr, 'server_cpu_pct'):.0f} / {med(kr, 'db_cpu_pct'):.0f} / {med(kr, 'loadgen_cpu_pct'):.0f}, "
                         f"{med(kr, 'machine_busy_pct'):.0f}" if kr else "–")
        print(f"| {pk} | " + " | ".join(cells) + " |")

    if a.wrk:
        docs = [json.load(open(x)) for x in a.wrk]
        qb = a.quiet_box

        def quiet(d, ph):
            """A single-connection phase is quiet when the machine was ~half busy; the 8-connection phase (both
            cores busy by design) counts as quiet when the phase just before it was."""
            if qb is None:
                return True
            if ph.startswith("concurrent"):
                prev = [v for k, v in d["phases"].items() if k.startswith("push_b1") and not k.startswith("push_b100")]
                return bool(prev) and prev[0]["machine_busy_pct"] <= qb
            return d["phases"][ph]["machine_busy_pct"] <= qb

        print(f"\nwrk (wrk.sh), {len(docs)} runs ({', '.join(d['utc'] for d in docs)}); median [range] over the "
              f"quiet samples{f' (box% <= {qb:.0f})' if qb is not None else ''}:\n")
        print("| phase | samples | notes/s | p50 ms | p99 ms | server CPU % | box % |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        phases = list(dict.fromkeys(ph for d in docs for ph in d["phases"]))
        for ph in phases:
            rows = [d["phases"][ph] for d in docs if ph in d["phases"] and quiet(d, ph)]
            if not rows:
                print(f"| {ph} | 0 | | | | | |")
                continue

            def cell(f, unit=""):
                xs = [r[f] for r in rows]
                m = statistics.median(xs)
                return fmt(m, unit) + (f" [{fmt(min(xs), unit)}–{fmt(max(xs), unit)}]" if len(xs) > 1 else "")
            print(f"| {ph} | {len(rows)} | {cell('notes_per_s', 'n/s')} | {cell('p50_ms')} | {cell('p99_ms')} | "
                  f"{cell('server_cpu_pct')} | {cell('machine_busy_pct')} |")

if __name__ == "__main__":
    main()
