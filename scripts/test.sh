#!/usr/bin/env bash
# rondo's test command: services up, then format, lints and every test
# (unit tests and the integration tests against the real Redis, RabbitMQ,
# ZooKeeper and MySQL). Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "test.sh: cargo is not installed; install a Rust toolchain >= 1.94 (rustup) first" >&2
  exit 1
fi

# A one-shot build gains nothing from incremental compilation, whose
# caches would take about as much disk again as the build (a CI machine
# ran out of it). Set CARGO_INCREMENTAL=1 to keep them between runs.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

scripts/services.sh
echo "== the cluster topology (a ZooKeeper ensemble, a Redis Cluster, a RabbitMQ cluster)"
scripts/services-cluster.sh up
# Redis's `default` user is off on every Redis services.sh and
# services-cluster.sh run: the tests sign in as the admin they made (the
# testkit makes each process's own user from it, and signs in to the
# Redis Cluster with the same admin).
if [[ -z ${RONDO_REDIS_URL:-} ]]; then
  ADMIN_FILE="${RONDO_SERVICES_DIR:-/var/lib/rondo-services}/redis-users.env"
  REDIS_ADMIN="$(sed -n 's/^REDIS_ADMIN=//p' "$ADMIN_FILE" 2>/dev/null | tail -n 1 || true)"
  if [[ -z $REDIS_ADMIN ]]; then
    echo "test.sh: no REDIS_ADMIN in $ADMIN_FILE (scripts/services.sh writes it)" >&2
    exit 1
  fi
  export RONDO_REDIS_URL="redis://$REDIS_ADMIN@127.0.0.1:${REDIS_PORT:-6379}"
fi
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo build --bins (the cluster tests run the real rondo-scheduler)"
cargo build --workspace --bins
echo "== python virtualenv (the example Python executor, schemathesis)"
scripts/python-env.sh
echo "== Quartz oracle (the cron engine is tested against Quartz 2.3 itself)"
scripts/quartz-oracle/build.sh >/dev/null
echo "== chromium, Node, playwright-core and ESLint (the console's lint and browser test)"
scripts/e2e-env.sh >/dev/null
echo "== console lint (ESLint)"
(cd tests/e2e && npm run --silent lint)
echo "== cargo test"
cargo test --workspace --no-fail-fast "$@"
