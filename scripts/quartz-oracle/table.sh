#!/usr/bin/env bash
# Fills the Quartz column of the cron table test from Quartz itself:
# reads model/src/schedule/quartz/cases.tsv (expression, zone, start,
# what rondo does: `same` or `refuses`), asks the oracle for the next 12
# fires of each, and rewrites the file with Quartz's answer as the fifth
# column. Run it after adding a case; the test reads the result.
set -euo pipefail
cd "$(dirname "$0")/../.."
table=model/src/schedule/quartz/cases.tsv
cp=$(scripts/quartz-oracle/build.sh)
grep -v '^#' "$table" | grep -v '^$' | cut -f1-4 >target/quartz-cases.in
cut -f1-3 target/quartz-cases.in | sed 's/$/\t12/' | java -cp "$cp" QuartzOracle --iso >target/quartz-cases.out
{
  grep '^#' "$table"
  paste target/quartz-cases.in target/quartz-cases.out
} >"$table.new"
mv "$table.new" "$table"
echo "table: $(grep -vc '^#' "$table") cases written to $table" >&2
