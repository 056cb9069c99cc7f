#!/usr/bin/env bash
# aosd bench on a world in PostgreSQL beside a Badger world, alternated in one
# window (docs/PERFORMANCE.md, "A world on PostgreSQL"). Starts a throwaway
# PostgreSQL 15 cluster in /tmp/aospg on port 55432 (as the postgres user when
# root) and stops it after.
# usage: docs/perf/pgbench.sh AOSD OUTDIR [ROUNDS]   (AOSD: a built aosd binary)
set -euo pipefail
AOSD=$1; OUT=$2; ROUNDS=${3:-2}
BIN=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
PGD=/tmp/aospg; PORT=55432
mkdir -p $OUT
AS=""; [ "$(id -u)" = 0 ] && AS="runuser -u postgres --"
if [ ! -d $PGD/data ]; then
  mkdir -p $PGD && chown postgres $PGD
  $AS $BIN/initdb -D $PGD/data -A trust -U postgres >/dev/null
fi
$AS $BIN/pg_ctl -D $PGD/data -l $PGD/log -o "-p $PORT -c listen_addresses=127.0.0.1 -k $PGD -c max_connections=200" -w start >/dev/null || true
URL="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
n=0
for r in $(seq 1 $ROUNDS); do
  for C in 1 16 64 256; do
    ev=20000; [ $C = 1 ] && ev=4000
    for kind in pg badger; do
      n=$((n+1)); d=/tmp/aosb-$kind-$C-$r; rm -rf $d
      if [ $kind = pg ]; then extra="--postgres $URL --schema b${C}_$r"; else extra=""; fi
      echo "== round $r C=$C $kind $(date +%T)"
      $AOSD bench --start $d --concurrency $C --events $ev --keys 1000 $extra --json > $OUT/$kind-$C-$r.json 2>$OUT/$kind-$C-$r.err || echo "FAILED $kind $C $r"
      python3 -c "import json;d=json.load(open('$OUT/$kind-$C-$r.json'));g=d.get('group_commit') or {};print('%.0f ev/s p50 %.2f p99 %.2f ms cpu/1k %s flush %.2f ms %.0f rec/flush'%(d['events_per_second'],d['latency_ms']['p50'],d['latency_ms']['p99'],d.get('daemon_cpu_seconds_per_1k_events'),g.get('mean_flush_ms',0),g.get('mean_records_per_flush',0)))" 2>/dev/null || tail -3 $OUT/$kind-$C-$r.err
      rm -rf $d
    done
  done
done
$AS $BIN/pg_ctl -D $PGD/data -m fast stop >/dev/null
