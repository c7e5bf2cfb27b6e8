#!/usr/bin/env python3
"""A bar chart (SVG) of compare.sh's runs.jsonl: median deliveries/s per shape at max rate for
rtm, the floor and nats, on a log scale. compare.sh converts it to PNG when ImageMagick is
installed.  Usage: plot.py runs.jsonl out.svg"""
import json
import math
import statistics
import sys
from collections import defaultdict

COLORS = {"rtm": "#2b6cb0", "floor": "#718096", "nats": "#dd6b20"}


def main(path, out):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    med = defaultdict(list)
    for r in runs:
        if r["shape_rate"] == 0:
            med[(r["subs"], r["server"])].append(r.get("deliveriesPerSecond", r.get("deliveriesPerSec", 0.0)))
    shapes = sorted({s for s, _ in med})
    servers = [s for s in ("rtm", "floor", "nats") if any((n, s) in med for n in shapes)]
    values = {k: statistics.median(v) for k, v in med.items() if v}
    top = max(values.values())
    lo, hi = 5.0, math.ceil(math.log10(top) * 2) / 2
    w, h, left, bottom, top_margin = 640, 360, 70, 50, 40
    plot_h = h - bottom - top_margin
    group_w = (w - left - 20) / max(1, len(shapes))
    bar_w = group_w / (len(servers) + 1)

    def y(v):
        return top_margin + plot_h * (1 - (math.log10(max(v, 10 ** lo)) - lo) / (hi - lo))

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="14">fan-out, 100-byte messages, max rate: deliveries/s (log scale)</text>']
    for e in range(int(lo), int(math.floor(hi)) + 1):
        yy = y(10 ** e)
        svg.append(f'<line x1="{left}" y1="{yy}" x2="{w - 20}" y2="{yy}" stroke="#e2e8f0"/>')
        svg.append(f'<text x="{left - 6}" y="{yy + 4}" text-anchor="end">1e{e}</text>')
    for i, n in enumerate(shapes):
        x0 = left + i * group_w + bar_w / 2
        for j, s in enumerate(servers):
            v = values.get((n, s))
            if v is None:
                continue
            x = x0 + j * bar_w
            svg.append(f'<rect x="{x}" y="{y(v)}" width="{bar_w * 0.9}" height="{top_margin + plot_h - y(v)}" fill="{COLORS[s]}"/>')
            svg.append(f'<text x="{x + bar_w * 0.45}" y="{y(v) - 4}" text-anchor="middle" font-size="10">{v / 1e6:.1f}M</text>')
        svg.append(f'<text x="{x0 + bar_w * len(servers) / 2}" y="{h - bottom + 18}" text-anchor="middle">{n} subscriber{"s" if n != 1 else ""}</text>')
    for j, s in enumerate(servers):
        svg.append(f'<rect x="{left + j * 110}" y="{h - 18}" width="12" height="12" fill="{COLORS[s]}"/>')
        svg.append(f'<text x="{left + j * 110 + 16}" y="{h - 8}">{s}</text>')
    svg.append('</svg>')
    open(out, "w").write("\n".join(svg))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
