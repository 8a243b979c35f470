#!/usr/bin/env bash
# The Python side of the test command: one virtualenv at target/pyenv with
# the example Python executor's packages (pika, redis-py) and schemathesis,
# installed from PyPI at the pinned versions. Idempotent: a second run with
# the same requirements does nothing. Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/pyenv
reqs=(examples/python-executor/requirements.txt scripts/requirements-test.txt)
stamp="$venv/.requirements.sha256"
want=$(cat "${reqs[@]}" | sha256sum | cut -d' ' -f1)

# Tests run in parallel processes and each may call this: one at a time.
mkdir -p target
exec 9>target/pyenv.lock
flock 9

if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >&2
fi
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    $(printf -- '-r %s ' "${reqs[@]}") >&2
  echo "$want" >"$stamp"
fi
echo "$PWD/$venv/bin/python"
