#!/bin/bash
# The C++ code blocks of the README and docs/, each taken from a compiled source: each is
# preceded by a marker line `<!-- snippet: PATH NAME -->` and must equal the lines of PATH between its
# two `// [NAME]` lines (less their common indentation). A block that drifts from its
# source fails this check, and so does a C++ block without a marker; `--write` rewrites the
# blocks from their sources instead.
# Usage: snippets.sh REPO [--write]
set -euo pipefail
repo=$1 write=${2:-}
cd "$repo"

region() { # PATH NAME: the marked lines, dedented
    awk -v tag="// [$2]" '
        { t = $0; sub(/^[ \t]+/, "", t) }
        t == tag { inside = !inside; found++; next }
        inside { lines[n++] = $0 }
        END {
            if (found != 2) { print "snippets: " FILENAME ": no pair of \"" tag "\" lines" > "/dev/stderr"; exit 1 }
            indent = -1
            for (i = 0; i < n; i++)
                if (lines[i] ~ /[^ ]/) { match(lines[i], /^ */); if (indent < 0 || RLENGTH < indent) indent = RLENGTH }
            for (i = 0; i < n; i++) print substr(lines[i], indent + 1)
        }' "$1"
}

render() { # DOC: the doc with each marked block replaced by its region
    local line path= name= state=text
    while IFS= read -r line || [ -n "$line" ]; do
        case $state in
        text)
            printf '%s\n' "$line"
            [[ ${line#"${line%%[! ]*}"} != '```cpp'* ]] || # (indented too: in a list)
                { echo "snippets: $1: a C++ block not taken from a compiled source (no marker)" >&2; return 1; }
            if [[ $line =~ ^'<!-- snippet: '([^ ]+)' '([^ ]+)' -->'$ ]]; then
                path=${BASH_REMATCH[1]} name=${BASH_REMATCH[2]} state=fence
            fi ;;
        fence)
            printf '%s\n' "$line"
            [[ $line == '```'* ]] || { echo "snippets: $1: no code block after the marker of $path $name" >&2; return 1; }
            region "$path" "$name"
            state=block ;;
        block) [[ $line != '```' ]] || { printf '%s\n' "$line"; state=text; } ;;
        esac
    done <"$1"
    [ $state = text ] || { echo "snippets: $1: the block of $path $name never ends" >&2; return 1; }
}

status=0 blocks=0
for doc in README.md docs/*.md; do
    blocks=$((blocks + $(grep -c '^<!-- snippet: ' "$doc" || true)))
    out=$(mktemp)
    if ! render "$doc" >"$out"; then
        status=1
    elif ! cmp -s "$doc" "$out"; then
        if [ "$write" = --write ]; then
            cp "$out" "$doc"
            echo "snippets: rewrote $doc"
        else
            echo "snippets: $doc differs from its sources (\`tests/snippets.sh . --write\` rewrites it):"
            diff "$doc" "$out" || true
            status=1
        fi
    fi
    rm -f "$out"
done
echo "snippets: $blocks blocks checked"
[ "$blocks" -gt 0 ] || { echo "snippets: no marked block found"; exit 1; }
exit $status
