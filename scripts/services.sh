#!/usr/bin/env bash
# Bring up the four backing services rondo needs, natively, on a Debian/Ubuntu
# machine without Docker and without systemd:
#
#   redis      127.0.0.1:6379   (PING -> PONG, or NOAUTH once `default` is off)
#   rabbitmq   127.0.0.1:5672   (AMQP 0-9-1 header -> Connection.Start frame)
#   zookeeper  127.0.0.1:2181   (ruok -> imok)
#   mariadb    127.0.0.1:3306   (TCP greeting + mariadb-admin ping)
#
# For each service that does not answer on loopback it installs the missing
# Debian packages (apt-get update only if something must be installed), starts
# the daemon detached with its output in ${RONDO_SERVICES_DIR:-/var/lib/rondo-services},
# and waits (bounded) until it answers. Finally it makes sure the MariaDB
# application user rondo/rondo and database `rondo` exist, with ALL on `rondo%`.*
# (tests create their own rondo_t_* databases). On Redis it makes an admin
# user (`rondo-admin`) and the ACL user of each kind of process, and turns
# Redis's `default` user off, so nothing reaches Redis without a user
# (scripts/redis-acl.sh, docs/security.md "Redis users"). A Redis it starts
# itself comes up that way (an aclfile in the state dir).
#
# Idempotent: when everything already answers it only prints one line per service.
# With Docker, use docker-compose.yml at the repository root instead.
#
# Usage: scripts/services.sh [--check] [-h|--help]
#   --check   only report status; exit 1 if a service is down, the app user is
#             missing or Redis's `default` user is open
#
# Environment:
#   RONDO_SERVICES_DIR   state dir for logs, pid files, zoo.cfg, ZooKeeper data
#                        (default /var/lib/rondo-services)
#   RONDO_SERVICES_WAIT  seconds to wait for each started service (default 90)
#   RONDO_NAMESPACE, RONDO_EXECUTOR_APP, RONDO_EXECUTOR_ID
#                        whose Redis users to create (default rondo, demo, demo-1)
#   REDIS_USERS_FILE     their credentials (default $RONDO_SERVICES_DIR/redis-users.env)
#   REDIS_PORT           the Redis's port on 127.0.0.1 (default 6379)
#
# The Redis admin's credentials (REDIS_ADMIN=<user>:<password>) are kept in
# $RONDO_SERVICES_DIR/redis-users.env (mode 600) and copied into
# REDIS_USERS_FILE; sign in with
#   REDISCLI_AUTH=<password> redis-cli --user rondo-admin
set -euo pipefail

STATE_DIR=${RONDO_SERVICES_DIR:-/var/lib/rondo-services}
WAIT_SECS=${RONDO_SERVICES_WAIT:-90}
REDIS_PORT=${REDIS_PORT:-6379}
# The machine's Redis admin lives here, whatever REDIS_USERS_FILE says.
ADMIN_FILE=$STATE_DIR/redis-users.env
USERS_FILE=${REDIS_USERS_FILE:-$ADMIN_FILE}
SERVICES=(redis rabbitmq zookeeper mariadb)

MYSQL_APP_USER=rondo
MYSQL_APP_PASSWORD=rondo
MYSQL_APP_DB=rondo

RABBIT_HOME=/var/lib/rabbitmq
RABBIT_SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server
RABBIT_ENV_CONF=/etc/rabbitmq/rabbitmq-env.conf

# Debian's zookeeper.jar carries a manifest Class-Path naming everything else a
# server needs (zookeeper-jute, netty, metrics-core, slf4j-api, commons-*, ...);
# slf4j-simple is the one extra jar: without it ZooKeeper logs nothing at all.
ZK_CLASSPATH=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar

CHECK_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --check) CHECK_ONLY=1 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "services.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done

log() { echo "services.sh: $*" >&2; }
die() { echo "services.sh: error: $*" >&2; exit 1; }

# ---------------------------------------------------------------- probes ----
# Every probe runs in a child bash under `timeout`, so a half-open port can
# never hang the script.

# Up is an answer: PONG, or NOAUTH once `default` is off.
probe_redis() {
  timeout 3 bash -c '
    exec 3<>/dev/tcp/127.0.0.1/$1 || exit 1
    printf "PING\r\n" >&3
    IFS= read -r -t 2 line <&3 || exit 1
    [[ $line == +PONG* || $line == -NOAUTH* ]]' _ "$REDIS_PORT" 2>/dev/null
}

