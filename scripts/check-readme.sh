#!/usr/bin/env bash
# The README's Swift example must be exactly Examples/ReadmeSnippet/main.swift, which `swift build`
# compiles (with warnings as errors in CI): so the README never shows code that does not build.
set -euo pipefail
cd "$(dirname "$0")/.."
diff <(awk '/^```swift$/{f=1;next} /^```$/{if(f){exit}} f' README.md) Examples/ReadmeSnippet/main.swift \
    || { echo "README example differs from Examples/ReadmeSnippet/main.swift"; exit 1; }
echo "README example matches Examples/ReadmeSnippet/main.swift"

# The durable workflows example: the block after its marker must be exactly the part of the test that
# runs it (between "// README begin" and "// README end").
durable=Tests/CommandDurableTests/ReadmeDurableTests.swift
diff <(awk '/<!-- durable example: /{m=1;next} m&&/^```swift$/{f=1;next} f&&/^```$/{exit} f' README.md) \
    <(awk '/^\/\/ README begin$/{f=1;next} /^\/\/ README end$/{exit} f' "$durable") \
    || { echo "README's durable example differs from $durable"; exit 1; }
echo "README's durable example matches $durable"

# The PostgreSQL example, the same way.
postgres=Tests/CommandDurableTests/ReadmePostgresTests.swift
diff <(awk '/<!-- postgres example: /{m=1;next} m&&/^```swift$/{f=1;next} f&&/^```$/{exit} f' README.md) \
    <(awk '/^\/\/ README begin$/{f=1;next} /^\/\/ README end$/{exit} f' "$postgres") \
    || { echo "README's PostgreSQL example differs from $postgres"; exit 1; }
echo "README's PostgreSQL example matches $postgres"

# The rules live in the DocC catalogs: nothing a user reads may point to notes outside the repository.
if grep -rn "shared/notes\|\.\./shared" README.md BENCHMARKS.md Sources/*/*.docc; then
    echo "README, BENCHMARKS.md or the DocC catalogs point to notes that are not in the repository"
    exit 1
fi
echo "no reference to notes outside the repository"
