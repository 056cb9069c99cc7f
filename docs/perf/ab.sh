#!/usr/bin/env bash
# A/B throughput of two checkouts on one machine in one session: builds the
# test binaries of both first, then runs them alternately N times, so load
# that comes and goes hits both sides alike. Prints one line per run, the
# side first.
#
#   docs/perf/ab.sh /path/to/checkout-A /path/to/checkout-B [N]
#
# Benchmarks: the kernel's keyed counter, the example worlds' steps (wasm and
# native), and the receipt round trip through the dispatcher and HTTP.
set -euo pipefail
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); N=${3:-5}
out=$(mktemp -d)
for side in A B; do
  dir=${!side}
  for pkg in kernel examples effects; do
    (cd "$dir" && go test -c -o "$out/$side.$pkg" "./$pkg")
  done
done
run() { # side pkg bench benchtime
  (cd "${!1}/$2" && "$out/$1.$2" -test.run '^$' -test.bench "$3" -test.benchtime "$4") | grep '^Benchmark' | sed "s/^/$1 /"
}
for _ in $(seq 1 "$N"); do
  for side in A B; do
    run "$side" kernel KeyedCounter 200000x
    run "$side" examples WorldSteps 20000x
    run "$side" effects ReceiptRoundTrip 20000x
  done
done
rm -rf "$out"
