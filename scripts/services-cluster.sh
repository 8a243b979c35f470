#!/usr/bin/env bash
# The cluster topology, natively on one machine, beside the single-node
# services of scripts/services.sh (which it runs first, for the packages and
# MariaDB):
#
#   Redis Cluster   3 masters 127.0.0.1:7000-7002, a replica each 7003-7005
#   ZooKeeper       3-member ensemble, clients 127.0.0.1:22181-22183
#                   (quorum 22881-22883, election 23881-23883)
#   RabbitMQ        3-node cluster r1..r3@localhost, AMQP 127.0.0.1:5681-5683
#                   (distribution 25681-25683)
#
# Usage: scripts/services-cluster.sh [up|down|status]
#   up      (default) start what does not answer, form the clusters, wait
#           until each is whole; idempotent
#   down    stop every member this script started (by pid file / node name)
#   status  one line per member; exit 1 if one is down
#
# Environment:
#   RONDO_SERVICES_DIR   state dir (default /var/lib/rondo-services); the
#                        cluster's members live under its cluster/ subdir
#   RONDO_SERVICES_WAIT  seconds to wait for each member (default 120)
#   RONDO_NAMESPACE, RONDO_EXECUTOR_APP, RONDO_EXECUTOR_ID, REDIS_USERS_FILE
#                        the Redis ACL users made on every node, as in
#                        scripts/services.sh (credentials default to
#                        cluster/redis-users.env)
#   REDIS_CLUSTER_PORTS  the Redis nodes' ports (default 7000 7001 7002 7003
#                        7004 7005: three masters, then their replicas)
#   CLUSTER_PARTS        which clusters `up` and `down` handle (default
#                        "redis zookeeper rabbitmq")
#
# Redis: every node is closed to connections without a user, as the
# single Redis of scripts/services.sh is, with the same admin (its
# credentials in $RONDO_SERVICES_DIR/redis-users.env). A node starts from a
# config file of its own (mode 600) naming an aclfile (`default` off, the
# admin, the users saved by scripts/redis-acl.sh) and `masteruser` /
# `masterauth`: replicas sync as the admin. redis-cli signs in with
#   REDISCLI_AUTH=<password> redis-cli --user rondo-admin -p 7000 …
#
# Pitfalls handled (../shared/ECOSYSTEM.md §5): a RabbitMQ node restarted
# while its peers are down waits for them and then stops, so `up` starts
# every stopped node at once before it waits; EVALSHA routed to a master
# that never saw the script gets NOSCRIPT (the client reloads it); a Redis
# slot left half-moved is closed with `redis-cli --cluster fix`, and a
# cluster that neither becomes whole nor can be fixed is formed anew, empty
# (it holds only what tests and the demo put there).
set -euo pipefail
cd "$(dirname "$0")/.."

STATE_DIR=${RONDO_SERVICES_DIR:-/var/lib/rondo-services}
WAIT_SECS=${RONDO_SERVICES_WAIT:-120}
DIR=$STATE_DIR/cluster
ACTION=${1:-up}
PARTS=" ${CLUSTER_PARTS:-redis zookeeper rabbitmq} "
part() { [[ $PARTS == *" $1 "* ]]; }

read -r -a REDIS_PORTS <<<"${REDIS_CLUSTER_PORTS:-7000 7001 7002 7003 7004 7005}"
REDIS_PORTS=(${REDIS_PORTS[@]//,/ })
REDIS_FIRST=${REDIS_PORTS[0]}
# The machine's Redis admin (scripts/services.sh keeps it); the cluster's
# own process users beside it.
ADMIN_FILE=$STATE_DIR/redis-users.env
USERS_FILE=${REDIS_USERS_FILE:-$DIR/redis-users.env}
ZK_IDS=(1 2 3)
RABBIT_IDS=(1 2 3)
RABBIT_HOME=/var/lib/rabbitmq
RABBIT_BIN=/usr/lib/rabbitmq/bin
ZK_CLASSPATH=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar

log() { echo "services-cluster.sh: $*" >&2; }
die() { echo "services-cluster.sh: error: $*" >&2; exit 1; }

case $ACTION in
  up|down|status) ;;
  -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  *) die "unknown action $ACTION (up, down or status)" ;;
