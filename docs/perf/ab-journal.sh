#!/usr/bin/env bash
# A/B of the journal append and the one-event-per-call keyed counter across
# checkouts on one machine in one session: builds every side's test binaries
# first, then runs the sides back to back, N rounds, so load that comes and
# goes hits them alike. Prints one line per run, the side's letter first.
#
#   docs/perf/ab-journal.sh N /path/to/checkout-A /path/to/checkout-B [...]
#
# Used for docs/PERFORMANCE.md, "Journal append: one flush".
set -euo pipefail
N=$1; shift
out=$(mktemp -d)
sides=()
i=0
for d in "$@"; do
  s=$(printf "\\x$(printf %x $((65 + i)))"); i=$((i + 1))
  sides+=("$s:$(cd "$d" && pwd)")
  for pkg in badgerdb kernel; do
    (cd "$d" && go test -c -o "$out/$s.$pkg" "./$pkg")
  done
done
for _ in $(seq 1 "$N"); do
  for sd in "${sides[@]}"; do
    s=${sd%%:*}; dir=${sd#*:}
    (cd "$dir/badgerdb" && "$out/$s.badgerdb" -test.run '^$' -test.bench 'Append/frame=(1|100)$' -test.benchtime 1000x) | grep '^Benchmark' | sed "s/^/$s /"
    (cd "$dir/kernel" && "$out/$s.kernel" -test.run '^$' -test.bench 'KeyedCounter/clients=64/' -test.benchtime 50000x) | grep '^Benchmark' | sed "s/^/$s /"
  done
done
rm -rf "$out"
