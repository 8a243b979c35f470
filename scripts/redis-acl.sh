#!/usr/bin/env bash
# Close Redis's `default` user and create the Redis ACL users rondo needs:
# an admin for operators and tests, and the user docs/security.md ("Redis
# users") gives each kind of rondo process. The process users' lines are
# read from that page and run as written, with the namespace, app,
# executor id and passwords filled in: the scheduler's, one executor's and
# the XXL-JOB gateway's (the persistence worker and the CLI never connect
# to Redis).
#
#   scripts/redis-acl.sh <credentials-file> <port>...
#   scripts/redis-acl.sh --aclfile <credentials-file> <acl-file>
#
# The first form signs in to the Redis at 127.0.0.1:<port>, for each port,
# as the admin (or, on a Redis whose `default` is still open, as
# `default`), then:
#   1. makes the admin user (all keys, channels and commands);
#   2. makes the process users;
#   3. on a Redis Cluster node, sets `masteruser`/`masterauth` to the admin,
#      so a replica syncs as a user (on every node first: roles change in
#      a failover);
#   4. turns `default` off, without a password or rights: a connection
#      without a user can then do nothing but AUTH (`NOAUTH`);
#   5. saves the users to the node's `aclfile`, if it has one, so that a
#      restart keeps them.
# ACL users are per node: in a Redis Cluster name every node. Idempotent: a
# second run changes nothing and signs in as the admin.
#
# The second form, for a Redis about to start: writes <acl-file> (its
# `aclfile`) with `default` off and the admin, keeping the other users a
# previous `ACL SAVE` put there. The node then comes up closed.
#
# Passwords are random, kept in <credentials-file> (mode 600) and used
# again on a later run, so a re-run changes no password. It holds
# `REDIS_ADMIN=<user>:<password>` and `REDIS_USER_SCHEDULER`,
# `REDIS_USER_EXECUTOR`, `REDIS_USER_XXL_GATEWAY` likewise, ready to put
# into a `redis://` URL. No password is ever on a command line: redis-cli
# gets them on stdin or in REDISCLI_AUTH.
#
# `default` is turned off rather than given a password: a shared password
# for "whoever has no user" would be one more secret to hand around and
# rotate, and every client rondo ships names its user.
#
# Environment:
#   RONDO_NAMESPACE     namespace (default rondo): key patterns and user names
#   RONDO_EXECUTOR_APP  the executor's group (default demo)
#   RONDO_EXECUTOR_ID   the executor's id (default demo-1)
#   REDIS_ADMIN         <user>:<password> of an existing admin to sign in as
#                       and keep (default: the one in REDIS_ADMIN_FILE, then
#                       in <credentials-file>, else a new `rondo-admin`)
#   REDIS_ADMIN_FILE    a credentials file whose REDIS_ADMIN is the admin of
#                       every Redis of the machine (scripts/services.sh names
#                       its own); given the admin if it lacks one
set -euo pipefail