esac

if [[ $EUID -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "must run as root (or with sudo available)"
  exec sudo env RONDO_SERVICES_DIR="$STATE_DIR" RONDO_SERVICES_WAIT="$WAIT_SECS" \
    RONDO_NAMESPACE="${RONDO_NAMESPACE:-rondo}" RONDO_EXECUTOR_APP="${RONDO_EXECUTOR_APP:-demo}" \
    RONDO_EXECUTOR_ID="${RONDO_EXECUTOR_ID:-demo-1}" REDIS_USERS_FILE="$USERS_FILE" \
    REDIS_CLUSTER_PORTS="${REDIS_PORTS[*]}" CLUSTER_PARTS="$PARTS" \
    ${REDIS_PORT:+REDIS_PORT="$REDIS_PORT"} ${REDIS_ADMIN:+REDIS_ADMIN="$REDIS_ADMIN"} \
    bash "$0" "$@"
fi

# redis-cli signed in as the admin: its password in REDISCLI_AUTH, never on
# a command line. A node that does not know the admin yet (one set up
# before `default` was closed) answers as `default`.
load_admin() {
  ADMIN=${REDIS_ADMIN:-$( [[ -f $ADMIN_FILE ]] && sed -n 's/^REDIS_ADMIN=//p' "$ADMIN_FILE" | tail -n 1 || true)}
}
load_admin
# rcli SECONDS ARGS...: redis-cli as the admin, given SECONDS to finish.
rcli() {
  local t=$1; shift
  if [[ -n $ADMIN ]]; then
    REDISCLI_AUTH=${ADMIN#*:} timeout "$t" redis-cli --user "${ADMIN%%:*}" "$@"
  else
    timeout "$t" redis-cli "$@"
  fi
}

# ---------------------------------------------------------------- probes ----
# Up is an answer: PONG, or NOAUTH from a node that does not know the admin.
redis_up() { timeout 2 redis-cli -p "$1" ping 2>/dev/null | grep -qE '^(PONG|NOAUTH)'; }
redis_cluster_ok() {
  rcli 3 -p "$REDIS_FIRST" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || return 1
  # three masters, each with a replica
  # (flags are the third field: "myself,master", "slave", "master,fail", …)
  local nodes masters replicas
  nodes=$(rcli 3 -p "$REDIS_FIRST" cluster nodes 2>/dev/null) || return 1
  masters=$(awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != ""' <<<"$nodes" | wc -l)
  replicas=$(awk '$3 ~ /slave/ && $3 !~ /fail/ && $8 == "connected"' <<<"$nodes" | wc -l)
  [[ $masters -ge 3 && $replicas -ge 3 ]]
}
zk_port() { echo $((22180 + $1)); }
zk_mode() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$(zk_port "$1"); printf srvr >&3; cat <&3" 2>/dev/null | sed -n 's/^Mode: //p'; }
zk_up() { [[ -n $(zk_mode "$1") ]]; }
rabbit_node() { echo "r$1@localhost"; }
rabbit_port() { echo $((5680 + $1)); }
rabbitmqctl_as() { timeout 60 su -s /bin/sh rabbitmq -c "cd '$RABBIT_HOME' && HOME='$RABBIT_HOME' $RABBIT_BIN/rabbitmqctl $*"; }
rabbit_up() {
  timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$(rabbit_port "$1"); printf 'AMQP\x00\x00\x09\x01' >&3; head -c 1 <&3" >/dev/null 2>&1
}
rabbit_running_nodes() {
  rabbitmqctl_as -n "$(rabbit_node 1)" -q cluster_status --formatter json 2>/dev/null \
    | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("running_nodes", [])))' 2>/dev/null || echo 0
}
rabbit_cluster_whole() { [[ $(rabbit_running_nodes) -ge 3 ]]; }

status() {
  local down=0
  part redis && for p in "${REDIS_PORTS[@]}"; do
    if redis_up "$p"; then echo "redis 127.0.0.1:$p: up"; else echo "redis 127.0.0.1:$p: down"; down=1; fi
  done
  if ! part redis; then :
  elif redis_cluster_ok; then echo "redis cluster: ok"; else echo "redis cluster: not formed"; down=1; fi
  part zookeeper && for i in "${ZK_IDS[@]}"; do
    local mode; mode=$(zk_mode "$i")
    if [[ -n $mode ]]; then echo "zookeeper 127.0.0.1:$(zk_port "$i"): $mode"; else echo "zookeeper 127.0.0.1:$(zk_port "$i"): down"; down=1; fi
  done
  part rabbitmq && for i in "${RABBIT_IDS[@]}"; do
    if rabbit_up "$i"; then echo "rabbitmq $(rabbit_node "$i") 127.0.0.1:$(rabbit_port "$i"): up"; else echo "rabbitmq $(rabbit_node "$i"): down"; down=1; fi
  done
  return $down
}

# ------------------------------------------------------------------- down ----
kill_pidfile() {
  local f=$1 pid
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  part redis && for p in "${REDIS_PORTS[@]}"; do
    redis_up "$p" && rcli 5 -p "$p" shutdown nosave >/dev/null 2>&1 || true
    kill_pidfile "$DIR/redis-$p/redis.pid"
  done
  part zookeeper && for i in "${ZK_IDS[@]}"; do kill_pidfile "$DIR/zk$i/zk.pid"; done
  part rabbitmq && for i in "${RABBIT_IDS[@]}"; do
    if [[ -f $DIR/r$i/rabbitmq.env ]]; then
      rabbitmqctl_as -n "$(rabbit_node "$i")" stop >/dev/null 2>&1 || true
    fi
    kill_pidfile "$DIR/r$i/rabbitmq.pid"
  done
  log "cluster members stopped"
}

case $ACTION in
  status) status; exit $? ;;
  down) down; exit 0 ;;
