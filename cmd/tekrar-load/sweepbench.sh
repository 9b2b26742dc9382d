#!/usr/bin/env bash
# Measures what sweeping a large backlog of expired keys costs concurrent checkout traffic.
#
# usage: cmd/tekrar-load/sweepbench.sh [-n KEYS] [-c CLIENTS] [-d SECONDS] [-s SETTLE] [-g GAP]
#                                      [-b BATCH] [-p PAUSE]
#
#   -n KEYS     expired, completed keys to seed (default 1000000)
#   -c CLIENTS  concurrent first-time clients of the load (default 16)
#   -d SECONDS  length of one load window (default 20)
#   -s SETTLE   TEKRAR_SWEEP_SETTLE of the sweep passes (default 1s)
#   -g GAP      seconds between the two passes (default 2)
#   -b BATCH    TEKRAR_SWEEP_BATCH of the passes (default: tekrar's)
#   -p PAUSE    TEKRAR_SWEEP_PAUSE of the passes (default: tekrar's)
#
# In one run it starts a throwaway `tekrar dev` (its own Postgres, default durability, the
# in-process sweeper held off with TEKRAR_SWEEP_INTERVAL=24h), seeds KEYS expired completed
# keys and their orders with SQL, then
#   1. baseline: one window of first-time load with no sweep running;
#   2. during:   first-time load in back-to-back windows of the same length while
#                `tekrar sweep` runs twice: pass 1 writes the tombstones, pass 2 (once they
#                are older than SETTLE) deletes the key rows. Windows continue until both
#                passes are done; the worst window's p99 is the figure compared.
# and prints
#   sweep keys=N pass1_s=.. pass2_s=.. baseline_p99_ms=.. during_p99_ms=.. ratio=.. baseline_rps=.. during_rps=..
# followed by a line with the per-window figures. Needs Go, the PostgreSQL server binaries
# (as `tekrar dev` does), psql and curl.
set -euo pipefail
keys=1000000; clients=16; secs=20; settle=1s; gap=2; batch=""; pause=""
while getopts n:c:d:s:g:b:p: o; do
  case $o in
    n) keys=$OPTARG;; c) clients=$OPTARG;; d) secs=$OPTARG;; s) settle=$OPTARG;; g) gap=$OPTARG;;
    b) batch=$OPTARG;; p) pause=$OPTARG;; *) exit 2;;
  esac