# Whether Redis's `default` user answers without a password (the hole
# scripts/redis-acl.sh closes).
redis_default_open() {
  [[ $(timeout 3 redis-cli -p "$REDIS_PORT" ACL WHOAMI 2>/dev/null) == default ]]
}

probe_rabbitmq() {
  # AMQP 0-9-1 protocol header; a broker answers with a Connection.Start
  # method frame, whose first byte is the frame type 0x01.
  local first
  first=$(timeout 3 bash -c '
    exec 3<>/dev/tcp/127.0.0.1/5672 || exit 1
    printf "AMQP\x00\x00\x09\x01" >&3
    head -c 1 <&3 | od -An -tx1' 2>/dev/null) || true
  first=${first//[[:space:]]/}
  [[ $first == 01 ]]
}

probe_zookeeper() {
  local reply
  reply=$(timeout 3 bash -c '
    exec 3<>/dev/tcp/127.0.0.1/2181 || exit 1
    printf ruok >&3
    head -c 4 <&3' 2>/dev/null) || true
  [[ $reply == imok ]]
}

probe_mariadb() {
  # The server speaks first (handshake packet), so one byte proves a live server.
  local greeting
  greeting=$(timeout 3 bash -c '
    exec 3<>/dev/tcp/127.0.0.1/3306 || exit 1
    head -c 1 <&3 | od -An -tx1' 2>/dev/null) || true
  [[ -n ${greeting//[[:space:]]/} ]] || return 1
  if command -v mariadb-admin >/dev/null 2>&1; then
    # Exit status is 0 whenever the server is alive, even on "Access denied".
    timeout 5 mariadb-admin --protocol=tcp -h127.0.0.1 -P3306 --connect-timeout=3 \
      ping >/dev/null 2>&1
  fi
}

probe() { "probe_$1"; }

# The app user can log in over TCP, sees database `rondo`, and holds the
# wildcard grant. Needs no root, so the no-op path never needs sudo.
mysql_app_ready() {
  command -v mariadb >/dev/null 2>&1 || return 1
  local grants
  grants=$(MYSQL_PWD=$MYSQL_APP_PASSWORD timeout 10 mariadb --protocol=tcp -h127.0.0.1 \
    -P3306 --connect-timeout=3 -u"$MYSQL_APP_USER" -D "$MYSQL_APP_DB" \
    -N -B -e 'SHOW GRANTS FOR CURRENT_USER()' 2>/dev/null) || return 1
  [[ $grants == *"\`${MYSQL_APP_DB}%\`"* ]]
}

# ---------------------------------------------------------------- status ----
declare -A UP=()
any_down=0
for s in "${SERVICES[@]}"; do
  if probe "$s"; then UP[$s]=1; else UP[$s]=0; any_down=1; fi
done
app_ready=0
if [[ ${UP[mariadb]} == 1 ]] && mysql_app_ready; then app_ready=1; fi

if [[ $CHECK_ONLY == 1 ]]; then
  rc=0
  for s in "${SERVICES[@]}"; do
    if [[ ${UP[$s]} == 1 ]]; then
      if [[ $s == mariadb && $app_ready == 0 ]]; then
        echo "mariadb: up (user ${MYSQL_APP_USER}/database ${MYSQL_APP_DB} missing or lacking grants)"
        rc=1
      elif [[ $s == redis ]] && redis_default_open; then
        echo "redis: up (its \`default\` user is open to anyone on the port: run scripts/services.sh)"
        rc=1
      else
        echo "$s: up"
      fi
    else
      echo "$s: down"; rc=1
    fi
  done
  exit "$rc"
fi

# An admin, and each kind of process its own Redis ACL user (docs/security.md
# "Redis users"), for RONDO_NAMESPACE / RONDO_EXECUTOR_APP / RONDO_EXECUTOR_ID;
# then `default` off. Credentials in the users file (mode 600); the admin's
# also in the machine's ($ADMIN_FILE), which every later run signs in with.
redis_users() {
  REDIS_ADMIN_FILE=$ADMIN_FILE "$(dirname "$0")/redis-acl.sh" "$USERS_FILE" "$REDIS_PORT"
}

if [[ $any_down == 0 && $app_ready == 1 ]]; then
  for s in "${SERVICES[@]}"; do echo "$s: up"; done
  redis_users
  exit 0
fi

# ------------------------------------------------------- need root below ----
if [[ $EUID -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    log "not root; re-running under sudo"
    exec sudo env RONDO_SERVICES_DIR="$STATE_DIR" RONDO_SERVICES_WAIT="$WAIT_SECS" \
      RONDO_NAMESPACE="${RONDO_NAMESPACE:-rondo}" RONDO_EXECUTOR_APP="${RONDO_EXECUTOR_APP:-demo}" \
      RONDO_EXECUTOR_ID="${RONDO_EXECUTOR_ID:-demo-1}" \
      REDIS_USERS_FILE="$USERS_FILE" REDIS_PORT="$REDIS_PORT" ${REDIS_ADMIN:+REDIS_ADMIN="$REDIS_ADMIN"} \
      bash "$0" "$@"
  fi
  die "must run as root (or with sudo available) to install/start services"
fi

mkdir -p "$STATE_DIR"

# --------------------------------------------------------------- install ----
pkgs=()
if [[ ${UP[redis]} == 0 ]] && ! command -v redis-server >/dev/null 2>&1; then
  pkgs+=(redis-server redis-tools)
fi
if [[ ${UP[rabbitmq]} == 0 && ! -x $RABBIT_SERVER ]]; then
  pkgs+=(rabbitmq-server)
fi
if [[ ${UP[zookeeper]} == 0 ]]; then
  command -v java >/dev/null 2>&1 || pkgs+=(default-jre-headless)
  [[ -f /usr/share/java/zookeeper.jar ]] || pkgs+=(zookeeper)
fi
if [[ ${UP[mariadb]} == 0 ]] && ! command -v mysqld_safe >/dev/null 2>&1; then
  pkgs+=(mariadb-server mariadb-client)
elif ! command -v mariadb >/dev/null 2>&1; then
  pkgs+=(mariadb-client)   # needed to create the app user
fi

# The Python side of the tests (schemathesis, the example Python executor)
# lives in a virtualenv that scripts/python-env.sh makes.
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  pkgs+=(python3 python3-venv)
fi

if ((${#pkgs[@]})); then
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install ${pkgs[*]} by hand"
  export DEBIAN_FRONTEND=noninteractive
  # Keep package maintainer scripts from starting daemons (no systemd here; we
  # start them ourselves below). Only if the machine has no policy already.
  tmp_policy=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    tmp_policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$tmp_policy"
    chmod 755 "$tmp_policy"
    trap 'if [[ -n ${tmp_policy:-} ]]; then rm -f "$tmp_policy"; fi' EXIT
  fi
  log "installing: ${pkgs[*]} (apt log: $STATE_DIR/apt.log)"
  apt-get update >>"$STATE_DIR/apt.log" 2>&1 || die "apt-get update failed; see $STATE_DIR/apt.log"
  if ! apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-confold \
      "${pkgs[@]}" >>"$STATE_DIR/apt.log" 2>&1; then
    # A postinst that tried (and failed) to start a daemon is tolerated as long
    # as the files we need are on disk; anything else is fatal below.
    log "warning: apt-get install reported an error (see $STATE_DIR/apt.log); continuing"
  fi
  if [[ -n $tmp_policy ]]; then rm -f "$tmp_policy"; tmp_policy=""; fi
fi

# ----------------------------------------------------------------- start ----
# spawn NAME CMD...: run CMD in a new session, detached from our stdio, output
# appended to $STATE_DIR/NAME.log, pid in $STATE_DIR/NAME.pid (written by the
# child itself, so it may appear a moment after spawn returns).
spawn() {
  local name=$1; shift
  rm -f "$STATE_DIR/$name.pid"
  log_offset "$name"
  # shellcheck disable=SC2016
  local child='echo $$ >"$1"; shift; exec "$@"'
  if [[ ${SPAWN_DETACH:-1} == 1 ]]; then
    setsid -f bash -c "$child" _ "$STATE_DIR/$name.pid" "$@" \
      >>"$STATE_DIR/$name.log" 2>&1 </dev/null
  else
    nohup bash -c "$child" _ "$STATE_DIR/$name.pid" "$@" \
      >>"$STATE_DIR/$name.log" 2>&1 </dev/null &
    disown
  fi
}

# spawned_alive NAME PATTERN: is the process we spawned (a previous run included)
# still alive? Avoids starting a second instance while one is still booting.
spawned_alive() {
  local pidfile=$STATE_DIR/$1.pid pid
  [[ -f $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
  [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == *"$2"* ]]
}

# spawned_died NAME: we spawned it, its pid file exists, and the process is
# gone: kill -0 fails, or it is a zombie (PID 1 in a container may not reap).
# kill -0 is the primary test because it asks the kernel in our own pid
# namespace; /proc may show another namespace's pids in some sandboxes, so a
# missing /proc entry alone never counts as death.
spawned_died() {
  local pidfile=$STATE_DIR/$1.pid pid state
  [[ -f $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 0
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || true
  [[ $state == Z ]]
}

# log_offset NAME: current size of NAME's log, so a failure shows only what
# this run's process wrote, not a previous run's lines.
declare -A LOG_OFFSET=()
log_offset() { LOG_OFFSET[$1]=$(stat -c %s "$STATE_DIR/$1.log" 2>/dev/null || echo 0); }
new_log() {
  local f=$STATE_DIR/$1.log off=${LOG_OFFSET[$1]:-0}
  [[ -f $f ]] || { echo "(no log written)"; return; }
  if (($(stat -c %s "$f") > off)); then
    tail -c +"$((off + 1))" "$f" | tail -n 30
  else
    echo "(the process wrote nothing to $f before it exited)"
  fi
}

# Started with an aclfile that has `default` off and the admin: it is never
# open, and the users made later survive a restart (redis-acl.sh saves them).
start_redis() {
  command -v redis-server >/dev/null 2>&1 || die "redis-server is not installed (see $STATE_DIR/apt.log)"
  mkdir -p "$STATE_DIR/redis"
  REDIS_ADMIN_FILE=$ADMIN_FILE "$(dirname "$0")/redis-acl.sh" --aclfile "$USERS_FILE" \
    "$STATE_DIR/redis/users.acl"
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
    --aclfile "$STATE_DIR/redis/users.acl" \
    --dir "$STATE_DIR/redis" --logfile "$STATE_DIR/redis.log" \
    --pidfile "$STATE_DIR/redis.pid" >>"$STATE_DIR/redis.log" 2>&1 </dev/null \
    || die "redis-server failed to start; see $STATE_DIR/redis.log"
}

start_rabbitmq() {
  [[ -x $RABBIT_SERVER ]] || die "$RABBIT_SERVER is missing (see $STATE_DIR/apt.log)"
  if spawned_alive rabbitmq rabbitmq-server; then return 0; fi
  mkdir -p "$(dirname "$RABBIT_ENV_CONF")"
  touch "$RABBIT_ENV_CONF"
  grep -q '^NODENAME=' "$RABBIT_ENV_CONF" || echo 'NODENAME=rabbit@localhost' >>"$RABBIT_ENV_CONF"
  grep -q '^NODE_IP_ADDRESS=' "$RABBIT_ENV_CONF" || echo 'NODE_IP_ADDRESS=127.0.0.1' >>"$RABBIT_ENV_CONF"
  install -d -o rabbitmq -g rabbitmq "$RABBIT_HOME" /var/log/rabbitmq
  # HOME must be rabbitmq's own: plain `su` keeps root's HOME and the Erlang
  # cookie then cannot be written. Output is redirected by spawn, otherwise su
  # keeps the caller's pipe open forever.
  spawn rabbitmq su -s /bin/sh rabbitmq -c \
    "cd '$RABBIT_HOME' && HOME='$RABBIT_HOME' exec '$RABBIT_SERVER'"
}

start_zookeeper() {
  command -v java >/dev/null 2>&1 || die "java is not installed (see $STATE_DIR/apt.log)"
  [[ -f /usr/share/java/zookeeper.jar ]] || die "/usr/share/java/zookeeper.jar is missing (see $STATE_DIR/apt.log)"
  if spawned_alive zookeeper QuorumPeerMain; then return 0; fi
  local zkdir=$STATE_DIR/zookeeper
  mkdir -p "$zkdir/data"
  # tickTime 500 ms: the server expires sessions in tick-sized buckets, so a
  # dead node is noticed about session_timeout (not session_timeout + 2 s)
  # after it died; sessions may be 1 s to 60 s.
  cat >"$zkdir/zoo.cfg" <<EOF
# written by scripts/services.sh -- rondo development ZooKeeper (standalone)
tickTime=500
dataDir=$zkdir/data
clientPort=2181
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
# the test suite runs many nodes in parallel from one address; 60 is the default cap
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
EOF
  spawn zookeeper java -Xmx512m -cp "$ZK_CLASSPATH" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$zkdir/zoo.cfg"
}

start_mariadb() {
  command -v mysqld_safe >/dev/null 2>&1 || die "mysqld_safe is missing (see $STATE_DIR/apt.log)"
  if [[ ! -d /var/lib/mysql/mysql ]]; then
    log "initialising MariaDB data directory /var/lib/mysql"
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >>"$STATE_DIR/mariadb.log" 2>&1 \
      || die "mariadb-install-db failed; see $STATE_DIR/mariadb.log"
  fi
  # Normally systemd's RuntimeDirectory= creates this.
  install -d -o mysql -g mysql -m 755 /run/mysqld
  if spawned_alive mariadb mysqld_safe; then return 0; fi
  (cd / && spawn mariadb mysqld_safe --user=mysql)
}

log_hint() {
  case $1 in
    rabbitmq) echo "$STATE_DIR/rabbitmq.log (and /var/log/rabbitmq/)" ;;
    mariadb) echo "$STATE_DIR/mariadb.log (and the server's log-error file, e.g. /var/log/mysql/error.log)" ;;
    *) echo "$STATE_DIR/$1.log" ;;
  esac
}

declare -A STARTED_AT=() RETRIED=()
for s in "${SERVICES[@]}"; do
  if [[ ${UP[$s]} == 0 ]]; then
    log "starting $s (log: $(log_hint "$s"))"
    STARTED_AT[$s]=$SECONDS
    "start_$s"
  fi
done

for s in "${SERVICES[@]}"; do
  [[ ${UP[$s]} == 1 ]] && { echo "$s: up"; continue; }
  deadline=$((SECONDS + WAIT_SECS))
  until probe "$s"; do
    if ((SECONDS >= deadline)); then
      new_log "$s" >&2
      die "$s did not answer on loopback within ${WAIT_SECS}s; see $(log_hint "$s")"
    fi
    if [[ $s == zookeeper || $s == rabbitmq ]] && spawned_died "$s"; then
      if [[ -z ${RETRIED[$s]:-} ]]; then
        # One more try, as a plain background child of this script rather than
        # in a new session: some sandboxes kill processes that leave the
        # caller's session.
        RETRIED[$s]=1
        log "$s exited during startup; what it wrote:"
        new_log "$s" >&2
        log "starting $s again without setsid"
        SPAWN_DETACH=0 "start_$s"
        deadline=$((SECONDS + WAIT_SECS))
        continue
      fi
      new_log "$s" >&2
      die "$s exited during startup (twice); see $(log_hint "$s")"
    fi
    sleep 0.5
  done
  UP[$s]=1
  echo "$s: up (started in $((SECONDS - STARTED_AT[$s]))s, log $STATE_DIR/$s.log)"
done

# ------------------------------------------------------ MariaDB app user ----
if ! mysql_app_ready; then
  sql="CREATE DATABASE IF NOT EXISTS \`${MYSQL_APP_DB}\`;"
  for host in localhost 127.0.0.1 %; do
    u="'${MYSQL_APP_USER}'@'${host}'"
    sql+="CREATE USER IF NOT EXISTS $u IDENTIFIED BY '${MYSQL_APP_PASSWORD}';"
    sql+="ALTER USER $u IDENTIFIED BY '${MYSQL_APP_PASSWORD}';"
    sql+="GRANT ALL PRIVILEGES ON \`${MYSQL_APP_DB}%\`.* TO $u;"
  done
  sql+="FLUSH PRIVILEGES;"
  # Fresh Debian installs: root via unix-socket auth. Some machines: root with
  # an empty password over TCP.
  if ! mariadb --protocol=socket -uroot -e "$sql" 2>"$STATE_DIR/mariadb-setup.err" \
     && ! mariadb --protocol=tcp -h127.0.0.1 -P3306 -uroot -e "$sql" 2>>"$STATE_DIR/mariadb-setup.err"; then
    cat "$STATE_DIR/mariadb-setup.err" >&2
    die "could not log in to MariaDB as root (socket or TCP) to create user ${MYSQL_APP_USER}"
  fi
  mysql_app_ready || die "created user ${MYSQL_APP_USER} but it still cannot use database ${MYSQL_APP_DB} over TCP"
  log "mariadb: user ${MYSQL_APP_USER}@{localhost,127.0.0.1,%} and database ${MYSQL_APP_DB} ready (ALL on \`${MYSQL_APP_DB}%\`.*)"
fi


redis_users
