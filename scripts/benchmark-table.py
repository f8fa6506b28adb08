#!/usr/bin/env python3
"""Reads the text output of `swift package benchmark` (stdin or a file) and prints one markdown row per
benchmark: its name, p50 wall-clock time, p90, and p90 mallocs, in the order the output lists them."""
import re
import sys

text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
rows, name, previous = [], None, ""
for line in text.splitlines():
    if "ETA:" in line:
        continue
    if line.startswith("╒"):  # a table starts: the line before it names the benchmark
        name = previous.strip()
        rows.append({"name": name})
        continue
    if line.strip():
        previous = line
    if name is None or not line.startswith("│"):
        continue
    cells = [cell.strip() for cell in line.strip("│").split("│")]
    metric = cells[0]
    if metric.startswith("Time (wall clock)"):
        unit = re.search(r"\((\w+)\) \*", metric)
        rows[-1]["p50"] = f"{cells[3]} {unit.group(1) if unit else ''}".strip()
        rows[-1]["p90"] = cells[5]
    elif metric.startswith("Malloc (total)"):
        scale = " K" if "(K)" in metric else ""
        rows[-1]["mallocs"] = cells[5] + scale
    elif metric.startswith("Memory (resident peak)"):
        rows[-1]["rss"] = cells[3] + (" " + re.search(r"\((\w+)\)", metric).group(1) if "(" in metric else "")
print("| benchmark | p50 | p90 | mallocs p90 | peak RSS p50 |")
print("|---|---|---|---|---|")
for row in rows:
    if "p50" in row:
        print(f"| {row['name']} | {row['p50']} | {row.get('p90', '')} | {row.get('mallocs', '')} | {row.get('rss', '')} |")
