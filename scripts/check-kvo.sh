#!/usr/bin/env bash
# Every KVO post of the library goes through one helper, `publish(_:_:)` in
# Sources/CommandCore/OperationFace/Command+OperationFace.swift, which brackets each change with a
# willChangeValue/didChangeValue pair. On Linux `willChangeValue` does nothing, so no test can catch a
# missing one; on Apple platforms an OperationQueue needs both. This check fails on any other call.
set -euo pipefail
cd "$(dirname "$0")/.."
helper=Sources/CommandCore/OperationFace/Command+OperationFace.swift
status=0
others=$(grep -rnE '(will|did)ChangeValue\(' Sources --include='*.swift' | grep -v "^$helper:" | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -n "$others" ]; then
    echo "KVO posted outside $helper (use publish(_:_:)):"
    echo "$others"
    status=1
fi
will=$(grep -cE '^\s*keys\.forEachName \{ willChangeValue\(forKey: \$0\) \}' "$helper" || true)
did=$(grep -cE '^\s*keys\.forEachName \{ didChangeValue\(forKey: \$0\) \}' "$helper" || true)
calls=$(grep -vE '^\s*//' "$helper" | grep -cE '(will|did)ChangeValue\(' || true)
if [ "$will" != 1 ] || [ "$did" != 1 ] || [ "$calls" != 2 ]; then
    echo "$helper must post KVO in exactly one will/did pair (found will=$will did=$did calls=$calls)"
    status=1
fi
[ "$status" = 0 ] && echo "KVO: every willChangeValue/didChangeValue is the one helper's pair"
exit "$status"
