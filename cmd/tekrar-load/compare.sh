#!/usr/bin/env bash
# Compares the first arrivals (or the replays) of several builds of tekrar, each against the
# ceiling in the same round, so that a change is measured against the build before it in one
# sitting rather than against a figure from another hour.
#
# usage: cmd/tekrar-load/compare.sh -S CEILING_DIR [-m first|replay] [-c CLIENTS] [-T SECONDS] [-r ROUNDS] TREE...
#
# Each TREE is a source tree of tekrar (a `git worktree add --detach DIR REV`, or this one):
# the script builds its `tekrar` and runs it as `tekrar dev` on a Postgres of its own, seeds
# the replay keys, and then, round after round, runs each build's load followed by a pgbench
# run of the ceiling (design.sql for first arrivals, replay.sql for replays), reversing the
# builds' order every other round. It prints each run and, per build, the median of its
# per-round ratios against the ceiling, and of its rate over the first build's in the same
# round: the figure to quote for a change.
#
# A first arrival's rate is counted to the last dispatch, as bench.sh counts it, but from the
# orders written rather than the events, so that a build that writes no event is counted too.
#
# COMPARE_SQL, with COMPARE_SQL_TREES (indexes of the trees from 0, space-separated), is run
# on those builds' databases after they start and before the seeding: a schema change to
# measure without a build of its own (dropping an index, say).
set -euo pipefail
clients=16; secs=5; rounds=5; cdir=""; mode=first
while getopts c:T:r:S:m: o; do case $o in c) clients=$OPTARG;; T) secs=$OPTARG;; r) rounds=$OPTARG;; S) cdir=$OPTARG;; m) mode=$OPTARG;; *) exit 2;; esac; done
shift $((OPTIND - 1)); trees=("$@")
{ [ -n "$cdir" ] && [ ${#trees[@]} -gt 0 ] && { [ "$mode" = first ] || [ "$mode" = replay ]; }; } ||
  { echo "usage: $0 -S CEILING_DIR [-m first|replay] [-c CLIENTS] [-T SECONDS] [-r ROUNDS] TREE..." >&2; exit 2; }
cdir=$(cd "$cdir" && pwd)
for i in "${!trees[@]}"; do trees[$i]=$(cd "${trees[$i]}" && pwd); done
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/tekrar-compare.XXXXXX); chmod 755 "$work"
. cmd/tekrar-load/common.sh
. cmd/tekrar-load/ceiling.sh
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
  ceiling_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT
n=${#trees[@]}
for i in $(seq 0 $((n - 1))); do (cd "${trees[$i]}" && go build -o "$work/tekrar$i" ./cmd/tekrar); done
go build -o "$work/tekrar-load" ./cmd/tekrar-load

# The ceiling's Postgres and tables, as bench.sh makes them.
cport=$((55500 + RANDOM % 400))
ceiling_start "$work" "$cport" "$cdir" 10000

# Each build, on its own Postgres.
ports=(); dbs=()
for i in $(seq 0 $((n - 1))); do
  port=$((18000 + i * 10 + RANDOM % 9)); pgport=$((54000 + i * 10 + RANDOM % 9)); ports+=("$port")
  dbs+=("postgres://postgres@127.0.0.1:$pgport/tekrar?sslmode=disable")
  TEKRAR_DEV_DIR="$work/pg$i" TEKRAR_DEV_PG_PORT=$pgport TEKRAR_ADDR=127.0.0.1:$port \
    TEKRAR_LOG_FORMAT=json TEKRAR_DB_MAX_CONNS=$((clients * 2)) "$work/tekrar$i" dev >/dev/null 2>"$work/tekrar$i.log" &
  pids+=($!)
  wait_ready "http://127.0.0.1:$port" "${pids[-1]}" "$work/tekrar$i.log"
  if [ -n "${COMPARE_SQL:-}" ] && [[ " ${COMPARE_SQL_TREES:-} " == *" $i "* ]]; then
    psql "${dbs[$i]}" -Xq -v ON_ERROR_STOP=1 -c "$COMPARE_SQL"
  fi
  "$work/tekrar-load" -url "http://127.0.0.1:$port" -secret tekrar_sk_demo_local_only -run bench -keys 10000 \
    -c "$clients" -mode replay -seed-only -d 1s >/dev/null
  psql "${dbs[$i]}" -Xq -c "VACUUM ANALYZE" >/dev/null
done

tsql() { psql "${dbs[$1]}" -XAtq -c "$2"; }
load() { "$work/tekrar-load" -url "http://127.0.0.1:${ports[$1]}" -secret tekrar_sk_demo_local_only -run bench -keys 10000 -c "$clients" "${@:2}"; }
# run prints "<rate> <p99_ms> <errors>" of build $1.
run() {
  local i=$1 o0 t0 out o1
  if [ "$mode" = replay ]; then
    out=$(load "$i" -mode replay -no-seed -d "${secs}s" -warmup 1s)
    echo "$(echo "$out" | field rps) $(echo "$out" | field p99_ms) $(echo "$out" | field errors)"
    return
  fi
  o0=$(tsql "$i" "SELECT count(*) FROM orders"); t0=$(now)
  out=$(load "$i" -mode first -d "${secs}s" -warmup 1s)
  drained "${dbs[$i]}" || echo "compare: build $i's events still undispatched 2 minutes after its run" >&2
  o1=$(tsql "$i" "SELECT count(*) FROM orders")
  awk -v n=$((o1 - o0)) -v t0="$t0" -v t2="$(now)" -v p99="$(echo "$out" | field p99_ms)" -v e="$(echo "$out" | field errors)" \
    'BEGIN{printf "%.0f %s %s", n/(t2-t0), p99, e}'
}
ceiling() {
  local f=design.sql; [ "$mode" = replay ] && f=replay.sql
  pgbench -n -h 127.0.0.1 -p "$cport" -U postgres -c "$clients" -j 2 -T "$secs" -D nkeys=10000 -f "$cdir/$f" postgres 2>&1 |
    sed -nE 's/^tps = ([0-9.]+).*/\1/p' | head -1
}
for i in $(seq 0 $((n - 1))); do drained "${dbs[$i]}" || { echo "compare: build $i's seeded events were not dispatched" >&2; exit 1; }; done
declare -A ratio over
echo "round build rate p99_ms errors ceiling ratio"
for r in $(seq 1 "$rounds"); do
  order=$(seq 0 $((n - 1))); [ $((r % 2)) = 0 ] && order=$(seq $((n - 1)) -1 0)
  declare -A rate=()
  for i in $order; do
    read -r x p99 e <<<"$(run "$i")"; c=$(ceiling)
    rate[$i]=$x; ratio[$i]+="$(div "$x" "$c" 3) "
    echo "$r $i $x $p99 $e ${c%.*} $(div "$x" "$c" 3)"
  done
  for i in $(seq 0 $((n - 1))); do over[$i]+="$(div "${rate[$i]}" "${rate[0]}" 3) "; done
done
for i in $(seq 0 $((n - 1))); do
  # shellcheck disable=SC2086
  echo "build $i (${trees[$i]}): median ratio $mode=$(median ${ratio[$i]}) over build 0=$(median ${over[$i]}) ($rounds rounds, clients=$clients, ${secs}s runs)"
done
