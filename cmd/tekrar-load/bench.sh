#!/usr/bin/env bash
# Measures tekrar's two hot paths over HTTP on loopback and, when given the database ceiling
# script, the bare-Postgres ceiling of the same paths right after, at the same concurrency,
# so that the figures can be quoted as ratios measured in one run.
#
# usage: cmd/tekrar-load/bench.sh [-c CLIENTS] [-T SECONDS] [-k REPLAY_KEYS] [-C CEILING_SCRIPT]
#
# tekrar runs as `tekrar dev` on a throwaway private Postgres with default durability (fsync
# and synchronous_commit on), logging as in production but to /dev/null.
set -euo pipefail
clients=16; secs=10; keys=10000; ceiling=""
while getopts c:T:k:C: o; do case $o in c) clients=$OPTARG;; T) secs=$OPTARG;; k) keys=$OPTARG;; C) ceiling=$OPTARG;; *) exit 2;; esac; done
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/tekrar-bench.XXXXXX); chmod 755 "$work"
go build -o "$work/tekrar" ./cmd/tekrar
go build -o "$work/tekrar-load" ./cmd/tekrar-load
port=$((18000 + RANDOM % 1000)); pgport=$((55000 + RANDOM % 1000))
TEKRAR_DEV_DIR="$work/pg" TEKRAR_DEV_PG_PORT=$pgport TEKRAR_ADDR=127.0.0.1:$port \
  TEKRAR_LOG_FORMAT=json TEKRAR_DB_MAX_CONNS=$((clients * 2)) "$work/tekrar" dev >/dev/null 2>"$work/tekrar.log" &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 600); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { cat "$work/tekrar.log" >&2; exit 1; }
  sleep 0.1
done
secret=tekrar_sk_demo_local_only
url=http://127.0.0.1:$port
"$work/tekrar-load" -url "$url" -secret "$secret" -mode first -c "$clients" -d "${secs}s"
"$work/tekrar-load" -url "$url" -secret "$secret" -mode replay -c "$clients" -d "${secs}s" -keys "$keys"
kill -INT $pid; wait $pid || true
if [ -n "$ceiling" ]; then
  "$ceiling" -c "$clients" -T "$secs"
fi
