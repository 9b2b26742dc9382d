# The helpers every benchmark script here shares; sourced, not run.

curl_ok() { curl -fs "$1" >/dev/null 2>&1; }
# wait_ready URL PID LOG waits up to a minute for the server at URL (process PID, writing
# LOG) to answer /readyz. If the process exits first, or it never answers, it prints LOG and
# ends the script: a benchmark against a server that is not there measures nothing.
wait_ready() {
  for _ in $(seq 1 600); do
    curl_ok "$1/readyz" && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "$1 did not become ready" >&2; cat "$3" >&2; exit 1
}
# field NAME prints the value of NAME=<number> in the line on stdin (the load tool's).
field() { sed -nE "s/.* $1=([0-9.]+).*/\1/p"; }
# div A B [DIGITS] prints A/B (0 when B is 0) with DIGITS decimals, 2 by default.
div() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN{printf "%.*f", d, (b > 0 ? a/b : 0)}'; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }
# drained DATABASE_URL waits up to 2 minutes for tekrar's outbox there to be dispatched (no
# event left in the queue but discarded ones); false if it was not.
drained() {
  for _ in $(seq 1 1200); do
    [ "$(psql "$1" -XAtq -c 'SELECT count(*) FROM outbox_queue WHERE discarded_at IS NULL')" = 0 ] && return 0
    sleep 0.1
  done
  return 1
}
# since T prints the seconds from T (a now) to now, to a tenth.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
