#!/usr/bin/env bash
# Measures tekrar's two hot paths over HTTP on loopback beside the bare-Postgres ceiling of
# the same paths, at the same concurrency, and reports each as a ratio.
#
# usage: cmd/tekrar-load/bench.sh -S CEILING_DIR [-F FIRST_SCRIPT] [-c CLIENTS] [-T SECONDS] [-r ROUNDS] [-k KEYS] [-B]
#
# CEILING_DIR holds the ceiling's schema.sql, replay.sql (the bare replay SELECT) and the
# first-arrival scripts: design.sql (the three commits a crash-safe charge needs: claim, the
# provider's ledger, completion), against which first arrivals are quoted by default, and
# first.sql (one commit, no charge), the figure quoted before; -F picks another. These shared machines drift
# by tens of percent from minute to minute, so the script does not compare two long runs:
# it alternates short runs of tekrar and of pgbench, round after round, and reports the
# median of the per-round ratios.
#
# Each round also sets tekrar's p99 beside the ceiling's own, from the same round: pgbench
# logs every transaction (-l), the load tool reads the logs (-mode pgbench-log) with the
# percentile it uses for tekrar's requests, and the line gives tekrar_p99 / ceiling_p99
# (higher is worse); the last line has the medians of those ratios too. tekrar's p99 leaves
# out its 1-second warm-up; pgbench's covers its whole run.
#
# A first arrival's work does not end with its answer: its order.paid event is dispatched
# after it. So tekrar's first-arrival rate is counted to the last dispatch: the run's orders
# over the time from its start until every event they wrote was dispatched (first_run, below);
# the rate answered and the seconds the dispatch ran on after the run follow on its row. A
# rate of answers alone let a dispatch that fell behind push its work into the ceiling's
# turn and the next round.
#
# tekrar runs as `tekrar dev` on its own private Postgres; the ceiling runs on another,
# started the way the ceiling script starts it. Both have default durability (fsync and
# synchronous_commit on). tekrar logs as in production, to /dev/null.
#
# -B also measures the floor: `tekrar-load -mode floor`, the least Go HTTP server that does
# design.sql's three commits per request (floor.go), on the ceiling's Postgres and tables.
# The ceiling is bare SQL from pgbench, a C client; tekrar is HTTP from a Go load tool to a
# Go server, on the same two cores. The floor is measured the way tekrar is, right after
# tekrar's first-arrival run in each round, and its row ("<round> floor ...", its rate in
# the tekrar_rps column) sets it against the same round's first-arrival ceiling: what HTTP
# and Go cost on this machine. The last lines add the median of those ratios and of tekrar's
# rate over the floor's, each round's: what tekrar costs beyond the floor. The floor's
# replays (keys seeded through it at the start; each a SELECT of the stored answer) are
# measured after tekrar's, against the same round's replay.sql ("<round> floor_replay ...").
set -euo pipefail
clients=16; secs=5; rounds=7; keys=10000; cdir=""; first=design.sql; floor=""
while getopts c:T:r:k:S:F:B o; do case $o in c) clients=$OPTARG;; T) secs=$OPTARG;; r) rounds=$OPTARG;; k) keys=$OPTARG;; S) cdir=$OPTARG;; F) first=$OPTARG;; B) floor=1;; *) exit 2;; esac; done
[ -n "$cdir" ] || { echo "usage: $0 -S CEILING_DIR [-F FIRST_SCRIPT] [-c CLIENTS] [-T SECONDS] [-r ROUNDS] [-k KEYS] [-B]" >&2; exit 2; }
cdir=$(cd "$cdir" && pwd)
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/tekrar-bench.XXXXXX); chmod 755 "$work"
. cmd/tekrar-load/common.sh
. cmd/tekrar-load/ceiling.sh
pid=""; fpid=""
cleanup() {
  [ -n "$pid" ] && { kill -INT "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  [ -n "$fpid" ] && { kill -INT "$fpid" 2>/dev/null; wait "$fpid" 2>/dev/null || true; }
  ceiling_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/tekrar" ./cmd/tekrar
go build -o "$work/tekrar-load" ./cmd/tekrar-load
port=$((18000 + RANDOM % 1000)); fport=$((19000 + RANDOM % 1000)); pgport=$((55000 + RANDOM % 500)); cport=$((55500 + RANDOM % 500))

# The ceiling's Postgres, as the ceiling script starts it.
ceiling_start "$work" "$cport" "$cdir" "$keys"

# tekrar.
TEKRAR_DEV_DIR="$work/pg" TEKRAR_DEV_PG_PORT=$pgport TEKRAR_ADDR=127.0.0.1:$port \
  TEKRAR_LOG_FORMAT=json TEKRAR_DB_MAX_CONNS=$((clients * 2)) "$work/tekrar" dev >/dev/null 2>"$work/tekrar.log" &
pid=$!
wait_ready "http://127.0.0.1:$port" "$pid" "$work/tekrar.log"
# load sends to $url: tekrar's, or the floor's for its runs.
turl="http://127.0.0.1:$port"; url=$turl
load() { "$work/tekrar-load" -url "$url" -secret tekrar_sk_demo_local_only -run bench -keys "$keys" -c "$clients" "$@"; }
load -mode replay -seed-only -d 1s
# As the ceiling's seeded table: vacuumed and analysed, so that autovacuum does not start
# on the seeded tables in the middle of the first rounds.
psql "postgres://postgres@127.0.0.1:$pgport/tekrar?sslmode=disable" -Xq -c "VACUUM ANALYZE" >/dev/null

# The floor, on the ceiling's Postgres and tables, with tekrar's pool size.
if [ -n "$floor" ]; then
  "$work/tekrar-load" -mode floor -database-url "postgres://postgres@127.0.0.1:$cport/postgres?sslmode=disable" \
    -addr 127.0.0.1:$fport -max-conns $((clients * 2)) 2>"$work/floor.log" &
  fpid=$!
  furl="http://127.0.0.1:$fport"
  wait_ready "$furl" "$fpid" "$work/floor.log"
  url=$furl; load -mode replay -seed-only -d 1s; url=$turl # the keys its replays repeat
fi

# One pgbench run; prints "<tps> <p99_ms>", the p99 read from its per-transaction log (one
# file per thread) by the load tool, with the same percentile as tekrar's.
pgb() {
  local tps p99
  rm -f "$work"/pgb.*
  tps=$(pgbench -n -h 127.0.0.1 -p "$cport" -U postgres -c "$clients" -j $(( clients < 2 ? clients : 2 )) -T "$secs" \
    -D nkeys="$keys" -f "$cdir/$1" -l --log-prefix="$work/pgb" postgres 2>&1 | sed -nE 's/^tps = ([0-9.]+).*/\1/p' | head -1)
  p99=$("$work/tekrar-load" -mode pgbench-log "$work"/pgb.* | field p99_ms)
  rm -f "$work"/pgb.*
  echo "$tps $p99"
}
# tekrar's database, and its count of events.
tdb="postgres://postgres@127.0.0.1:$pgport/tekrar?sslmode=disable"
events() { psql "$tdb" -XAtq -c "SELECT count(*) FROM outbox_events"; }
# first_run runs tekrar's first arrivals and then waits until every event they wrote has
# been dispatched; it prints "<orders a second, counted to the last dispatch> <p99_ms>
# <answered a second> <seconds the dispatch ran on after the run>". Each order writes one
# event (order.paid), so the first figure is the orders of the run, warm-up included, over
# the time from its start to its last dispatch: a run whose dispatch falls behind leaves
# that work to the next run or to the ceiling's, and would be quoted for work not yet done.
first_run() {
  local e0 t0 t1 out n
  e0=$(events); t0=$(now)
  out=$(load -mode first -d "${secs}s" -warmup 1s); t1=$(now)
  drained "$tdb" || echo "bench: events still undispatched 2 minutes after the run; its rate counts to now" >&2
  n=$(( $(events) - e0 ))
  awk -v n="$n" -v t0="$t0" -v t1="$t1" -v t2="$(now)" -v rps="$(echo "$out" | field rps)" -v p99="$(echo "$out" | field p99_ms)" \
    'BEGIN{printf "%.0f %s %s %.1f", n/(t2-t0), p99, rps, t2-t1}'
}
# The seeded keys' events are dispatched before the first round, which would wait for them.
drained "$tdb" || drained "$tdb" || { echo "bench: the seeded keys' events were not dispatched within 4 minutes" >&2; exit 1; }
echo "round path tekrar_rps ceiling_tps ratio tekrar_p99_ms ceiling_p99_ms p99_ratio (first: answered_rps drain_s)"
fr=(); rr=(); fp=(); rp=(); lr=(); tl=(); lr2=(); tl2=()
for r in $(seq 1 "$rounds"); do
  read -r tf pf ta td <<<"$(first_run)"
  if [ -n "$floor" ]; then
    url=$furl; out=$(load -mode first -d "${secs}s" -warmup 1s); url=$turl
    ff=$(echo "$out" | field rps); pff=$(echo "$out" | field p99_ms)
  fi
  read -r cf cpf <<<"$(pgb "$first")"
  out=$(load -mode replay -no-seed -d "${secs}s" -warmup 1s); tr=$(echo "$out" | field rps); pr=$(echo "$out" | field p99_ms)
  if [ -n "$floor" ]; then
    url=$furl; out=$(load -mode replay -no-seed -d "${secs}s" -warmup 1s); url=$turl
    fr1=$(echo "$out" | field rps); pfr=$(echo "$out" | field p99_ms)
  fi
  read -r cr cpr <<<"$(pgb replay.sql)"
  rf=$(div "$tf" "$cf"); rr1=$(div "$tr" "$cr"); qf=$(div "$pf" "$cpf"); qr=$(div "$pr" "$cpr")
  echo "$r first $tf ${cf%.*} $rf $pf $cpf $qf $ta $td"
  if [ -n "$floor" ]; then
    rl=$(div "$ff" "$cf")
    echo "$r floor $ff ${cf%.*} $rl $pff $cpf $(div "$pff" "$cpf")"
    lr+=("$rl"); tl+=("$(div "$tf" "$ff")")
  fi
  echo "$r replay $tr ${cr%.*} $rr1 $pr $cpr $qr"
  if [ -n "$floor" ]; then
    rl2=$(div "$fr1" "$cr")
    echo "$r floor_replay $fr1 ${cr%.*} $rl2 $pfr $cpr $(div "$pfr" "$cpr")"
    lr2+=("$rl2"); tl2+=("$(div "$tr" "$fr1")")
  fi
  fr+=("$rf"); rr+=("$rr1"); fp+=("$qf"); rp+=("$qr")
done
echo "median ratio first=$(median "${fr[@]}") (against $first) replay=$(median "${rr[@]}") (clients=$clients, ${secs}s runs, $rounds rounds)"
echo "median p99 ratio first=$(median "${fp[@]}") (against $first) replay=$(median "${rp[@]}") (tekrar's p99 over the ceiling's, lower is better)"
[ -z "$floor" ] || echo "median ratio floor=$(median "${lr[@]}") (a Go HTTP server doing design.sql's three commits, against $first) tekrar/floor=$(median "${tl[@]}")"
[ -z "$floor" ] || echo "median ratio floor_replay=$(median "${lr2[@]}") (the same server's replays, one SELECT each, against replay.sql) tekrar/floor=$(median "${tl2[@]}")"