esac

# --------------------------------------------------------------------- up ----
# The single-node services first: they install the packages (and MariaDB
# serves both topologies).
scripts/services.sh >/dev/null
load_admin
mkdir -p "$DIR"

spawn() { # spawn PIDFILE LOG CMD...
  local pidfile=$1 logf=$2; shift 2
  # shellcheck disable=SC2016
  setsid -f bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidfile" "$@" >>"$logf" 2>&1 </dev/null
}

wait_for() { # wait_for WHAT CMD...
  local what=$1; shift
  local deadline=$((SECONDS + WAIT_SECS))
  until "$@"; do
    ((SECONDS < deadline)) || die "$what not ready within ${WAIT_SECS}s (logs under $DIR)"
    sleep 0.5
  done
}

# ---- Redis Cluster: 3 masters, a replica each.
# A node's own files: its aclfile (`default` off, the admin, the users saved
# before) and a config file (mode 600: the admin's password) naming it and
# the user replicas sync as.
redis_node_files() {
  local d=$1
  REDIS_ADMIN_FILE=$ADMIN_FILE scripts/redis-acl.sh --aclfile "$USERS_FILE" "$d/users.acl"
  load_admin
  (
    umask 077
    printf '# written by scripts/services-cluster.sh\naclfile "%s"\nmasteruser "%s"\nmasterauth "%s"\n' \
      "$d/users.acl" "${ADMIN%%:*}" "${ADMIN#*:}" >"$d/redis.conf"
  )
}
# Each process's ACL user (docs/security.md), on every node (ACL users are
# not replicated), the admin, `masteruser`/`masterauth`, and `default` off.
redis_users() {
  REDIS_ADMIN_FILE=$ADMIN_FILE scripts/redis-acl.sh "$USERS_FILE" "${REDIS_PORTS[@]}"
  load_admin
}
redis_start() {
  local p d
  for p in "${REDIS_PORTS[@]}"; do
    redis_up "$p" && continue
    d=$DIR/redis-$p
    mkdir -p "$d"
    redis_node_files "$d"
    redis-server "$d/redis.conf" --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-config-file "$d/nodes.conf" --cluster-node-timeout 3000 \
      --appendonly no --save "" --dir "$d" --daemonize yes \
      --logfile "$d/redis.log" --pidfile "$d/redis.pid" >/dev/null \
      || die "redis-server :$p failed to start; see $d/redis.log"
  done
  for p in "${REDIS_PORTS[@]}"; do wait_for "redis :$p" redis_up "$p"; done
  redis_users
}
# Forms the cluster if its nodes know no one; waits until it is whole.
# Returns 1 if it does not become whole in time.
redis_form() {
  redis_cluster_ok && return 0
  local known hosts p deadline=$((SECONDS + WAIT_SECS))
  known=$(rcli 3 -p "$REDIS_FIRST" cluster info | sed -n 's/^cluster_known_nodes:\([0-9]*\).*/\1/p')
  if [[ ${known:-1} -le 1 ]]; then
    log "forming the redis cluster (3 masters, 3 replicas)"
    hosts=(); for p in "${REDIS_PORTS[@]}"; do hosts+=("127.0.0.1:$p"); done
    rcli 120 --cluster create "${hosts[@]}" --cluster-replicas 1 --cluster-yes \
      >"$DIR/redis-create.log" 2>&1 || { cat "$DIR/redis-create.log" >&2; die "redis-cli --cluster create failed"; }
  fi
  until redis_cluster_ok; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}
