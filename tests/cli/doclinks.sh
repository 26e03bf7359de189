#!/bin/bash
# Every documentation file the repository cites exists: each `docs/NAME.md` in include/,
# src/, docs/, bench/, tools/, tests/, examples/ and README.md, and each relative Markdown
# link `](NAME.md)` inside docs/ (and `](docs/NAME.md)` in README.md), resolved in the
# repository. A citation of a file outside it (the project brief's ../shared/docs) counts
# as dangling too: a user of the repository does not have it. Prints every dangling
# reference with its file and line.
set -euo pipefail
source "$(dirname "$0")/common.bash"

cd "$DD_SOURCE_DIR"
dirs=(include src docs README.md)
for d in bench tools tests examples; do [ -d "$d" ] && dirs+=("$d"); done
refs=$(grep -rnoE "(\.\./shared/)?docs/[A-Za-z0-9_.-]+\.md" "${dirs[@]}" --exclude=doclinks.sh || true)
n=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    n=$((n + 1))
    ref=${line##*:}
    where=${line%:*}
    if [[ "$ref" == ../shared/* ]]; then
        fail "$where cites $ref, outside the repository"
    elif [ -f "$ref" ]; then
        pass
    else
        fail "$where cites $ref, which does not exist"
    fi
done <<<"$refs"
# relative links of the Markdown files in docs/
links=$(grep -noE "\]\([A-Za-z0-9_.-]+\.md(#[^)]*)?\)" docs/*.md || true)
while IFS= read -r line; do
    [ -n "$line" ] || continue
    n=$((n + 1))
    file=${line%%:*}
    name=$(sed -E 's/.*\]\(([^)#]*).*/\1/' <<<"$line")
    if [ -f "docs/$name" ]; then pass; else fail "${line%:*} links $name: docs/$name does not exist"; fi
done <<<"$links"
echo "checked $n documentation references"
if [ "$n" -lt 100 ]; then fail "only $n references found: the search is broken"; fi
finish
