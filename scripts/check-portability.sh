#!/usr/bin/env bash
# Portability by construction: only Linux can be compiled here, so what would break the build on Apple
# platforms, or on the Swift versions the README names, is checked as text. Fails on:
# - `weak let` (Swift 6.2.3+), `import Synchronization` (macOS 15 / iOS 18), `Progress(totalUnitCount`
#   (joins the thread's current progress on Apple platforms), in Sources and Tests;
# - `getCFRunLoop`, `/proc/`, `Glibc`, `Musl`, `#if os(`, `canImport(` outside the platform layers
#   (each module's `Platform/` folder: Sources/<Module>/Platform; a module cannot see another's
#   imports) in Sources and Tests;
# - a manifest (this one and Benchmarks/) without `platforms:`, or whose swift-tools-version is not the
#   lowest Swift version the README names ("Swift X.Y or later").
# The KVO pairing has its own check (scripts/check-kvo.sh). `--stack` also runs the whole test suite
# with 512 KiB thread stacks (`ulimit -S -s 512`: the size of a secondary thread on Apple platforms).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
fail() { echo "portability: $1"; status=1; }

anywhere() {  # pattern, message
    local hits
    hits=$(grep -rnE "$1" Sources Tests --include='*.swift' | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
    [ -z "$hits" ] || fail "$2:"$'\n'"$hits"
}
outside_platform() {  # pattern, message
    local hits
    hits=$(grep -rnE "$1" Sources Tests --include='*.swift' | grep -vE '^Sources/[^/]+/Platform/' \
        | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
    [ -z "$hits" ] || fail "$2 outside the platform layers (Sources/<Module>/Platform):"$'\n'"$hits"
}

anywhere '\bweak let\b' '`weak let` needs Swift 6.2.3'
anywhere '^\s*import Synchronization' '`Synchronization` needs macOS 15 / iOS 18'
anywhere '\bProgress\(totalUnitCount' 'use Progress.discreteProgress(totalUnitCount:)'
outside_platform 'getCFRunLoop' 'getCFRunLoop'
outside_platform '/proc/' '/proc'
outside_platform '\b(Glibc|Musl)\b' 'Glibc/Musl'
outside_platform '#if os\(|canImport\(' 'a platform condition'

readme_swift=$(grep -oE 'Swift [0-9]+\.[0-9]+ or later' README.md | head -1 | grep -oE '[0-9]+\.[0-9]+' || true)
[ -n "$readme_swift" ] || fail 'README names no "Swift X.Y or later"'
for manifest in Package.swift Benchmarks/Package.swift; do
    grep -q 'platforms:' "$manifest" || fail "$manifest declares no platforms:"
done
tools=$(head -1 Package.swift | grep -oE '[0-9]+\.[0-9]+' || true)
[ "$tools" = "$readme_swift" ] || fail "Package.swift swift-tools-version $tools, README names Swift $readme_swift"

[ "$status" = 0 ] && echo "portability: text checks passed (README: Swift $readme_swift or later; tools-version $tools)"
[ "$status" = 0 ] || exit "$status"

if [ "${1:-}" = "--stack" ]; then
    echo "portability: the whole test suite with 512 KiB thread stacks (ulimit -s 512)"
    swift build --build-tests
    # The soft limit only: the PostgreSQL server the durable tests start raises it back for itself (it
    # needs more than 512 KiB); every thread of the test process gets 512 KiB stacks all the same.
    (ulimit -S -s 512 && swift test --skip-build)
fi