# The last resort for a cluster that cannot be mended: every node stopped,
# its cluster configuration forgotten, the cluster formed anew, empty. It
# holds only what tests and the demo put there (each under a namespace of
# its own, removed when done).
redis_recreate() {
  log "$1: recreating the redis cluster, empty"
  local p
  for p in "${REDIS_PORTS[@]}"; do
    redis_up "$p" && rcli 5 -p "$p" shutdown nosave >/dev/null 2>&1 || true
    kill_pidfile "$DIR/redis-$p/redis.pid"
    rm -f "$DIR/redis-$p/nodes.conf" "$DIR/redis-$p/dump.rdb"
  done
  redis_start
  redis_form || die "the redis cluster is not whole within ${WAIT_SECS}s even when recreated (logs under $DIR)"
}
redis_open_slots() {
  local check
  check=$(rcli 10 --cluster check "127.0.0.1:$REDIS_FIRST" 2>/dev/null || true)
  grep -q 'slots are open' <<<"$check"
}
if part redis; then
redis_start
redis_form || redis_recreate "the redis cluster is not whole within ${WAIT_SECS}s"
# A slot left half-migrated (a resharding stopped midway, e.g. a test that
# panicked while it moved one) answers ASK for new keys forever: finish it,
# and if redis-cli cannot (it gives up on a slot open on several nodes),
# start over.
if redis_open_slots; then
  log "closing a half-migrated redis slot (redis-cli --cluster fix)"
  if ! rcli 60 --cluster fix "127.0.0.1:$REDIS_FIRST" --cluster-yes >"$DIR/redis-fix.log" 2>&1 \
    || ! redis_form || redis_open_slots; then
    redis_recreate "redis-cli --cluster fix left it broken (see $DIR/redis-fix.log)"
  fi
fi
echo "redis cluster: ok (masters and replicas on 127.0.0.1, ports ${REDIS_PORTS[*]})"
fi

# ---- ZooKeeper ensemble of three.
if part zookeeper; then
command -v java >/dev/null 2>&1 || die "java is missing (scripts/services.sh installs it)"
for i in "${ZK_IDS[@]}"; do
  zk_up "$i" && continue
  d=$DIR/zk$i
  mkdir -p "$d/data"
  echo "$i" >"$d/data/myid"
  # tickTime 500 ms as the single node (sessions of 1 s to 60 s).
  cat >"$d/zoo.cfg" <<EOF
