#!/usr/bin/env python3
"""Tables from compare.sh's runs.jsonl: medians per shape and server, and ratios to the floor
(within each back-to-back repetition, then the median)."""
import json
import statistics
import sys
from collections import defaultdict


def norm(r):
    return {
        "deliveries": r.get("deliveriesPerSecond", r.get("deliveriesPerSec", 0.0)),
        "p50": r.get("p50Micros", r.get("p50us", 0.0)) / 1000,
        "p99": r.get("p99Micros", r.get("p99us", 0.0)) / 1000,
        "p999": r.get("p999Micros", r.get("p999us", 0.0)) / 1000,
        "lost": r.get("lost", 0) + r.get("outOfOrder", 0) + r.get("duplicated", 0) + r.get("undelivered", 0),
        "server_cpu": r.get("serverCores", r.get("serverCPU")),
        "client_cpu": r.get("clientCores", r.get("clientCPU")),
    }


def main(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    # A run that took a benchmark shortcut (zero masking key, no msgIds…) is not what real
    # clients send: say so loudly, in the table itself.
    shortcuts = sorted({s for r in runs for s in r.get("shortcuts", [])})
    if shortcuts:
        print(f"**!!! SHORTCUTS TAKEN, NOT WHAT REAL CLIENTS SEND (never for published figures): {', '.join(shortcuts)}**")
        print()
    by = defaultdict(list)
    reps = defaultdict(dict)
    for r in runs:
        key = (r["subs"], r["shape_rate"])
        n = norm(r)
        by[key + (r["server"],)].append(n)
        reps[key + (r["rep"],)][r["server"]] = n
    shapes = sorted({(k[0], k[1]) for k in by}, key=lambda s: (s[1] != 0, s[0], s[1]))
    print("| subs | rate | server | deliveries/s (median) | p50 ms | p99 ms | p99.9 ms | lost+reordered+undelivered | server cores | runs |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for subs, rate in shapes:
        for server in ("rtm", "floor", "nats"):
            rows = by.get((subs, rate, server))
            if not rows:
                continue
            med = lambda f: statistics.median(x[f] for x in rows)
            cpu = [x["server_cpu"] for x in rows if x["server_cpu"] is not None]
            print(f"| {subs} | {'max' if rate == 0 else rate} | {server} | {med('deliveries'):,.0f} | {med('p50'):.2f} | "
                  f"{med('p99'):.2f} | {med('p999'):.2f} | {sum(x['lost'] for x in rows)} | "
                  f"{statistics.median(cpu) if cpu else float('nan'):.2f} | {len(rows)} |")
    print()
    print("| subs | rate | deliveries rtm/floor | p99 rtm/floor | deliveries nats/floor | p99 nats/floor | deliveries rtm/nats |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for subs, rate in shapes:
        ratios = defaultdict(list)
        for (s, r_, rep), servers in reps.items():
            if (s, r_) != (subs, rate) or "floor" not in servers:
                continue
            floor = servers["floor"]
            for name in ("rtm", "nats"):
                if name in servers and floor["deliveries"] > 0:
                    ratios[f"d_{name}"].append(servers[name]["deliveries"] / floor["deliveries"])
                    ratios[f"p_{name}"].append(servers[name]["p99"] / max(floor["p99"], 1e-9))
            if "rtm" in servers and "nats" in servers and servers["nats"]["deliveries"] > 0:
                ratios["d_rn"].append(servers["rtm"]["deliveries"] / servers["nats"]["deliveries"])
        m = lambda k: f"{statistics.median(ratios[k]):.2f}" if ratios[k] else "–"
        print(f"| {subs} | {'max' if rate == 0 else rate} | {m('d_rtm')} | {m('p_rtm')} | {m('d_nats')} | {m('p_nats')} | {m('d_rn')} |")


if __name__ == "__main__":
    main(sys.argv[1])
