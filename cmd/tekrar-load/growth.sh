#!/usr/bin/env bash
# Measures growth: what a replay and a first arrival cost with N stored keys against 10,000,
# and what the sweeper costs checkout at that size.
#
# usage: cmd/tekrar-load/growth.sh [-n KEYS] [-m SMALL] [-e EXPIRED] [-c CLIENTS] [-T SECONDS]
#                                  [-r ROUNDS] [-w SWEEP_WINDOW] [-f]
#
#   -n KEYS          keys of the large database (default 10000000)
#   -m SMALL         keys of the small one (default 10000)
#   -e EXPIRED       expired keys seeded after the large database's live ones, for the
#                    sweeper (default: 1% of KEYS, a few hours' worth at that size)
#   -c CLIENTS       concurrent clients of the load (default 16)
#   -T SECONDS       length of one load run (default 5)
#   -r ROUNDS        rounds (default 5)
#   -w SWEEP_WINDOW  length of the load windows around the sweep, seconds (default 10)
#   -f               seed even if the disk looks too small
#
# It starts two throwaway `tekrar dev` servers (each its own Postgres, default durability,
# the in-process sweeper held off with TEKRAR_SWEEP_INTERVAL=24h, the replay cache off
# unless TEKRAR_REPLAY_CACHE_BYTES is set: it measures what the database's size costs, and
# the cache would answer all of the small server's keys from memory and few of the large
# one's) and seeds them with
# `tekrar-load -mode seed-copy` (COPY, not requests: completed keys with their orders,
# payments, key history and events, then VACUUM ANALYZE). Then, in one sitting:
#   1. ROUNDS rounds, each alternating the two servers as bench.sh alternates tekrar and the
#      ceiling: first arrivals on small and on large, replays (of the seeded keys) on small
#      and on large, the large server first in every other round; each round gives large/small of the rate and of the p99, and the last
#      line their medians:
#        growth median first rps_ratio=.. p99_ratio=.. replay rps_ratio=.. p99_ratio=..
#      replay_recent is the large server's newest SMALL keys (tekrar-load -recent) against the
#      small server's: retries come minutes after their first arrival, so their keys are the
#      newest, and a database larger than the machine's memory reads a random old key from
#      disk, which the replay row (uniform over every key) measures;
#      (rps_ratio = large_rps / small_rps: the issue's bound on cost, 1.2x, is a rate ratio
#      of at least 0.83; p99_ratio = large_p99 / small_p99, at most 1.2);
#   2. the sweeper at the large size: a window of first-arrival load with no sweep, then
#      `tekrar sweep` twice (pass 1 tombstones the EXPIRED keys, pass 2 deletes them) under
#      load in windows of the same length until it is done:
#        growth sweep keys=N expired=E pass1_s=.. pass2_s=.. baseline_p99_ms=.. during_p99_ms=.. ratio=..
#      during_p99_ms is the worst window's p99 while the sweep ran (sweepbench.sh measures
#      the same with windows that stop the sweep in between, against a million-key backlog).
# The large database needs about 3 KB of disk a key and half as much again for the WAL and
# the indexes' growth under load; the script measures the small database's bytes a key first
# and stops before seeding if the disk looks too small (10 million keys: about 45 GB). The
# seeding writes some thousands of keys a second: 10 million take most of an hour. Needs Go, the PostgreSQL server binaries, psql and curl.
set -euo pipefail
big=10000000; small=10000; expired=""; clients=16; secs=5; rounds=5; swin=10; force=""
while getopts n:m:e:c:T:r:w:f o; do
  case $o in
    n) big=$OPTARG;; m) small=$OPTARG;; e) expired=$OPTARG;; c) clients=$OPTARG;; T) secs=$OPTARG;;
    r) rounds=$OPTARG;; w) swin=$OPTARG;; f) force=1;; *) exit 2;;
  esac
