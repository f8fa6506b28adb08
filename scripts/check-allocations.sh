#!/usr/bin/env bash
# Runs the Core and Combinators benchmark suites and checks each library case's p90 malloc count
# against Benchmarks/Thresholds/allocations.json (absolute counts per iteration; 10% slack, at least
# 2; figures package-benchmark prints in thousands, "(K)", are scaled back). Baselines and peers are
# measured but not checked. Takes about 4 minutes including the benchmark package's first build; CI
# runs it last. Update the file when a change lowers a count on purpose.
set -euo pipefail
cd "$(dirname "$0")/../Benchmarks"
report=$(mktemp)
swift package benchmark --target Core --target Combinators --format markdown > "$report" 2>/dev/null
python3 - "$report" Thresholds/allocations.json <<'PY'
import json, re, sys
report, thresholds = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
measured, suite = {}, None
for part in re.split(r'\n(?=## |### )', report):
    if part.startswith('## '):
        suite = part[3:].split('\n')[0].strip()
    elif part.startswith('### '):
        name = part[4:].split('\n')[0].strip()
        # The label carries the unit when package-benchmark scales the figures: "(K)", "(M)".
        row = re.search(r'\| Malloc \(total\)( \((K|M)\))?[^|]*\|((?:[^|\n]*\|){7})', part)
        if row:
            scale = {None: 1, 'K': 1_000, 'M': 1_000_000}[row.group(2)]
            measured[(suite, name)] = int(row.group(3).split('|')[4].strip().replace(',', '')) * scale
failed = False
for suite, cases in thresholds.items():
    for name, limit in cases.items():
        value = measured.get((suite, name))
        allowed = max(limit * 1.1, limit + 2)
        status = 'missing' if value is None else ('ok' if value <= allowed else 'OVER')
        print(f'{status:7} {suite} / {name}: p90 mallocs {value} (threshold {limit})')
        failed |= status != 'ok'
sys.exit(1 if failed else 0)
PY
