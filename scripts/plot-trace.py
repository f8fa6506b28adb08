#!/usr/bin/env python3
"""Draws a Chrome trace written by GraphReport.chromeTrace (default: docs/diamond-trace.json, from
`swift run Diamond`) as a timeline PNG next to it: one bar per command run, one row per thread.
Needs matplotlib (pip install matplotlib)."""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

source = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "docs" / "diamond-trace.json")
events = [e for e in json.loads(source.read_text())["traceEvents"] if e["ph"] == "X"]
events.sort(key=lambda e: e["ts"])
figure, axes = plt.subplots(figsize=(8, 0.45 * len(events) + 1))
for row, event in enumerate(events):
    start, duration = event["ts"] / 1000, max(event["dur"] / 1000, 0.2)
    axes.barh(row, duration, left=start, color="#8fb3de" if event["name"][0].isdigit() or "command" in event["name"] else "#f0c987")
    axes.text(start + duration + 0.5, row, f'{event["name"]}  (thread {event["tid"]})', va="center", fontsize=8)
axes.set_yticks([])
axes.invert_yaxis()
axes.set_xlabel("milliseconds since the graph was executed")
axes.set_title("A run of the Diamond graph, from GraphReport.chromeTrace")
axes.set_xlim(0, max(e["ts"] + e["dur"] for e in events) / 1000 * 1.35)
figure.tight_layout()
target = source.with_suffix(".png")
figure.savefig(target, dpi=110)
print("wrote", target)
