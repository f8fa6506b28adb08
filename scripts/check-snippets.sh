#!/usr/bin/env bash
# Compiles the user-syntax snippets in scripts/snippets/ with swiftc against the built modules, exactly
# as written (trailing closures, no convenient variant), and checks each against its header:
#
#   // must compile; await: NAME     built, linked and run; NAME is a command the snippet executes: the
#   // expect: LINE                  program ends once it is terminal and its callbacks ran; stdout
#                                    must be exactly the `expect:` lines, in order
#   // must not compile
#   // expect-error: TEXT            swiftc must reject it with a diagnostic containing TEXT
#
# Run by .ci/run. Usage: scripts/check-snippets.sh [SNIPPET.swift ...]
set -euo pipefail
cd "$(dirname "$0")/.."

swift build -Xswiftc -warnings-as-errors --target CommandGraph >/dev/null
# The durable snippets are only type-checked (rejections): its module, and SQLite's module map.
swift build -Xswiftc -warnings-as-errors --target CommandDurable >/dev/null
bin=$(swift build --show-bin-path)
# The objects of the current sources (the build folder may still hold those of renamed files).
objects=()
while IFS= read -r object; do objects+=("$object"); done < <(
    python3 -c '
import json, sys
for target in sys.argv[2:]:
    files = json.load(open(f"{sys.argv[1]}/{target}.build/output-file-map.json"))
    for entry in files.values():
        if entry.get("object"):
            print(entry["object"])
' "$bin" CommandCore CommandGraph
)
# The C module CommandCore imports internally (its atomics): its module map for the compiler, its object
# for the linker.
objects+=("$bin/CommandAtomics.build/CommandAtomics.c.o")
cmodules=(-Xcc "-fmodule-map-file=$bin/CommandAtomics.build/module.modulemap"
    -Xcc "-fmodule-map-file=Sources/CSQLite/module.modulemap")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

snippets=("$@")
[ ${#snippets[@]} -eq 0 ] && snippets=(scripts/snippets/*.swift)
failures=0
for snippet in "${snippets[@]}"; do
    name=$(basename "$snippet" .swift)
    header=$(sed -n '1p' "$snippet")
    grep '^// expect: ' "$snippet" | sed 's|^// expect: ||' >"$work/$name.expected" || true
    case "$header" in
    "// must compile; await: "*)
        awaited=${header#"// must compile; await: "}
        # The snippet as written, then a footer that waits for the awaited command on the main queue
        # (where the snippet's callbacks arrive: it executed on the main thread) and exits after its
        # callbacks: the main queue runs them before this hop (a 1 s grace for other observers: 100 ms
        # once lost an `execute` observer's two lines on a machine busy with the test suite).
        {
            cat "$snippet"
            printf '\n// check-snippets.sh footer\n'
            printf '%s.observeState(on: .main) { state in\n' "$awaited"
            printf '    guard state.isTerminal else { return }\n'
            printf '    DispatchQueue.main.asyncAfter(deadline: .now() + .seconds(1)) { exit(0) }\n'
            printf '}\ndispatchMain()\n'
        } >"$work/main.swift"
        if ! swiftc -swift-version 6 -warnings-as-errors -I "$bin/Modules" "${cmodules[@]}" -module-name Snippet \
            "$work/main.swift" "${objects[@]}" -o "$work/$name" 2>"$work/$name.log"; then
            echo "FAIL $name: does not compile"
            sed 's/^/    /' "$work/$name.log"
            failures=$((failures + 1))
            continue
        fi
        if ! timeout 60 "$work/$name" >"$work/$name.out" 2>"$work/$name.err"; then
            echo "FAIL $name: did not exit cleanly within 60 s"
            sed 's/^/    /' "$work/$name.out" "$work/$name.err"
            failures=$((failures + 1))
            continue
        fi
        if ! diff -u "$work/$name.expected" "$work/$name.out" >"$work/$name.diff"; then
            echo "FAIL $name: printed something else (- expected, + printed)"
            sed 's/^/    /' "$work/$name.diff"
            failures=$((failures + 1))
            continue
        fi
        echo "ok   $name: compiles, prints $(paste -sd '|' "$work/$name.out")"
        ;;
    "// must not compile")
        expected=$(sed -n 's|^// expect-error: ||p' "$snippet")
        [ -n "$expected" ] || { echo "FAIL $name: no expect-error line"; failures=$((failures + 1)); continue; }
        # Compiled to an object, not only type-checked: some diagnostics (a missing return) come later.
        if swiftc -swift-version 6 -c -I "$bin/Modules" "${cmodules[@]}" "$snippet" -o "$work/$name.o" >"$work/$name.log" 2>&1; then
            echo "FAIL $name: compiles, but must not"
            failures=$((failures + 1))
        elif ! grep -qF -- "$expected" "$work/$name.log"; then
            echo "FAIL $name: rejected, but without \"$expected\":"
            sed 's/^/    /' "$work/$name.log"
            failures=$((failures + 1))
        else
            echo "ok   $name: rejected with \"$expected\""
        fi
        ;;
    *)
        echo "FAIL $name: first line must be '// must compile; await: NAME' or '// must not compile'"
        failures=$((failures + 1))
        ;;
    esac
done
if [ "$failures" -gt 0 ]; then
    echo "$failures snippet(s) failed"
    exit 1
fi
echo "${#snippets[@]} snippets as expected"
