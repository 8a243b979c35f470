#!/usr/bin/env bash
# rondo's demo: services up, build, then one scheduler node, one executor
# with the built-in handlers and the persistence worker; a sample executor
# group and sample jobs created through the CLI; fires shown as they happen.
#
#   scripts/demo.sh            run until Ctrl-C
#   scripts/demo.sh 30         run for 30 seconds
#
# Everything runs in the namespace `rondo_demo` (Redis keys, queues,
# ZooKeeper chroot) and writes history to the MySQL database `rondo_demo`,
# made afresh each run; the namespace's Redis keys (the sign-in throttle's
# included) are removed before its processes start, as the Redis admin
# scripts/services.sh made. Its admin `admin` gets a new random password
# each run, printed at the end and kept in $STATE/admin-password (mode 600);
# the CLI is signed in with a token in $STATE/credentials.json.
#
# One demo at a time: a second one started while one runs (its script or
# any of its processes) refuses to start, naming it, and changes nothing.
#
# Environment: RONDO_DEMO_DIR (state, default /tmp/rondo-demo), REDIS_PORT
# (the Redis on 127.0.0.1, default 6379).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-0}"
STATE="${RONDO_DEMO_DIR:-/tmp/rondo-demo}"
REDIS_PORT="${REDIS_PORT:-6379}"
export REDIS_PORT
export RONDO_NAMESPACE=rondo_demo
export RONDO_SCHEDULER_API_ADDR=127.0.0.1:8600
export RONDO_EXECUTOR_APP=demo
export RONDO_EXECUTOR_ID=demo-1
export RONDO_REGISTRY_HEARTBEAT_MS=5000
export RONDO_REGISTRY_DEAD_AFTER_MS=15000
export RONDO_API=http://127.0.0.1:8600
DB=rondo_demo
export RONDO_MYSQL_URL="mysql://rondo:rondo@127.0.0.1:3306/$DB"
export RONDO_CREDENTIALS="$STATE/credentials.json"
# services.sh makes each process's Redis ACL user for this namespace.
REDIS_USERS="$STATE/redis-users.env"

if ! command -v cargo >/dev/null 2>&1; then
  echo "demo.sh: cargo is not installed; install a Rust toolchain >= 1.94 (rustup) first" >&2
  exit 1
fi

mkdir -p "$STATE"
chmod 700 "$STATE"
# The lock is held by this script and inherited by every process it starts,
# so it lasts as long as any of them runs, even if this script was killed.
exec 9>>"$STATE/demo.lock"
if ! flock -n 9; then
  echo "demo.sh: a demo is already running (pid $(cat "$STATE/demo.pid" 2>/dev/null || echo '?'), state in $STATE): stop it first (Ctrl-C where it runs); nothing was changed" >&2
  exit 1
fi
echo $$ >"$STATE/demo.pid"
REDIS_USERS_FILE="$REDIS_USERS" scripts/services.sh
# shellcheck disable=SC1090
source "$REDIS_USERS"
echo "== building (debug)"
cargo build --bins
BIN=target/debug
# A fresh database: its user table is empty, so the scheduler makes the
# admin below (there is no built-in password).
mariadb -h127.0.0.1 -urondo -prondo -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB"
rm -f "$RONDO_CREDENTIALS"
# And a clean namespace: a previous run's Redis keys would outlive its
# database (a sign-in throttle that locks `admin` out, jobs the leader
# would bring back).
echo "== removing the Redis keys of namespace $RONDO_NAMESPACE"
(
  export REDISCLI_AUTH="${REDIS_ADMIN#*:}"
  admin=(redis-cli --user "${REDIS_ADMIN%%:*}" -p "$REDIS_PORT")
  "${admin[@]}" --scan --pattern "$RONDO_NAMESPACE:*" \
    | xargs -r -d '\n' -n 500 "${admin[@]}" UNLINK >/dev/null
)
ADMIN_PASSWORD="$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')"
(umask 077; printf '%s\n' "$ADMIN_PASSWORD" >"$STATE/admin-password")

