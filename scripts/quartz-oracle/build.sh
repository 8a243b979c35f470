#!/usr/bin/env bash
# The Quartz oracle for the cron tests: Quartz 2.3 itself (Debian's
# libquartz2-java) behind a small Java program (QuartzOracle.java) that
# prints the fires of the expressions it reads. Installs a JDK and the
# Quartz jar from Debian when they are missing, compiles the program into
# target/quartz-oracle once per source change, and prints the classpath to
# run it with:  java -cp "$(scripts/quartz-oracle/build.sh)" QuartzOracle
set -euo pipefail
cd "$(dirname "$0")/../.."

jar=/usr/share/java/quartz2.jar
out=target/quartz-oracle
src=scripts/quartz-oracle/QuartzOracle.java

mkdir -p target
# Tests run in parallel processes and each may call this: one at a time.
exec 9>target/quartz-oracle.lock
flock 9

missing=()
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
[[ -f $jar ]] || missing+=(libquartz2-java)
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  echo "quartz-oracle: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
    || { $sudo apt-get update >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
fi

stamp="$out/.source.sha256"
want=$(sha256sum "$src" | cut -d' ' -f1)
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" || ! -f $out/QuartzOracle.class ]]; then
  rm -rf "$out"
  mkdir -p "$out"
  javac -nowarn -cp "$jar" -d "$out" "$src" >&2
  echo "$want" >"$stamp"
fi
echo "$jar:$PWD/$out"
