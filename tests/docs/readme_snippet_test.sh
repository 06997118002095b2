#!/usr/bin/env bash
# The README's "Using the library" snippet is not written by hand: it is the
# region of tools/examples/decode_c.c between `// [readme-begin]` and
# `// [readme-end]` (less main's two-space indent), which ctest builds and runs.
# This test fails, printing the difference, when the README's block (the ```c
# fence after the `<!-- snippet: ... -->` line) differs from that region;
# `--update` rewrites the README's block from the example instead.
#
#   tests/docs/readme_snippet_test.sh [--update] [SOURCE_DIR]
set -euo pipefail

update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
example="$root/tools/examples/decode_c.c"
readme="$root/README.md"
marker='<!-- snippet: tools/examples/decode_c.c'
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

awk '/\/\/ \[readme-end\]/ { on = 0 } on { print } /\/\/ \[readme-begin\]/ { on = 1 }' "$example" |
  sed 's/^  //' >"$work/example"
[ -s "$work/example" ] || { echo "no [readme-begin] .. [readme-end] region in $example" >&2; exit 1; }

# The fenced block right after the marker line.
awk -v marker="$marker" '
  index($0, marker) == 1 { found = 1; next }
  found == 1 && /^```c$/ { found = 2; next }
  found == 2 && /^```$/  { exit }
  found == 2             { print }' "$readme" >"$work/readme"

if [ "$update" = 1 ]; then
  awk -v marker="$marker" -v snippet="$work/example" '
    index($0, marker) == 1 { print; print "```c"; while ((getline l < snippet) > 0) print l
                             print "```"; skip = 1; next }
    skip == 1 && /^```c$/  { skip = 2; next }
    skip == 2              { if ($0 == "```") skip = 0; next }
    { print }' "$readme" >"$work/README.md"
  cat "$work/README.md" >"$readme"
  echo "README.md: snippet updated from $example"
  exit 0
fi

[ -s "$work/readme" ] || { echo "README.md has no \`$marker ...-->\` line followed by a \`\`\`c block" >&2; exit 1; }
if ! diff -u --label README.md "$work/readme" --label decode_c.c "$work/example"; then
  echo "README.md's snippet differs from tools/examples/decode_c.c's readme region;" \
       "run tests/docs/readme_snippet_test.sh --update" >&2
  exit 1
fi
echo "README.md snippet == tools/examples/decode_c.c [readme-begin..end] ($(wc -l <"$work/example") lines)"
