#!/usr/bin/env bash
# Builds the DocC catalogs of CommandCore, CommandGraph, CommandNetwork, CommandDurable and CommandDurablePostgres with the toolchain's `docc` (symbol graphs
# from SwiftPM's built-in `dump-symbol-graph`, no plugin dependency) into .build-docs/site/<Module>;
# fails on any warning.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=.build-docs
# It also tries the test bundles and fails on them; only the library graphs are needed, checked below.
swift package --scratch-path "$scratch" dump-symbol-graph --minimum-access-level public > /dev/null 2>&1 || true
graphs=$(find "$scratch" -type d -name symbolgraph | head -n 1)
for module in CommandCore CommandGraph CommandNetwork CommandDurable CommandDurablePostgres; do
    [ -f "$graphs/$module.symbols.json" ] || { echo "no symbol graph for $module"; exit 1; }
done
rm -rf "$scratch/site" "$scratch/graphs"
mkdir -p "$scratch/site"
for module in CommandCore CommandGraph CommandNetwork CommandDurable CommandDurablePostgres; do
    mkdir -p "$scratch/graphs/$module"
    cp "$graphs/$module".symbols.json "$scratch/graphs/$module"/
    cp "$graphs/$module"@*.symbols.json "$scratch/graphs/$module"/ 2>/dev/null || true
    docc convert "Sources/$module/$module.docc" \
        --additional-symbol-graph-dir "$scratch/graphs/$module" \
        --fallback-display-name "$module" --fallback-bundle-identifier "com.awesomecommand.$module" \
        --output-dir "$scratch/site/$module" --warnings-as-errors
    echo "docs: $module built without warnings -> $scratch/site/$module"
done
