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
#   1. baseline: one window of first-time load with no sweep;
#   2. during:   `tekrar sweep` twice in the background, pass 1 writing the tombstones and
#                pass 2 (once they are older than SETTLE) deleting the key rows, under the
#                same load in windows of the same length: "on" windows with the sweep
#                running alternate with "off" windows with it stopped, until it is done.
# and prints
#   sweep keys=N pass1_s=.. pass2_s=.. baseline_p99_ms=.. during_p99_ms=.. ratio=.. baseline_rps=.. during_rps=..
# where during_p99_ms is the worst "on" window's p99 and pass*_s leave out the "off" windows,
# then a line with every window's p99 and the ratio of each "on" window's p99 to the "off"
# window's after it. Progress goes to stderr. Needs Go, the PostgreSQL server binaries (as
# `tekrar dev` does), psql, curl and pkill.
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
. cmd/tekrar-load/common.sh
pid=""; sw=""
cleanup() {
  if [ -n "$sw" ]; then
    pkill -CONT -P "$sw" 2>/dev/null; kill -CONT "$sw" 2>/dev/null
    pkill -TERM -P "$sw" 2>/dev/null; kill "$sw" 2>/dev/null; wait "$sw" 2>/dev/null || true
  fi
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
wait_ready "http://127.0.0.1:$port" "$pid" "$work/tekrar.log"

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

stats() { psql "$pgurl" -XAtc "SELECT (SELECT sum(autovacuum_count) FROM pg_stat_user_tables), (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)"; }

# 1. Baseline: no sweep. Its warm-up also warms the server for the windows below.
base=$(load -d "${secs}s" -warmup 2s)
echo "baseline: $base" >&2
before=$(stats)

# 2. Two passes in the background: pass 1 tombstones, pass 2 (its tombstones now older than
# SETTLE) deletes. Each records when it ran.
sweepenv=(env DATABASE_URL="$pgurl" TEKRAR_SWEEP_SETTLE="$settle" TEKRAR_LOG_FORMAT=text)
[ -n "$batch" ] && sweepenv+=(TEKRAR_SWEEP_BATCH="$batch")
[ -n "$pause" ] && sweepenv+=(TEKRAR_SWEEP_PAUSE="$pause")
sweeps() {
  local t
  for p in 1 2; do
    [ "$p" = 1 ] || sleep "$gap"
    t=$(now)
    "${sweepenv[@]}" "$work/tekrar" sweep >"$work/pass$p" 2>>"$work/sweep.log"
    echo "$t $(now)" >"$work/pass$p.t"
  done
  touch "$work/sweep.done"
}
# The load runs in windows that alternate: one with the sweep running ("on"), then one with
# it stopped (SIGSTOP; a statement in flight finishes in Postgres, no new one starts)
# ("off"), until the sweep is done; the window after it is the last "off" one. This machine
# drifts by tens of percent within minutes, so next to the baseline taken before the sweep,
# each "on" window is also compared with the "off" window just after it. What the sweep
# leaves to the server (autovacuum of the deleted rows, checkpoints) goes on in both.
sweep_stop() { kill -STOP "$sw" 2>/dev/null || true; pkill -STOP -P "$sw" 2>/dev/null || true; }
sweep_cont() { pkill -CONT -P "$sw" 2>/dev/null || true; kill -CONT "$sw" 2>/dev/null || true; }
sweeps &
sw=$!
: >"$work/stops"
for ((i = 1; ; i++)); do
  load -d "${secs}s" -warmup 0s >"$work/on.$i" 2>>"$work/load.err"
  [ -e "$work/sweep.done" ] || ! kill -0 "$sw" 2>/dev/null && break
  sweep_stop
  t=$(now)
  load -d "${secs}s" -warmup 0s >"$work/off.$i" 2>>"$work/load.err"
  echo "$t $(now)" >>"$work/stops"
  sweep_cont
done
wait "$sw"
sw=""
after=$(stats)
load -d "${secs}s" -warmup 0s >"$work/off.$i" 2>>"$work/load.err"
rounds=$i

on=""; off=""
for ((i = 1; i <= rounds; i++)); do
  echo "on  $i: $(cat "$work/on.$i")" >&2
  echo "off $i: $(cat "$work/off.$i")" >&2
  on+="$(cat "$work/on.$i")"$'\n'; off+="$(cat "$work/off.$i")"$'\n'
done
[ -s "$work/load.err" ] && cat "$work/load.err" >&2
# A pass's own time: its wall time less the "off" windows that stopped it.
active() {
  awk -v r="$(cat "$work/pass$1.t")" '
    BEGIN { split(r, p, " "); t = p[2] - p[1] }
    { a = ($1 > p[1] ? $1 : p[1]); b = ($2 < p[2] ? $2 : p[2]); if (b > a) t -= b - a }
    END { printf "%.1f", t }' "$work/stops"
}
p1s=$(active 1); p2s=$(active 2)
echo "pass 1 (${p1s}s running): $(cat "$work/pass1")" >&2
echo "pass 2 (${p2s}s running): $(cat "$work/pass2")" >&2
left=$(psql "$pgurl" -XAtc "SELECT count(*) FROM idempotency_keys WHERE key LIKE 'seed-%'")
[ "$left" = 0 ] || echo "warning: $left seeded keys are left after the two passes" >&2

bp=$(echo "$base" | field p99_ms); br=$(echo "$base" | field rps)
# The worst "on" window's p99 against the baseline, the "on" windows' total rate, and the
# ratio of each "on" window's p99 to the next "off" one's (median and worst).
dp=$(echo -n "$on" | field p99_ms | sort -n | tail -1)
rate() { field requests | awk -v s="$secs" '{n += $1; w++} END {printf "%.0f", n / (w * s)}'; }
dr=$(echo -n "$on" | rate); or=$(echo -n "$off" | rate)
pairs=$(paste <(echo -n "$on" | field p99_ms) <(echo -n "$off" | field p99_ms) | awk '{printf "%.2f\n", $1 / $2}' | sort -n)
pmed=$(echo "$pairs" | awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : sprintf("%.2f", (a[NR / 2] + a[NR / 2 + 1]) / 2))}')
pmax=$(echo "$pairs" | tail -1)
errs=$(echo -n "$on$off" | field errors | awk '{n += $1} END {print n + 0}')
avs=$((${after%|*} - ${before%|*})); cps=$((${after#*|} - ${before#*|}))
echo "sweep keys=$keys pass1_s=$p1s pass2_s=$p2s baseline_p99_ms=$bp during_p99_ms=$dp ratio=$(awk -v a="$dp" -v b="$bp" 'BEGIN{printf "%.2f", a/b}') baseline_rps=$br during_rps=$dr"
echo "sweep rounds=$rounds window_s=$secs paired_ratio_median=$pmed paired_ratio_max=$pmax off_rps=$or on_p99_ms=$(echo -n "$on" | field p99_ms | paste -sd/) off_p99_ms=$(echo -n "$off" | field p99_ms | paste -sd/) autovacuums=$avs checkpoints=$cps errors=$errs clients=$clients settle=$settle${batch:+ batch=$batch}${pause:+ pause=$pause}"