done
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/tekrar-sweepbench.XXXXXX); chmod 755 "$work"
pid=""; loop=""
cleanup() {
  [ -n "$loop" ] && { kill "$loop" 2>/dev/null; wait "$loop" 2>/dev/null || true; }
  [ -n "$pid" ] && { kill -INT "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/tekrar" ./cmd/tekrar
go build -o "$work/tekrar-load" ./cmd/tekrar-load
port=$((18000 + RANDOM % 1000)); pgport=$((55000 + RANDOM % 500))
pgurl="postgres://postgres@127.0.0.1:$pgport/tekrar?sslmode=disable"

TEKRAR_DEV_DIR="$work/pg" TEKRAR_DEV_PG_PORT=$pgport TEKRAR_ADDR=127.0.0.1:$port \
  TEKRAR_LOG_FORMAT=json TEKRAR_DB_MAX_CONNS=$((clients * 2)) TEKRAR_SWEEP_INTERVAL=24h \
  "$work/tekrar" dev >/dev/null 2>"$work/tekrar.log" &
pid=$!
for _ in $(seq 1 600); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { cat "$work/tekrar.log" >&2; exit 1; }
  sleep 0.1
done
curl -fs "http://127.0.0.1:$port/readyz" >/dev/null

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# The backlog: KEYS completed keys of the demo client, each with its paid order, expired over
# the last three hours (created 24 hours before that, the default TTL), response bodies of
# about 400 bytes like the API's. Chunks of 250,000 rows keep each transaction's memory
# bounded. session_replication_role=replica skips the foreign-key triggers of this session
# only: every order id is written by the statement before, so they would check nothing but
# would double the seeding time. CHECK and unique constraints are enforced as usual.
seed_sql() {
  local n=$1 chunk=250000 lo hi
  cat <<SQL
\set ON_ERROR_STOP 1
\set n $n
SET session_replication_role = replica;
SELECT id AS client FROM clients WHERE name = 'demo app' \gset
SELECT nextval(pg_get_serial_sequence('orders', 'id')) AS base \gset
SELECT setval(pg_get_serial_sequence('orders', 'id'), :base + :n) \g /dev/null
SELECT now() AS t0 \gset
SQL
  for ((lo = 1; lo <= n; lo += chunk)); do
    hi=$((lo + chunk - 1 < n ? lo + chunk - 1 : n))
    cat <<SQL
BEGIN;
CREATE TEMP TABLE s ON COMMIT DROP AS
SELECT i, :base + i AS order_id, 100 + i % 100000 AS amount,
       :'t0'::timestamptz - interval '2 minutes' - (:n - i) * (interval '3 hours' / :n) AS expires_at
  FROM generate_series($lo, $hi) i;
INSERT INTO orders (id, client_id, status, amount, currency, items, customer_id, captured_amount,
                    created_at, updated_at)
SELECT order_id, :client, 'paid', amount + 350, 'TRY',
       jsonb_build_array(jsonb_build_object('sku', 'LATTE', 'name', 'Latte', 'quantity', 1, 'unit_amount', amount),
                         jsonb_build_object('sku', 'CROISSANT', 'name', 'Butter croissant', 'quantity', 1, 'unit_amount', 350)),
       'cus_' || i % 1000, amount + 350, expires_at - interval '24 hours', expires_at - interval '24 hours' + interval '40 ms'
  FROM s;
INSERT INTO idempotency_keys (client_id, key, fingerprint, method, path, state, recovery_point, order_id,
                              response_status, response_headers, response_body, created_at, completed_at, expires_at)
SELECT :client, 'seed-' || i, sha256(int8send(i)), 'POST', '/v1/orders', 'completed', 'finished', order_id, 201,
       jsonb_build_object('Location', '/v1/orders/' || order_id, 'Content-Type', 'application/json'),
       convert_to(format('{"id":%s,"status":"paid","amount":%s,"currency":"TRY","items":[{"sku":"LATTE","name":"Latte","quantity":1,"unit_amount":%s},{"sku":"CROISSANT","name":"Butter croissant","quantity":1,"unit_amount":350}],"customer":{"id":"cus_%s"},"payment":{"id":"ch_%s","status":"succeeded","card_brand":"visa","card_last4":"4242"},"refunded_amount":0,"created_at":"%s"}',
                         order_id, amount + 350, amount, i % 1000, substr(md5(i::text), 1, 24),
                         to_json(expires_at - interval '24 hours') #>> '{}'), 'UTF8'),
       expires_at - interval '24 hours', expires_at - interval '24 hours' + interval '40 ms', expires_at
  FROM s;
COMMIT;
SQL
  done
  # The checkpoint writes out and fsyncs what seeding dirtied. Without it the kernel flushes
  # those gigabytes during the first load window, and its stalls are not the sweeper's.
  echo "VACUUM ANALYZE;"
  echo "CHECKPOINT;"
}
t=$(now)
seed_sql "$keys" | psql "$pgurl" -Xq
echo "seeded $keys expired keys in $(since "$t")s: $(psql "$pgurl" -XAtc "SELECT pg_size_pretty(pg_total_relation_size('idempotency_keys'))") idempotency_keys" >&2

load() { "$work/tekrar-load" -url "http://127.0.0.1:$port" -secret tekrar_sk_demo_local_only -mode first -c "$clients" "$@"; }
field() { sed -nE "s/.* $1=([0-9.]+).*/\1/p"; }

# 1. Baseline: no sweep. Its warm-up also warms the server for the windows below.
base=$(load -d "${secs}s" -warmup 2s)
echo "baseline: $base" >&2

# 2. The same load in back-to-back windows while two passes run. Each window runs to its
# end; the loop stops after the window in which the sweep finished.
windows() {
  local i=0 lp=""
  trap '[ -n "$lp" ] && kill "$lp" 2>/dev/null; exit 0' TERM
  while :; do
    i=$((i + 1))
    load -d "${secs}s" -warmup 0s >"$work/window.$i" 2>>"$work/load.err" &
    lp=$!
    wait "$lp"
    lp=""
    [ -e "$work/sweep.done" ] && break
  done
}
windows &
loop=$!
stats() { psql "$pgurl" -XAtc "SELECT (SELECT sum(autovacuum_count) FROM pg_stat_user_tables), (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)"; }
before=$(stats)
sweepenv=(env DATABASE_URL="$pgurl" TEKRAR_SWEEP_SETTLE="$settle" TEKRAR_LOG_FORMAT=text)
[ -n "$batch" ] && sweepenv+=(TEKRAR_SWEEP_BATCH="$batch")
[ -n "$pause" ] && sweepenv+=(TEKRAR_SWEEP_PAUSE="$pause")
sleep 1
t=$(now); p1=$("${sweepenv[@]}" "$work/tekrar" sweep 2>>"$work/sweep.log"); p1s=$(since "$t")
echo "pass 1 (${p1s}s): $p1" >&2
sleep "$gap"
t=$(now); p2=$("${sweepenv[@]}" "$work/tekrar" sweep 2>>"$work/sweep.log"); p2s=$(since "$t")
echo "pass 2 (${p2s}s): $p2" >&2
touch "$work/sweep.done"
wait "$loop"
loop=""
after=$(stats)
# What follows the sweep: autovacuum of the deleted rows, mostly. For the record only.
tail=$(load -d "${secs}s" -warmup 0s)
echo "after: $tail" >&2

during=""
for ((i = 1; ; i++)); do
  [ -e "$work/window.$i" ] || break
  line=$(cat "$work/window.$i")
  echo "window $i: $line" >&2
  during+="$line"$'\n'
done
[ -s "$work/load.err" ] && cat "$work/load.err" >&2
left=$(psql "$pgurl" -XAtc "SELECT count(*) FROM idempotency_keys WHERE key LIKE 'seed-%'")
[ "$left" = 0 ] || echo "warning: $left seeded keys are left after the two passes" >&2

bp=$(echo "$base" | field p99_ms); br=$(echo "$base" | field rps)
# The worst window's p99, the windows' total rate, and every window's p99 for the record.
dp=$(echo -n "$during" | field p99_ms | sort -n | tail -1)
dr=$(echo -n "$during" | field requests | awk -v s="$secs" '{n += $1; w++} END {printf "%.0f", n / (w * s)}')
all=$(echo -n "$during" | field p99_ms | paste -sd/)
errs=$(echo -n "$during" | field errors | awk '{n += $1} END {print n + 0}')
nw=$(echo -n "$during" | grep -c .)
echo "sweep keys=$keys pass1_s=$p1s pass2_s=$p2s baseline_p99_ms=$bp during_p99_ms=$dp ratio=$(awk -v a="$dp" -v b="$bp" 'BEGIN{printf "%.2f", a/b}') baseline_rps=$br during_rps=$dr"
avs=$(( ${after%|*} - ${before%|*} )); cps=$(( ${after#*|} - ${before#*|} ))
echo "sweep windows=$nw window_s=$secs window_p99_ms=$all after_p99_ms=$(echo "$tail" | field p99_ms) after_rps=$(echo "$tail" | field rps) autovacuums=$avs checkpoints=$cps during_errors=$errs baseline_errors=$(echo "$base" | field errors) clients=$clients settle=$settle${batch:+ batch=$batch}${pause:+ pause=$pause}"
