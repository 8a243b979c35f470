#!/bin/bash
# Counts per fire that do not depend on how fast the machine is that day:
# system calls, context switches and CPU time of every process (rondo's and
# the services'), and with --uprobes the allocations and the tokio tasks
# spawned by rondo's processes, over 10 s in the middle of one throughput
# step.
#
#   bench/counts-per-fire.sh [--uprobes] BIN_DIR JOBS OUT_DIR
#
# BIN_DIR holds release builds of rondo-bench, rondo-scheduler and
# rondo-persist-worker (target/release, or a copy of an older build's);
# JOBS is the step (one job per fire and second). The count begins 6 s after
# the jobs are created (the bench's warm-up is 5 s). Needs root and `perf`.
#
# --uprobes counts, instead of system calls and context switches, the
# allocations (uprobes on mimalloc's entry points) and the tokio tasks
# spawned (on tokio's `OwnedTasks::bind_inner`, which every spawned task
# passes) of those binaries. Each hit traps into the kernel, which slows the
# processes enough to change how they batch: the allocations and tasks per
# fire are then approximate, and at 10 k fires/s the node falls behind.
#
# Writes OUT_DIR/<process>.perf (perf stat CSV), the bench's throughput.json
# and log, and prints the counts divided by the fires of the 10 s.
set -euo pipefail

uprobes=0
if [[ ${1:-} == --uprobes ]]; then
  uprobes=1
  shift
fi
if [[ $# -lt 3 ]]; then
  sed -n '2,/^set /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
fi
# The physical path: the bench finds the nodes' binaries next to its own
# (symlinks resolved), and the processes are found by it below.
bin=$(cd "$1" && pwd -P)
export BENCH_BIN_DIR=$bin
jobs=$2
out=$3
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Probes are named after the binary's directory, so two builds can be
# probed side by side (a letter first, and short: perf's names are at most
# 64 characters).
tag=b_$(basename "$bin" | tr -c 'a-zA-Z0-9\n' '_' | cut -c1-24)
probe() { # probe PROCESS BINARY
  local name=$1 file=$2 text_delta i=0
  for sym in mi_malloc_aligned mi_zalloc_aligned mi_realloc_aligned; do
    perf probe -q -x "$file" -a "${tag}_${name}_alloc_${sym#mi_}=$sym"
  done
  # bind_inner is generic (one copy per scheduler type); perf wants file
  # offsets, nm gives addresses: the executable segment's difference.
  text_delta=$(readelf -lW "$file" | gawk '$1 == "LOAD" && / R E / {print strtonum($3) - strtonum($2); exit}')
  for addr in $(nm "$file" | gawk '/bind_inner/ {print $1}' | sort -u); do
    i=$((i + 1))
    perf probe -q -x "$file" -a "${tag}_${name}_task$i=$(printf '0x%x' $((0x$addr - text_delta)))"
  done
}
bench=
cleanup() {
  [[ -n $bench ]] && kill "$bench" 2>/dev/null
  [[ $uprobes == 1 ]] && perf probe -q -d "probe_rondo*:${tag}_*" 2>/dev/null
  return 0
}
trap cleanup EXIT
if [[ $uprobes == 1 ]]; then
  command -v gawk >/dev/null || { echo "--uprobes needs gawk (strtonum)" >&2; exit 2; }
  perf probe -q -d "probe_rondo*:${tag}_*" 2>/dev/null || true
  probe scheduler "$bin/rondo-scheduler"
  probe bench "$bin/rondo-bench"
  probe persistworker "$bin/rondo-persist-worker"
fi

"$bin/rondo-bench" --scenario throughput --jobs "$jobs" --seconds 20 --out "$out" >"$out/bench.log" 2>&1 &
bench=$!
for _ in $(seq 1200); do
  grep -q "jobs created" "$out/bench.log" && break
  sleep 0.2
done
# The first process whose command line starts with this path (pgrep -f takes
# a regex: the path is escaped).
pid_of() { pgrep -f -- "^$(printf '%s' "$1" | sed 's/[.[\*^$()+?{|]/\\&/g')" | head -1 || true; }
scheduler=$(pid_of "$bin/rondo-scheduler")
[[ -n $scheduler ]] || { echo "no rondo-scheduler from $bin runs" >&2; exit 1; }
sleep 6
worker=$(pid_of "$bin/rondo-persist-worker")
# The services of the usual config, by the port they listen on (the cluster
# topology's members, when up, are other processes of the same names).
listener() { ss -Hltnp "sport = :$1" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true; }
redis=$(listener 6379)
rabbitmq=$(listener 5672)
mysql=$(listener 3306)
pids=("scheduler:$scheduler" "bench:$bench" "persistworker:$worker"
  "redis:$redis" "rabbitmq:$rabbitmq" "mysql:$mysql")
for entry in "${pids[@]}"; do
  name=${entry%%:*}
  pid=${entry#*:}
  [[ -n $pid ]] || continue
  events=raw_syscalls:sys_enter,context-switches,task-clock
  if [[ $uprobes == 1 ]]; then
    [[ $name =~ ^(scheduler|bench|persistworker)$ ]] || continue
    events="probe_rondo:${tag}_${name}_*"
  fi
  perf stat -x, -e "$events" -p "$pid" -o "$out/$name.perf" -- sleep 10 &
done
wait
bench=
python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
step = json.load(open(os.path.join(out, "throughput.json")))["steps"][0]
fires = step["fires_per_s"] * 10
print(f"{step['jobs']} jobs, {step['fires_per_s']:.0f} fires/s, kept up: {step['kept_up']}; per fire over the 10 s:")
for name in ["scheduler", "bench", "persistworker", "redis", "rabbitmq", "mysql"]:
    path = os.path.join(out, name + ".perf")
    if not os.path.exists(path):
        continue
    sums = {"syscalls": 0.0, "context switches": 0.0, "CPU µs": 0.0, "allocations": 0.0, "tasks": 0.0}
    for line in open(path):
        fields = line.strip().split(",")
        if len(fields) < 3 or line.startswith("#"):
            continue
        try:
            n = float(fields[0])
        except ValueError:
            continue
        event = fields[2]
        if event == "raw_syscalls:sys_enter":
            sums["syscalls"] += n
        elif event == "context-switches":
            sums["context switches"] += n
        elif event == "task-clock":
            sums["CPU µs"] += n * 1000  # ms
        elif "_alloc_" in event:
            sums["allocations"] += n
        elif "_task" in event:
            sums["tasks"] += n
    shown = ", ".join(f"{k} {v / fires:.2f}" for k, v in sums.items() if v)
    print(f"  {name}: {shown}")
EOF