# written by scripts/services-cluster.sh: member $i of a 3-member ensemble
tickTime=500
initLimit=20
syncLimit=10
dataDir=$d/data
clientPort=$(zk_port "$i")
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
server.1=127.0.0.1:22881:23881
server.2=127.0.0.1:22882:23882
server.3=127.0.0.1:22883:23883
EOF
  spawn "$d/zk.pid" "$d/zk.log" java -Xmx128m -cp "$ZK_CLASSPATH" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg"
done
for i in "${ZK_IDS[@]}"; do wait_for "zookeeper member $i" zk_up "$i"; done
echo "zookeeper ensemble: $(for i in "${ZK_IDS[@]}"; do printf '%s ' "$(zk_mode "$i")"; done)(127.0.0.1:22181-22183)"

fi

# ---- RabbitMQ cluster of three (as the rabbitmq user: one Erlang cookie).
if part rabbitmq; then
[[ -x $RABBIT_BIN/rabbitmq-server ]] || die "rabbitmq-server is missing (scripts/services.sh installs it)"
install -d -o rabbitmq -g rabbitmq "$DIR/rabbit"
for i in "${RABBIT_IDS[@]}"; do
  rabbit_up "$i" && continue
  d=$DIR/r$i
  install -d -o rabbitmq -g rabbitmq "$d" "$d/mnesia" "$d/log"
  cat >"$d/rabbitmq.conf" <<EOF
listeners.tcp.local = 127.0.0.1:$(rabbit_port "$i")
loopback_users.guest = true
EOF
  cat >"$d/rabbitmq.env" <<EOF
NODENAME=$(rabbit_node "$i")
NODE_IP_ADDRESS=127.0.0.1
NODE_PORT=$(rabbit_port "$i")
DIST_PORT=$((25680 + i))
MNESIA_BASE=$d/mnesia
LOG_BASE=$d/log
PID_FILE=$d/rabbitmq.pid
CONFIG_FILE=$d/rabbitmq.conf
ENABLED_PLUGINS_FILE=$d/enabled_plugins
ERL_EPMD_ADDRESS=127.0.0.1
EOF
  echo '[].' >"$d/enabled_plugins"
  chown -R rabbitmq:rabbitmq "$d"
  # Every stopped node starts now, together: a node that waits for peers
  # that are not coming gives up after a while.
  spawn "$d/launcher.pid" "$d/server.log" su -s /bin/sh rabbitmq -c \
    "cd '$RABBIT_HOME' && HOME='$RABBIT_HOME' RABBITMQ_CONF_ENV_FILE='$d/rabbitmq.env' exec $RABBIT_BIN/rabbitmq-server"
done
for i in "${RABBIT_IDS[@]}"; do wait_for "rabbitmq node r$i" rabbit_up "$i"; done
for i in 2 3; do
  if ! rabbitmqctl_as -n "$(rabbit_node 1)" -q cluster_status 2>/dev/null | grep -q "$(rabbit_node "$i")"; then
    log "joining $(rabbit_node "$i") to $(rabbit_node 1)"
    rabbitmqctl_as -n "$(rabbit_node "$i")" stop_app >>"$DIR/rabbit-join.log" 2>&1
    rabbitmqctl_as -n "$(rabbit_node "$i")" join_cluster "$(rabbit_node 1)" >>"$DIR/rabbit-join.log" 2>&1
    rabbitmqctl_as -n "$(rabbit_node "$i")" start_app >>"$DIR/rabbit-join.log" 2>&1
  fi
done
wait_for "a rabbitmq cluster of three running nodes" rabbit_cluster_whole
echo "rabbitmq cluster: r1 r2 r3 running (AMQP 127.0.0.1:5681-5683)"
fi
