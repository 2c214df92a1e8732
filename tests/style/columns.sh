#!/usr/bin/env bash
# The column limit (docs/design.md, "Code style"): no line of the project's
# C, C++ or Python passes 120 columns (tabs count 8).  Shell test scripts
# are not held to it: they quote whole expected messages verbatim.
# .clang-format reflows C and C++ to it: clang-format -i --lines=N:N FILE.
#   usage: columns.sh ROOT
set -u
cd "$1" || exit 1
limit=120
bad=$(git ls-files 2>/dev/null | grep -E '\.(c|h|cpp|py)$' | grep -v '^golden/' |
  xargs -r awk -v L=$limit '{ s = $0; gsub(/\t/, "        ", s) } length(s) > L { printf "%s:%d: %d columns\n", FILENAME, FNR, length(s) }')
if [ -n "$bad" ]; then
  echo "$bad" | head -40
  echo "$(echo "$bad" | wc -l) line(s) over $limit columns"
  exit 1
fi
echo "every line within $limit columns"
