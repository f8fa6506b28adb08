#!/usr/bin/env bash
# The README's Swift example must be exactly Examples/ReadmeSnippet/main.swift, which `swift build`
# compiles (with warnings as errors in CI): so the README never shows code that does not build.
set -euo pipefail
cd "$(dirname "$0")/.."
diff <(awk '/^```swift$/{f=1;next} /^```$/{if(f){exit}} f' README.md) Examples/ReadmeSnippet/main.swift \
    || { echo "README example differs from Examples/ReadmeSnippet/main.swift"; exit 1; }
echo "README example matches Examples/ReadmeSnippet/main.swift"
