#!/usr/bin/env bash
# Instructions per value (and per stage for map100) on each value path, with callgrind: each case run
# with 10,000 and 30,000 values, the difference divided by 20,000 (building the graph cancels out);
# `chain`: instructions per command of a chain built, run and released (2,000 and 6,000 commands);
# `handwritten`: the same for the Graph suite's hand-written executor (BlockOperations);
# `exclusivechain`, `exclusivefanin`, `fanin`: a chain, or independent commands through one sink, each
# command holding the category "x" (or none, `fanin`; or 1-3 of 8 categories, `exclusive8fanin`); `groupchain`, `graphchain`: a chain run as a
# `GroupCommand`'s children, or in a `Graph`; `zip2`, `combinelatest2`: two subjects into zip(a, b) or
# combineLatest(a, b) then a map, each value sent to both (per value: one send to each).
# Usage: scripts/callgrind-value-path.sh [case...]   (default: map100 filtermap flatmap send chain)
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ValuePath >/dev/null
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(map100 filtermap flatmap send chain)
count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null .build/release/ValuePath "$1" "$2" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for name in "${cases[@]}"; do
    if [ "$name" = chain ] || [ "$name" = exclusivechain ] || [ "$name" = exclusivefanin ] || [ "$name" = exclusive8fanin ] || [ "$name" = fanin ] ||
        [ "$name" = handwritten ] || [ "$name" = groupchain ] || [ "$name" = graphchain ]; then
        low=$(count "$name" 2000)
        high=$(count "$name" 6000)
        echo "$name: $(( (high - low) / 4000 )) instructions per node (built, run, released)"
        continue
    fi
    low=$(count "$name" 10000)
    high=$(count "$name" 30000)
    per=$(( (high - low) / 20000 ))
    if [ "$name" = map100 ] || [ "$name" = kept100 ]; then
        echo "$name: $per instructions per value ($(( per / 100 )) per stage)"
    else
        echo "$name: $per instructions per value sent"
    fi
done
