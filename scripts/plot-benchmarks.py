#!/usr/bin/env python3
"""Plots docs/benchmarks/graph-scaling.csv (median ms per graph: 1k-100k and the naive chain from
`swift package benchmark --target Graph`, the 1M points from `swift run -c release GraphScale`) as
microseconds per node against graph size, log scale, to graph-scaling.png.
Needs matplotlib (pip install matplotlib)."""
import csv
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

here = pathlib.Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
series = {}
with open(here / "graph-scaling.csv") as handle:
    for row in csv.DictReader(handle):
        nodes = int(row["nodes"])
        series.setdefault(row["shape"], []).append((nodes, float(row["ms_per_graph"]) * 1000 / nodes))

figure, axes = plt.subplots(figsize=(7, 4.2))
for shape, points in series.items():
    points.sort()
    style = "--" if shape.startswith("naive") else "-"
    axes.plot([n for n, _ in points], [us for _, us in points], style, marker="o", label=shape)
axes.set_xscale("log")
axes.set_yscale("log")
axes.set_xlabel("commands in the graph")
axes.set_ylabel("microseconds per command (median)")
axes.set_title("Graph scaling: flat per node; the naive shared queue is quadratic")
axes.grid(True, which="both", alpha=0.3)
axes.legend()
figure.tight_layout()
figure.savefig(here / "graph-scaling.png", dpi=110)
print("wrote", here / "graph-scaling.png")
