#!/usr/bin/env bash
# The browser side of the test command: Debian's chromium, a CJK font and
# Node (apt, when missing) and the console's end-to-end test packages
# (tests/e2e: playwright-core at the version its lockfile pins, from npm;
# it drives the installed chromium, no browser is downloaded). Idempotent:
# a second run with the same lockfile does nothing. Prints the chromium
# executable.
set -euo pipefail
cd "$(dirname "$0")/.."

mkdir -p target
# Tests run in parallel processes and each may call this: one at a time.
exec 9>target/e2e-env.lock
flock 9

missing=()
chromium=$(command -v chromium || command -v chromium-browser || true)
[[ -n $chromium ]] || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
fc-list 2>/dev/null | grep -qi dejavu || missing+=(fonts-dejavu-core)
# The console in Chinese (screenshots of zh-CN and zh-TW): a CJK font.
fc-list :lang=zh 2>/dev/null | grep -q . || missing+=(fonts-wqy-microhei)
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  echo "e2e-env: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
    || { $sudo apt-get update >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
  chromium=$(command -v chromium || command -v chromium-browser)
fi

stamp=tests/e2e/node_modules/.lock.sha256
want=$(sha256sum tests/e2e/package-lock.json | cut -d' ' -f1)
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$want" >"$stamp"
fi
echo "$chromium"
