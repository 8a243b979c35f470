#!/usr/bin/env bash
# Create the Redis ACL users that docs/security.md ("Redis users") gives each
# kind of rondo process. The lines are read from that page and run as
# written, with the namespace, app, executor id and passwords filled in. The
# users are the scheduler's, one executor's and the XXL-JOB gateway's. The
# persistence worker and the CLI never connect to Redis.
#
#   scripts/redis-acl.sh <credentials-file> <port>...
#
# Runs the lines on the Redis at 127.0.0.1:<port>, for each port. In a Redis
# Cluster, ACL users are per node, so name every node. The passwords are
# random. They are kept in <credentials-file> (mode 600) and used again on a
# later run, so a re-run changes no password. That file holds
# `REDIS_USER_SCHEDULER=<user>:<password>`, and likewise `REDIS_USER_EXECUTOR`
# and `REDIS_USER_XXL_GATEWAY`, ready to put into a `redis://` URL. Idempotent.
#
# Environment:
#   RONDO_NAMESPACE     namespace (default rondo): key patterns and user names
#   RONDO_EXECUTOR_APP  the executor's group (default demo)
#   RONDO_EXECUTOR_ID   the executor's id (default demo-1)
#   REDIS_ADMIN_ARGS    extra redis-cli arguments to sign in as an admin (default none)
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
fi
FILE=$1; shift
NS=${RONDO_NAMESPACE:-rondo}
APP=${RONDO_EXECUTOR_APP:-demo}
ID=${RONDO_EXECUTOR_ID:-demo-1}
DOC="$(cd "$(dirname "$0")/.." && pwd)/docs/security.md"

die() { echo "redis-acl.sh: error: $*" >&2; exit 1; }
[[ -f $DOC ]] || die "$DOC is missing"
# Glob characters or ':' in a name would widen a key pattern.
for v in "$NS" "$APP" "$ID"; do
  [[ $v =~ ^[A-Za-z0-9_.-]+$ ]] || die "'$v' may hold only letters, digits, '.', '-' and '_'"
done

REDIS_USER_SCHEDULER='' REDIS_USER_EXECUTOR='' REDIS_USER_XXL_GATEWAY=''
if [[ -f $FILE ]]; then
  # shellcheck disable=SC1090
  source "$FILE"
fi
password_of() { # <kept user:password> -> the password, or a new one
  local kept=${1#*:}
  if [[ -n $1 && -n $kept ]]; then echo "$kept"; else head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; fi
}

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
  kept_var="REDIS_USER_$role"
  password=$(password_of "${!kept_var}")
  user=${doc_user/#rondo-/$NS-}
  user=${user//<id>/$ID}
  cmd=${line/#"redis-cli ACL SETUSER $doc_user"/ACL SETUSER $user}
  cmd=${cmd//\'>PASSWORD\'/\'>$password\'}
  cmd=${cmd//\'~rondo:/\'~$NS:}
  cmd=${cmd//\'%R~rondo:/\'%R~$NS:}
  cmd=${cmd//<app>/$APP}
  cmd=${cmd//<id>/$ID}
  for port in "$@"; do
    # shellcheck disable=SC2086
    out=$(eval "redis-cli -p $port ${REDIS_ADMIN_ARGS:-} $cmd") || die "redis :$port refused the user $user"
    [[ $out == OK ]] || die "redis :$port answered '$out' to the user $user"
  done
  creds[$role]="$user:$password"
done <<<"$lines"

umask 077
tmp="$FILE.tmp.$$"
{
  echo "# Redis ACL users of namespace $NS (scripts/redis-acl.sh), user:password"
  for role in SCHEDULER EXECUTOR XXL_GATEWAY; do
    echo "REDIS_USER_$role=${creds[$role]}"
  done
} >"$tmp"
mv "$tmp" "$FILE"
# Run under sudo for someone else: the file is theirs to read.
if [[ -n ${SUDO_USER:-} ]]; then chown "$SUDO_USER" "$FILE"; fi
echo "redis-acl.sh: users ${creds[SCHEDULER]%%:*}, ${creds[EXECUTOR]%%:*}, ${creds[XXL_GATEWAY]%%:*} on port(s) $* (credentials in $FILE)" >&2
