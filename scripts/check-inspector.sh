#!/usr/bin/env bash
# The inspector in a real browser (scripts/check-inspector.py): Debian's chromium and chromium-driver,
# driven by python3-selenium through Debian's own /usr/bin/python3, installed here when missing.
# usage: scripts/check-inspector.sh [SCREENSHOT_FOLDER]   (default: a temporary folder; docs/ remakes the
# README's pictures)
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v chromium >/dev/null || need+=(chromium)
[ -x /usr/bin/chromedriver ] || command -v chromedriver >/dev/null || need+=(chromium-driver)
/usr/bin/python3 -c "import selenium" 2>/dev/null || need+=(python3-selenium)
if [ ${#need[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y "${need[@]}" || {
            ${SUDO:-} apt-get update
            DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y "${need[@]}"
        }
    else
        echo "the browser test needs: ${need[*]} (Debian's packages): install them"
        exit 1
    fi
fi
shots="${1:-$(mktemp -d)}"
swift build -Xswiftc -warnings-as-errors --product Inspector
timeout 300 /usr/bin/python3 scripts/check-inspector.py "$(swift build --show-bin-path)/Inspector" "$shots"
