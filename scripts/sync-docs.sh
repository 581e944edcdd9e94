#!/usr/bin/env bash
# Refreshes the example files shown in the Markdown docs.
#
# Markdown cannot include a file, so a doc that shows one carries a copy
# between two markers, fenced with the file's extension as its language:
#
#   <!-- include: examples/soak.toml -->
#   ```toml
#   ...the file, byte for byte...
#   ```
#   <!-- end include -->
#
# This script rewrites everything between each pair of markers from the
# file named (relative to the repository root). tests/examples.rs fails
# when a copy differs from its file, and says to run this script. Edit the
# file, never the copy.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

status=0
# Every Markdown file outside hidden directories and build output.
while IFS= read -r md; do
    grep -q '^<!-- include: .* -->$' "$md" || continue
    tmp=$(mktemp)
    if awk '
        function fail(msg) { printf "%s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"; bad = 1; exit 1 }
        match($0, /^<!-- include: .* -->$/) {
            print
            path = substr($0, 15, length($0) - 18)
            lang = path; sub(/.*\//, "", lang)
            lang = (lang ~ /\./) ? lang : ""; sub(/.*\./, "", lang)
            if ((getline line < path) < 0) fail("cannot read " path)
            close(path)
            printf "```%s\n", lang
            while ((getline line < path) > 0) print line
            close(path)
            print "```"
            skipping = 1
            next
        }
        /^<!-- end include -->$/ {
            if (!skipping) fail("end include without include")
            skipping = 0
            print
            next
        }
        !skipping { print }
        END { if (!bad && skipping) fail("include without end include") }
    ' "$md" >"$tmp"; then
        if cmp -s "$md" "$tmp"; then
            rm -f "$tmp"
        else
            cat "$tmp" >"$md" && rm -f "$tmp"
            echo "updated $md"
        fi
    else
        rm -f "$tmp"
        status=1
    fi
done < <(find . \( -name target -o -name '.?*' \) -prune -o -name '*.md' -type f -print | sort)
exit "$status"
