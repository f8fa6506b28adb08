#!/usr/bin/env bash
# Renders docs/*.dot to PNG with graphviz's `dot` (apt-get install graphviz). The PNGs are committed,
# so neither CI nor readers need graphviz.
set -euo pipefail
cd "$(dirname "$0")/.."
for source in docs/*.dot; do
    dot -Tpng -Gdpi=110 "$source" -o "${source%.dot}.png"
    echo "rendered ${source%.dot}.png"
done
