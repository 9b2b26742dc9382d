#!/usr/bin/env bash
# Measures storm isolation: what a storm of replays (tills resending their queues after an
# outage, at 10 times the normal rate) does to the first arrivals that keep coming meanwhile.
#
# usage: cmd/tekrar-load/storm.sh [-R RATE] [-X STORM_RATE] [-C API_CLIENTS] [-k KEYS] [-c CONNS]
#                                 [-s STORM_CONNS] [-T SECONDS] [-r ROUNDS]
#
#   -R RATE         first arrivals a second, open loop (default 50)
#   -X STORM_RATE   replays a second during the storm (default: 10 times RATE)
#   -C API_CLIENTS  API clients whose keys the storm replays (default 10), each created
#                   with `tekrar clients create`; the first arrivals are the demo client's
#   -k KEYS         completed keys per replaying client, seeded with COPY (default 2000)
#   -c CONNS        connections of the first arrivals (default 16)
#   -s STORM_CONNS  connections of the replays (default 64)
#   -T SECONDS      length of the quiet and of the storm window (default 10)
#   -r ROUNDS       rounds (default 5)
#
# It starts a throwaway `tekrar dev` (its own Postgres, default durability), creates the
# clients and seeds their keys (`tekrar-load -mode seed-copy`: completed keys with their
# orders, payments, history and events, as growth.sh seeds), then runs `tekrar-load -mode storm` ROUNDS times: each round
# sends first arrivals at RATE a second from a schedule that does not wait for the server
# (latency counted from each request's due time, so that a slow server cannot lower the load
# offered to it), first through a quiet window, then through a storm window in which the
# replays arrive too. Each round compares its own storm window with its own quiet window a
# few seconds before: these shared machines drift too much for a quiet run minutes apart to
# be the baseline. A settling round comes first and is printed as round 0 but not counted:
# on these machines the first half minute after the set-up stalls first arrivals for 100-260
# ms every 5 s or so, with or without a storm (a run with 1 replay a second showed it in its
# first round as much as runs with 500), so a first round measured that and not the storm.
# It prints each round's line and then
#   storm median p99_ratio=<> (storm_p99 / quiet_p99 of the first arrivals; the issue's bound is 1.5) ...
# Needs Go, the PostgreSQL server binaries (as `tekrar dev` does), psql and curl.
set -euo pipefail
rate=50; srate=""; nclients=10; keys=2000; conns=16; sconns=64; secs=10; rounds=5
while getopts R:X:C:k:c:s:T:r: o; do
  case $o in
    R) rate=$OPTARG;; X) srate=$OPTARG;; C) nclients=$OPTARG;; k) keys=$OPTARG;; c) conns=$OPTARG;;
    s) sconns=$OPTARG;; T) secs=$OPTARG;; r) rounds=$OPTARG;; *) exit 2;;
  esac
done
srate=${srate:-$(awk -v r="$rate" 'BEGIN{print 10 * r}')}
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/tekrar-storm.XXXXXX); chmod 755 "$work"
. cmd/tekrar-load/common.sh
pid=""
cleanup() {
  [ -n "$pid" ] && { kill -INT "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/tekrar" ./cmd/tekrar
go build -o "$work/tekrar-load" ./cmd/tekrar-load
port=$((18000 + RANDOM % 1000)); pgport=$((55000 + RANDOM % 500))
pgurl="postgres://postgres@127.0.0.1:$pgport/tekrar?sslmode=disable"

# The pool is sized for both streams' connections, as a deployment expecting storms would be.
TEKRAR_DEV_DIR="$work/pg" TEKRAR_DEV_PG_PORT=$pgport TEKRAR_ADDR=127.0.0.1:$port \
  TEKRAR_LOG_FORMAT=json TEKRAR_DB_MAX_CONNS=$(( (conns + sconns) < 200 ? conns + sconns : 200 )) \
  "$work/tekrar" dev >/dev/null 2>"$work/tekrar.log" &
pid=$!
wait_ready "http://127.0.0.1:$port" "$pid" "$work/tekrar.log"

secrets=()
for i in $(seq 1 "$nclients"); do
  secrets+=("$(DATABASE_URL="$pgurl" "$work/tekrar" clients create "till fleet $i")")
done
stormsecrets=$(IFS=,; echo "${secrets[*]}")
load() {
  "$work/tekrar-load" -url "http://127.0.0.1:$port" -secret tekrar_sk_demo_local_only -run storm -mode storm \
    -keys "$keys" -storm-secrets "$stormsecrets" -rate "$rate" -storm-rate "$srate" -c "$conns" -storm-c "$sconns" "$@"
}
for s in "${secrets[@]}"; do
  "$work/tekrar-load" -secret "$s" -run storm -mode seed-copy -database-url "$pgurl" -keys "$keys"
done
# As bench.sh: statistics for every table before the first round (seed-copy analysed its own).
psql "$pgurl" -Xq -c "VACUUM ANALYZE" >/dev/null
echo "seeded $keys keys for each of $nclients clients" >&2

echo "0 $(load -no-seed -d "${secs}s" -warmup 2s) (settling: not counted)"
ratios=(); qs=(); ss=(); rps=()
for r in $(seq 1 "$rounds"); do
  out=$(load -no-seed -d "${secs}s" -warmup 2s)
  echo "$r $out"
  ratios+=("$(echo "$out" | field p99_ratio)"); qs+=("$(echo "$out" | field quiet_p99_ms)")
  ss+=("$(echo "$out" | field storm_p99_ms)"); rps+=("$(echo "$out" | field replay_rps)")
done
echo "storm median p99_ratio=$(median "${ratios[@]}") quiet_p99_ms=$(median "${qs[@]}") storm_p99_ms=$(median "${ss[@]}") replay_rps=$(median "${rps[@]}") (first arrivals ${rate}/s, replays ${srate}/s from $nclients clients x $keys keys, ${secs}s windows, $rounds rounds)"