PIDS=()
stop_all() {
  echo
  echo "== stopping (pids ${PIDS[*]:-none})"
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_all EXIT
trap 'exit 0' INT TERM

start() {
  local name=$1; shift
  "$@" >"$STATE/$name.log" 2>&1 &
  PIDS+=($!)
  echo "started $name (pid $!, log $STATE/$name.log)"
}
# Each process signs in to Redis as its own user (the worker never does).
start persist-worker env RONDO_PERSIST_METRICS_ADDR=127.0.0.1:8620 "$BIN/rondo-persist-worker"
# The demo runs a shell job: this executor (on loopback) enables the
# handlers that run commands, which are off by default.
start executor env RONDO_EXECUTOR_COMMAND_HANDLERS=true RONDO_EXECUTOR_METRICS_ADDR=127.0.0.1:8610 \
  RONDO_REDIS_URL="redis://$REDIS_USER_EXECUTOR@127.0.0.1:$REDIS_PORT" "$BIN/rondo-executor"
# The scheduler makes the first admin from these (only on an empty user
# table); only it sees the password in its environment.
start scheduler env RONDO_AUTH_ADMIN_USER=admin RONDO_AUTH_ADMIN_PASSWORD="$ADMIN_PASSWORD" \
  RONDO_REDIS_URL="redis://$REDIS_USER_SCHEDULER@127.0.0.1:$REDIS_PORT" "$BIN/rondo-scheduler"

# Signing the CLI in also waits for the API and the admin to exist.
up=no
for _ in $(seq 1 150); do
  if RONDO_PASSWORD="$ADMIN_PASSWORD" "$BIN/rondo" login --user admin --days 1 >/dev/null 2>&1; then
    up=yes; break
  fi
  sleep 0.2
done
if [[ $up != yes ]]; then
  echo "demo.sh: could not sign in to the scheduler API; its log:" >&2
  tail -20 "$STATE/scheduler.log" >&2
  exit 1
fi
for _ in $(seq 1 50); do
  [[ "$("$BIN/rondo" group executors demo 2>/dev/null)" == *demo-1* ]] && break
  sleep 0.2
done

echo "== creating the sample group and jobs through the CLI"
"$BIN/rondo" group create demo --title "Demo executors" >/dev/null 2>&1 || true
"$BIN/rondo" job create --group demo --handler demo --cron "0/2 * * * * ?" \
  --description "demo handler every 2 s" --params "hello" --routing ROUND | grep -E '"(id|next_fire_ms)"'
"$BIN/rondo" job create --group demo --handler shell --fix-rate 5 \
  --description "shell every 5 s" --params 'echo "shell job on $(hostname)"; date -u' | grep -E '"(id|next_fire_ms)"'
"$BIN/rondo" job create --group demo --handler shell --cron "0 0 2 L * ?" \
  --description "last day of the month at 02:00 (Quartz L)" --params 'echo month end' | grep -E '"(id|next_fire_ms)"'
"$BIN/rondo" cluster | grep -E '"(leader|term|node)"' || true

cat <<MSG

== signed in
   API and console:   $RONDO_API  user admin  password $ADMIN_PASSWORD  (also in $STATE/admin-password)
   the CLI:           export RONDO_CREDENTIALS=$RONDO_CREDENTIALS   (a token, saved by: rondo login --user admin)
   metrics:           curl -H "Authorization: Bearer \$(jq -r '.[].token' $RONDO_CREDENTIALS)" $RONDO_API/metrics
                      curl 127.0.0.1:8610/metrics (executor)   curl 127.0.0.1:8620/metrics (persistence worker)

== fires, as the executor runs them (Ctrl-C to stop)
   history in MySQL:  mariadb -h127.0.0.1 -urondo -prondo $DB -e \\
     'SELECT trigger_id, job_id, trigger_code, handle_code, handle_msg FROM job_log ORDER BY fire_ms DESC LIMIT 10'
   log lines:         ... -e 'SELECT * FROM job_log_line ORDER BY ts_ms DESC LIMIT 10'
   one trigger:       $BIN/rondo log <trigger_id>      job history: $BIN/rondo job logs 1
MSG
# tail exits with this script (--pid).
tail -n0 -F --pid=$$ "$STATE/executor.log" | grep --line-buffered -E "trigger finished" |
  sed -u -E 's/^([^ ]+) .*trigger_id=([^ ]+) job_id=([0-9]+).*code=([0-9]+) elapsed_ms=([0-9]+).*/\1  job \3  trigger \2  code \4  ran \5 ms/' &
if [[ "$DURATION" -gt 0 ]]; then
  sleep "$DURATION"
  echo
  echo "== last triggers stored in MySQL (database $DB)"
  mariadb -h127.0.0.1 -urondo -prondo "$DB" -e \
    'SELECT trigger_id, job_id, trigger_code, handle_code, LEFT(handle_msg, 40) AS handle_msg FROM job_log ORDER BY fire_ms DESC LIMIT 8' || true
else
  wait
fi
