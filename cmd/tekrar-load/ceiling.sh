# The ceiling's Postgres, as bench.sh and compare.sh start it; sourced, not run, after
# common.sh. The replay keys seeded here are the ones replay.sql draws from (-D nkeys=KEYS),
# so they are made in one place.

bindir=${PG_BINDIR:-$(pg_config --bindir 2>/dev/null || ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# ceiling_start WORK PORT CEILING_DIR KEYS starts the ceiling's Postgres in WORK/ceiling, as the
# ceiling script starts it, on PORT, with CEILING_DIR's schema.sql and KEYS completed keys
# for replay.sql, vacuumed and analysed (so that autovacuum does not start on them in the
# middle of the first rounds). ceiling_stop WORK stops it.
ceiling_start() {
  local work=$1 port=$2 cdir=$3 keys=$4 db="postgres://postgres@127.0.0.1:$2/postgres?sslmode=disable"
  [ "$(id -u)" = 0 ] && chown postgres: "$work"
  as_pg "$bindir/initdb" -D "$work/ceiling" -U postgres -A trust -E UTF8 --locale=C >/dev/null
  as_pg "$bindir/pg_ctl" -D "$work/ceiling" -l "$work/ceiling.log" -w \
    -o "-k $work -p $port -c listen_addresses=127.0.0.1 -c shared_buffers=1GB -c max_connections=200" start >/dev/null
  psql "$db" -Xq -f "$cdir/schema.sql" >/dev/null
  psql "$db" -Xq -c "INSERT INTO idempotency_keys (scope, key, request_hash, status, response_code, response_body)
    SELECT 'merchant-' || (n % 1000), md5('s' || n), sha256(convert_to(n::text, 'UTF8')), 'completed', 201,
           jsonb_build_object('order_id', n, 'status', 'paid') FROM generate_series(1, $keys) n" >/dev/null
  psql "$db" -Xq -c "VACUUM ANALYZE" >/dev/null
}
ceiling_stop() { as_pg "$bindir/pg_ctl" -D "$1/ceiling" -m fast stop >/dev/null 2>&1 || true; }