die() { echo "redis-acl.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }

MODE=users
if [[ ${1:-} == --aclfile ]]; then MODE=aclfile; shift; fi
[[ $# -ge 2 ]] || usage
FILE=$1; shift
NS=${RONDO_NAMESPACE:-rondo}
APP=${RONDO_EXECUTOR_APP:-demo}
ID=${RONDO_EXECUTOR_ID:-demo-1}
DOC="$(cd "$(dirname "$0")/.." && pwd)/docs/security.md"

# Glob characters or ':' in a name would widen a key pattern.
for v in "$NS" "$APP" "$ID"; do
  [[ $v =~ ^[A-Za-z0-9_.-]+$ ]] || die "'$v' may hold only letters, digits, '.', '-' and '_'"
done

new_password() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
# The value of `NAME=` in a credentials file (empty if none).
kept() { [[ -f $2 ]] && sed -n "s/^$1=//p" "$2" | tail -n 1 || true; }

# ------------------------------------------------------------- the admin ----
ADMIN=${REDIS_ADMIN:-}
[[ -n $ADMIN || -z ${REDIS_ADMIN_FILE:-} ]] || ADMIN=$(kept REDIS_ADMIN "$REDIS_ADMIN_FILE")
[[ -n $ADMIN ]] || ADMIN=$(kept REDIS_ADMIN "$FILE")
[[ -n $ADMIN ]] || ADMIN="rondo-admin:$(new_password)"
ADMIN_USER=${ADMIN%%:*}
ADMIN_PASSWORD=${ADMIN#*:}
[[ $ADMIN == *:* && -n $ADMIN_PASSWORD && $ADMIN_USER =~ ^[A-Za-z0-9_.-]+$ ]] \
  || die "REDIS_ADMIN must be <user>:<password>, the user of letters, digits, '.', '-' and '_'"
[[ $ADMIN_USER != default ]] || die "the admin cannot be \`default\`, which this script turns off"

# set_line FILE NAME VALUE: NAME=VALUE in FILE (mode 600), other lines kept.
set_line() {
  local file=$1 tmp="$1.tmp.$$"
  (
    umask 077
    { [[ -f $file ]] && grep -v "^$2=" "$file" || true; echo "$2=$3"; } >"$tmp"
  )
  mv "$tmp" "$file"
  # Run under sudo for someone else: the file is theirs to read.
  if [[ -n ${SUDO_USER:-} ]]; then chown "$SUDO_USER" "$file"; fi
}

# The machine's admin file learns the admin made here (a fresh machine
# whose first run was for another credentials file).
remember_admin() {
  if [[ -n ${REDIS_ADMIN_FILE:-} && $REDIS_ADMIN_FILE != "$FILE" ]] \
     && [[ -z $(kept REDIS_ADMIN "$REDIS_ADMIN_FILE") ]]; then
    set_line "$REDIS_ADMIN_FILE" REDIS_ADMIN "$ADMIN"
  fi
}

# ------------------------------------------------------ --aclfile <file> ----
if [[ $MODE == aclfile ]]; then
  ACL=$1
  hash=$(printf '%s' "$ADMIN_PASSWORD" | sha256sum | cut -d' ' -f1)
  tmp="$ACL.tmp.$$"
  (
    umask 077
    { [[ -f $ACL ]] && grep -v -e '^user default ' -e "^user $ADMIN_USER " "$ACL" || true
      echo "user default off resetpass resetkeys resetchannels -@all"
      echo "user $ADMIN_USER on #$hash ~* &* +@all"
    } >"$tmp"
  )
  mv "$tmp" "$ACL"
  set_line "$FILE" REDIS_ADMIN "$ADMIN"
  remember_admin
  exit 0
fi

# ------------------------------------------------------------ signing in ----
declare -A AS=()   # port -> admin | default
as_admin() { local p=$1; shift; REDISCLI_AUTH=$ADMIN_PASSWORD redis-cli --user "$ADMIN_USER" -p "$p" "$@" 2>/dev/null; }
# rcli PORT ARGS...: redis-cli signed in the way that works on PORT.
rcli() {
  local p=$1; shift
  if [[ ${AS[$p]} == admin ]]; then as_admin "$p" "$@"; else redis-cli -p "$p" "$@"; fi
}
# ok PORT WHAT ARGS...: the command must answer OK (a password on stdin).
ok() {
  local p=$1 what=$2 out; shift 2
  out=$(rcli "$p" "$@") || die "redis :$p refused $what"
  [[ $out == OK ]] || die "redis :$p answered '$out' to $what"
}
for port in "$@"; do
  if [[ $(as_admin "$port" ACL WHOAMI) == "$ADMIN_USER" ]]; then
    AS[$port]=admin
  elif [[ $(redis-cli -p "$port" ACL WHOAMI 2>/dev/null) == default ]]; then
    AS[$port]=default   # a fresh Redis, or one set up before `default` was closed
  else
    die "cannot sign in to redis :$port: the admin $ADMIN_USER is refused and \`default\` is off; give the admin's credentials as REDIS_ADMIN=<user>:<password> (or in $FILE)"
  fi
done

# ------------------------------------------------------ 1. the admin user ----
for port in "$@"; do
  printf '%s' ">$ADMIN_PASSWORD" \
    | ok "$port" "the admin $ADMIN_USER" -x ACL SETUSER "$ADMIN_USER" on '~*' '&*' '+@all'
  AS[$port]=admin
done

# --------------------------------------------------- 2. the process users ----
[[ -f $DOC ]] || die "$DOC is missing"
# The block's commands, one per line (continuations joined).
lines=$(sed -n '/<!-- redis-acl:begin -->/,/<!-- redis-acl:end -->/p' "$DOC" \
  | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep '^redis-cli ACL SETUSER') \
  || die "no ACL SETUSER lines between the redis-acl markers of $DOC"

declare -A creds
while read -r line; do
  doc_user=$(awk '{print $4}' <<<"$line")
  case $doc_user in
    rondo-scheduler) role=SCHEDULER ;;
    rondo-executor-*) role=EXECUTOR ;;
    rondo-xxl-gateway) role=XXL_GATEWAY ;;
    *) die "a user docs/security.md gives but this script does not know: $doc_user" ;;
  esac
  kept_cred=$(kept "REDIS_USER_$role" "$FILE")
  password=${kept_cred#*:}
  [[ -n $kept_cred && -n $password ]] || password=$(new_password)
  user=${doc_user/#rondo-/$NS-}
  user=${user//<id>/$ID}
  cmd=${line/#"redis-cli ACL SETUSER $doc_user"/ACL SETUSER $user}
  # The password goes on stdin (redis-cli -x: the last argument), never on
  # a command line.
  cmd=${cmd//\'>PASSWORD\'/}
  cmd=${cmd//\'~rondo:/\'~$NS:}
  cmd=${cmd//\'%R~rondo:/\'%R~$NS:}
  cmd=${cmd//<app>/$APP}
  cmd=${cmd//<id>/$ID}
  eval "words=($cmd)"
  for port in "$@"; do
    printf '%s' ">$password" | ok "$port" "the user $user" -x "${words[@]}"
  done
  creds[$role]="$user:$password"
done <<<"$lines"

# ------------------------------------------ 3. replicas sync as the admin ----
for port in "$@"; do
  if [[ $(rcli "$port" CONFIG GET cluster-enabled | tail -n 1) == yes ]]; then
    ok "$port" "masteruser" CONFIG SET masteruser "$ADMIN_USER"
    printf '%s' "$ADMIN_PASSWORD" | ok "$port" "masterauth" -x CONFIG SET masterauth
  fi
done

# ------------------------------------------------- 4. and 5. default off ----
for port in "$@"; do
  ok "$port" "turning default off" ACL SETUSER default off resetpass resetkeys resetchannels -@all
  if [[ -n $(rcli "$port" CONFIG GET aclfile | tail -n +2) ]]; then
    ok "$port" "ACL SAVE" ACL SAVE
  fi
done

tmp="$FILE.tmp.$$"
(
  umask 077
  {
    echo "# Redis ACL users of namespace $NS and the admin (scripts/redis-acl.sh), user:password"
    echo "REDIS_ADMIN=$ADMIN"
    for role in SCHEDULER EXECUTOR XXL_GATEWAY; do
      echo "REDIS_USER_$role=${creds[$role]}"
    done
  } >"$tmp"
)
mv "$tmp" "$FILE"
# Run under sudo for someone else: the file is theirs to read.
if [[ -n ${SUDO_USER:-} ]]; then chown "$SUDO_USER" "$FILE"; fi
remember_admin
echo "redis-acl.sh: admin $ADMIN_USER, users ${creds[SCHEDULER]%%:*}, ${creds[EXECUTOR]%%:*}, ${creds[XXL_GATEWAY]%%:*} on port(s) $*; \`default\` off (credentials in $FILE)" >&2
