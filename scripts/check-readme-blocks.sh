#!/usr/bin/env bash
# Every ```swift block of the README, pasted alone into the main.swift of a new package that depends on
# this one by path (as an app would: `.package(path:)` here, `.package(url:from:)` there, and the
# products the README names), must build with warnings as errors. The package lives in
# .build-readme-blocks/ (ignored by git; its own build folder inside).
#
# Run by .ci/run. Usage: scripts/check-readme-blocks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=.build-readme-blocks
rm -rf "$work/Sources"
mkdir -p "$work/Sources"
count=$(python3 - "$work" <<'PY'
import re, sys, os
work = sys.argv[1]
text = open("README.md").read()
blocks = re.findall(r"^```swift\n(.*?)^```$", text, flags=re.S | re.M)
for index, block in enumerate(blocks, 1):
    folder = os.path.join(work, "Sources", f"Block{index}")
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, "main.swift"), "w").write(block)
print(len(blocks))
PY
)
targets=""
for index in $(seq 1 "$count"); do
    targets+="        .executableTarget(name: \"Block$index\", dependencies: products),"$'\n'
done
cat >"$work/Package.swift" <<MANIFEST
// swift-tools-version: 6.0
// Made by scripts/check-readme-blocks.sh: each README block as the main.swift of an app of its own.
import PackageDescription

let products: [Target.Dependency] = [
    "CommandCore", "CommandGraph", "CommandNetwork", "CommandDurable", "CommandDurablePostgres",
].map { .product(name: \$0, package: "AwesomeCommand") }

let package = Package(
    name: "ReadmeBlocks",
    platforms: [.macOS(.v14), .iOS(.v17)],
    dependencies: [.package(name: "AwesomeCommand", path: "$root")],
    targets: [
$targets    ],
    swiftLanguageModes: [.v6]
)
MANIFEST
(cd "$work" && swift build -Xswiftc -warnings-as-errors 2>&1 | grep -E "error|warning:|Compiling Block|Build complete" || true)
(cd "$work" && swift build -Xswiftc -warnings-as-errors >/dev/null 2>&1) \
    || { echo "a README block does not build pasted alone (see above)"; exit 1; }
echo "README: $count swift blocks, each builds pasted alone into a new package's main.swift"