done
expired=${expired:-$((big / 100))}
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/tekrar-growth.XXXXXX); chmod 755 "$work"
. cmd/tekrar-load/common.sh
pids=(); sw=""
cleanup() {
  if [ -n "$sw" ]; then pkill -TERM -P "$sw" 2>/dev/null; kill "$sw" 2>/dev/null; wait "$sw" 2>/dev/null || true; fi
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/tekrar" ./cmd/tekrar
go build -o "$work/tekrar-load" ./cmd/tekrar-load

# start NAME: a tekrar dev of its own; sets port_NAME and url_NAME.
start() {
  local port=$((18000 + RANDOM % 1000)) pgport=$((55000 + RANDOM % 500))
  while [ "$port" = "${port_small:-}" ] || [ "$pgport" = "${pgport_small:-}" ]; do
    port=$((18000 + RANDOM % 1000)); pgport=$((55000 + RANDOM % 500))
  done
  TEKRAR_DEV_DIR="$work/$1" TEKRAR_DEV_PG_PORT=$pgport TEKRAR_ADDR=127.0.0.1:$port \
    TEKRAR_LOG_FORMAT=json TEKRAR_DB_MAX_CONNS=$((clients * 2)) TEKRAR_SWEEP_INTERVAL=24h \
    TEKRAR_REPLAY_CACHE_BYTES=${TEKRAR_REPLAY_CACHE_BYTES:-0} \
    "$work/tekrar" dev >/dev/null 2>"$work/$1.log" &
  pids+=($!)
  wait_ready "http://127.0.0.1:$port" "${pids[-1]}" "$work/$1.log"
  printf -v "port_$1" %s "$port"; printf -v "pgport_$1" %s "$pgport"
  printf -v "url_$1" %s "postgres://postgres@127.0.0.1:$pgport/tekrar?sslmode=disable"
}
start small
start large
dbsize() { psql "$1" -XAtc "SELECT pg_database_size(current_database())"; }
seed() { # URL KEYS EXPIRED
  "$work/tekrar-load" -secret tekrar_sk_demo_local_only -run growth -mode seed-copy -database-url "$1" -keys "$2" -expired "$3"
}

empty=$(dbsize "$url_small")
seed "$url_small" "$small" 0
perkey=$(( ($(dbsize "$url_small") - empty) / small ))
# The large database's need: the small one's bytes a key, times 1.5 for the WAL the load
# writes and the checkpoints keep, and for the indexes' growth by random inserts.
need=$(( perkey * (big + expired) * 3 / 2 / 1024 / 1024 ))
avail=$(( $(df -Pk "$work" | awk 'NR==2 {print $4}') / 1024 ))
echo "disk: about ${perkey} bytes a key; $((big + expired)) keys need about ${need} MB, ${avail} MB are free" >&2
if [ "$need" -gt "$avail" ] && [ -z "$force" ]; then
  echo "not enough disk for $big keys (-f to try anyway)" >&2; exit 1
fi
t=$(now)
seed "$url_large" "$big" "$expired"
echo "seeded $big keys and $expired expired ones in $(since "$t")s: $(psql "$url_large" -XAtc "SELECT pg_size_pretty(pg_database_size(current_database()))")" >&2
# What seeding dirtied is written out now, not during the first rounds.
psql "$url_small" -Xq -c CHECKPOINT; psql "$url_large" -Xq -c CHECKPOINT

load() { # NAME MODE args...
  local p="port_$1"
  "$work/tekrar-load" -url "http://127.0.0.1:${!p}" -secret tekrar_sk_demo_local_only -run growth -c "$clients" -mode "$2" "${@:3}"
}
echo "round path small_rps large_rps rps_ratio small_p99_ms large_p99_ms p99_ratio"
fr=(); fp=(); rr=(); rp=(); nr=(); np=()
for r in $(seq 1 "$rounds"); do
  # Odd rounds run small first, even rounds large first, so that a machine that slows
  # down or speeds up within a round favours neither.
  if (( r % 2 )); then
    sf=$(load small first -d "${secs}s" -warmup 1s); lf=$(load large first -d "${secs}s" -warmup 1s)
    sr=$(load small replay -no-seed -keys "$small" -d "${secs}s" -warmup 1s)
    lr=$(load large replay -no-seed -keys "$big" -d "${secs}s" -warmup 1s)
    sn=$(load small replay -no-seed -keys "$small" -d "${secs}s" -warmup 1s)
    ln=$(load large replay -no-seed -keys "$big" -recent "$small" -d "${secs}s" -warmup 1s)
  else
    lf=$(load large first -d "${secs}s" -warmup 1s); sf=$(load small first -d "${secs}s" -warmup 1s)
    lr=$(load large replay -no-seed -keys "$big" -d "${secs}s" -warmup 1s)
    sr=$(load small replay -no-seed -keys "$small" -d "${secs}s" -warmup 1s)
    ln=$(load large replay -no-seed -keys "$big" -recent "$small" -d "${secs}s" -warmup 1s)
    sn=$(load small replay -no-seed -keys "$small" -d "${secs}s" -warmup 1s)
  fi
  a=$(div "$(echo "$lf" | field rps)" "$(echo "$sf" | field rps)"); b=$(div "$(echo "$lf" | field p99_ms)" "$(echo "$sf" | field p99_ms)")
  c=$(div "$(echo "$lr" | field rps)" "$(echo "$sr" | field rps)"); d=$(div "$(echo "$lr" | field p99_ms)" "$(echo "$sr" | field p99_ms)")
  echo "$r first $(echo "$sf" | field rps) $(echo "$lf" | field rps) $a $(echo "$sf" | field p99_ms) $(echo "$lf" | field p99_ms) $b"
  e=$(div "$(echo "$ln" | field rps)" "$(echo "$sn" | field rps)"); f=$(div "$(echo "$ln" | field p99_ms)" "$(echo "$sn" | field p99_ms)")
  echo "$r replay $(echo "$sr" | field rps) $(echo "$lr" | field rps) $c $(echo "$sr" | field p99_ms) $(echo "$lr" | field p99_ms) $d"
  echo "$r replay_recent $(echo "$sn" | field rps) $(echo "$ln" | field rps) $e $(echo "$sn" | field p99_ms) $(echo "$ln" | field p99_ms) $f"
  for o in "$sf" "$lf" "$sr" "$lr" "$sn" "$ln"; do [ "$(echo "$o" | field errors)" = 0 ] || echo "errors: $o" >&2; done
  fr+=("$a"); fp+=("$b"); rr+=("$c"); rp+=("$d"); nr+=("$e"); np+=("$f")
done
echo "growth median first rps_ratio=$(median "${fr[@]}") p99_ratio=$(median "${fp[@]}") replay rps_ratio=$(median "${rr[@]}") p99_ratio=$(median "${rp[@]}") replay_recent rps_ratio=$(median "${nr[@]}") p99_ratio=$(median "${np[@]}") (large=$big small=$small keys, clients=$clients, ${secs}s runs, $rounds rounds)"

# 2. The sweeper at the large size.
base=$(load large first -d "${swin}s" -warmup 1s)
sweeps() {
  local t
  for p in 1 2; do
    [ "$p" = 1 ] || sleep 2
    t=$(now)
    DATABASE_URL="$url_large" TEKRAR_SWEEP_SETTLE=1s TEKRAR_LOG_FORMAT=text "$work/tekrar" sweep >"$work/pass$p" 2>>"$work/sweep.log"
    since "$t" >"$work/pass$p.s"
  done
  touch "$work/sweep.done"
}
sweeps &
sw=$!
during=()
while :; do
  out=$(load large first -d "${swin}s" -warmup 0s)
  during+=("$(echo "$out" | field p99_ms)")
  [ -e "$work/sweep.done" ] && break
done
wait "$sw"; sw=""
left=$(psql "$url_large" -XAtc "SELECT count(*) FROM idempotency_keys WHERE expires_at < now() - interval '1 minute'")
[ "$left" = 0 ] || echo "warning: $left expired keys are left after the two passes" >&2
bp=$(echo "$base" | field p99_ms); dp=$(printf '%s\n' "${during[@]}" | sort -n | tail -1)
echo "growth sweep keys=$big expired=$expired pass1_s=$(cat "$work/pass1.s") pass2_s=$(cat "$work/pass2.s") baseline_p99_ms=$bp during_p99_ms=$dp ratio=$(div "$dp" "$bp") windows=${#during[@]} window_s=$swin during_p99s_ms=$(IFS=/; echo "${during[*]}")"
