#!/usr/bin/env bash
# Keeps the README's "Swift 6.0 or later" checked: every Swift file of the library, its tests, examples
# and scripts goes through scripts/swift60-syntax (the Swift 6.0 parser from swift-syntax 600.0.1, then
# a syntax-tree check for what that parser accepts but only a later compiler builds: a trailing comma in
# a parameter list, @concurrent, nonisolated(nonsending), weak let, ~Escapable, isolated conformances,
# InlineArray, Span, `nonisolated` types). The benchmarks package is not checked: it needs Swift 6.1
# (`traits:`), as the README says.
#
# Self-test first: each canary in scripts/swift60-syntax/Canaries/reject must be rejected, each in
# Canaries/accept accepted. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

tool=scripts/swift60-syntax
swift build --package-path "$tool" >/dev/null
check="$(swift build --package-path "$tool" --show-bin-path)/Swift60Syntax"

wrong=0
for canary in "$tool"/Canaries/reject/*.swift; do
    if "$check" "$canary" >/dev/null; then
        echo "self-test: $canary was accepted, but must be rejected"
        wrong=$((wrong + 1))
    fi
done
for canary in "$tool"/Canaries/accept/*.swift; do
    if ! "$check" "$canary"; then
        echo "self-test: $canary was rejected, but must be accepted"
        wrong=$((wrong + 1))
    fi
done
canaries=$(ls "$tool"/Canaries/*/*.swift | wc -l)
[ "$wrong" = 0 ] || { echo "self-test: $wrong of $canaries canaries wrong"; exit 1; }
echo "self-test: $canaries canaries as expected"

files=()
while IFS= read -r file; do files+=("$file"); done < <(
    find Sources Tests Examples scripts -name '*.swift' -not -path '*/.build*' -not -path "$tool/Canaries/*" | sort
)
files+=(Package.swift)
"$check" "${files[@]}"
echo "Swift 6.0 syntax: ${#files[@]} files accepted"
