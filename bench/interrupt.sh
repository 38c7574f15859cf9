#!/usr/bin/env bash
# Interrupt a command as a terminal's Ctrl-C does (SIGINT to its process group) after each of the given delays, and
# report what it left behind: the suite's processes started since (daemons, ReFrame, launchers, kernels), network
# namespaces, cgroups of tools/slow-machine and the drill's CPU caps. Root (the vcluster). One row per delay; exit 1 if anything was left.
#   bench/interrupt.sh DELAYS -- COMMAND...     e.g. bench/interrupt.sh 5,20,60 -- tools/drill --only a --no-clean
set -uo pipefail
[ $# -ge 3 ] && [ "$2" = -- ] || { echo "usage: bench/interrupt.sh SECONDS[,SECONDS...] -- COMMAND..." >&2; exit 2; }
IFS=, read -r -a delays <<<"$1"; shift 2
for d in "${delays[@]}"; do
  [[ $d =~ ^[0-9]+$ ]] || { echo "bench/interrupt.sh: '$d' is not a whole number of seconds" >&2; exit 2; }
done
# what the suite starts: Slurm and its database, munge, LAM daemons, ReFrame, launchers, kernels and peers
suite='^(slurm|munged|mariadb|mysqld|lamd|lamboot|tkill|reframe|python|srun|sbatch|mpirun|mpiexec|orted|hydra|prterun|nr-|NP|iperf3|IMB|osu_|[a-z][a-z][.][A-Z][.]x|tc$|ip$|unshare|nsenter)'
procs() { ps -eo pid=,comm= | awk -v re="$suite" '$2 ~ re' | sort; }
netns() { ip netns list 2>/dev/null | awk '{print $1}' | sort; }
cgroups() { ls -d /sys/fs/cgroup/cpu/netregress-* /sys/fs/cgroup/cpu/nr-* 2>/dev/null | sort; }
left=0
echo "| interrupted after | exit | ended after SIGINT | left running | namespaces left | cgroups left |"
echo "|---|---|---|---|---|---|"
for d in "${delays[@]}"; do
  before_p=$(procs); before_n=$(netns); before_c=$(cgroups)
  # job control on: a background command of a script would otherwise start with SIGINT ignored (POSIX), which a
  # terminal's foreground command never does; it also gets a process group of its own, as setsid would give
  set -m
  "$@" >"/tmp/interrupt-$d.log" 2>&1 &
  pid=$!
  set +m
  sleep "$d"
  t0=$SECONDS
  kill -INT -- "-$pid" 2>/dev/null
  # a command that ignores the interrupt is itself the finding: it is given 180 s, then killed and reported
  for _ in $(seq 180); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null; rc="still running after 180 s (killed)"
  else
    wait "$pid"; rc=$?
  fi
  took=$((SECONDS - t0))
  sleep 2
  # what exists now and did not before (a PID reused by an unrelated process would show too: read the names)
  new_p=$(comm -13 <(echo "$before_p") <(procs) | awk '{print $2}' | sort | uniq -c |
          awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}')
  new_n=$(comm -13 <(echo "$before_n") <(netns) | wc -l)
  new_c=$(comm -13 <(echo "$before_c") <(cgroups) | tr '\n' ' ')
  [ -z "$new_p" ] && [ "$new_n" = 0 ] && [ -z "$new_c" ] || left=1
  echo "| ${d} s | $rc | ${took} s | ${new_p:-nothing} | $new_n | ${new_c:-none} |"
done
exit $left
