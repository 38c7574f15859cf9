# Sourced by tools/vcluster: the fabric (bridges, namespaces, veths, shaping, leaf switches) and the faults
# injected into it. Uses the globals and helpers tools/vcluster defines before sourcing it.

# --- the fabric: bridges, namespaces, veths, shaping -------------------------------------------------------------
ALLOWED_CC=/proc/sys/net/ipv4/tcp_allowed_congestion_control
# The host's list before any cluster (this one or another, say one with another VC_NS_PREFIX) added to it; the
# last cluster down puts it back.
HOST_CC_SAVE=/run/netregress-vcluster/host-allowed-cc
allow_node_congestion_control() {
  # A namespace other than the host's may only make an algorithm its default when the host allows it to
  # unprivileged sockets (tcp_allowed_congestion_control). Add ours for as long as the cluster is up; `down` puts
  # the host's list back as it was.
  local allowed; allowed=$(cat "$ALLOWED_CC")
  case " $allowed " in *" $VC_TCP_CONGESTION "*) return 0 ;; esac
  mkdir -p "${HOST_CC_SAVE%/*}"
  [ -e "$HOST_CC_SAVE" ] || echo "$allowed" >"$HOST_CC_SAVE"
  [ -e "$S/host-allowed-cc" ] || echo "$allowed" >"$S/host-allowed-cc"
  echo "$allowed $VC_TCP_CONGESTION" >"$ALLOWED_CC" \
    || die "cannot allow TCP congestion control $VC_TCP_CONGESTION (available: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control))"
}
restore_host_congestion_control() {
  # Put the host's list back unless a namespace outside this cluster (another cluster's node) still has an
  # algorithm as its default that the list would no longer allow; then the last cluster down restores it.
  local saved ns cc mine
  saved=$(cat "$HOST_CC_SAVE" 2>/dev/null || cat "$S/host-allowed-cc" 2>/dev/null) || return 0
  mine=" $(all_nodes | sed "s/^/$P/" | tr '\n' ' ') "
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    case $mine in *" $ns "*) continue ;; esac
    cc=$(timeout 5 nsenter --net="/run/netns/$ns" cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null) || continue
    case " $saved " in *" $cc "*) ;; *)
      log "host TCP congestion control list left as it is: namespace $ns still uses $cc"
      # the host-wide copy stays for the last cluster down
      [ -e "$HOST_CC_SAVE" ] || { mkdir -p "${HOST_CC_SAVE%/*}" && echo "$saved" >"$HOST_CC_SAVE"; }
      rm -f "$S/host-allowed-cc"; return 0 ;;
    esac
  done
  echo "$saved" >"$ALLOWED_CC" && rm -f "$HOST_CC_SAVE" "$S/host-allowed-cc"
}

bridge_up() {  # bridge_up NAME [ADDRESS/LEN]
  ip link show "$1" >/dev/null 2>&1 || ip link add "$1" type bridge
  [ -z "${2:-}" ] || ip addr show dev "$1" | grep "inet $2 " >/dev/null || ip addr add "$2" dev "$1"
  ip link set "$1" up
}
make_fabric() {
  local f=$1 br="${P}$1" gw n ns hv spec ifv="VC_${1^^}_IFACE" k l up sp
  local nic=${!ifv}
  gw=$(gateway "$f")
  bridge_up "$br" "$gw/$(prefix_len "$f")"
  k=$(leaves "$f")
  for l in $(seq 1 "$k"); do
    # leaf bridge, and its uplink: a veth pair from the leaf bridge to the spine bridge (unshaped; shape-uplink)
    bridge_up "$br-leaf$l"
    # a leaf is a switch, no host interface: without this the host answers a node's ARP for the gateway from the
    # leaf bridge too, and a node that took that MAC could reach the host but nothing routed through it
    ip link set "$br-leaf$l" arp off
    echo 1 >"/proc/sys/net/ipv6/conf/$br-leaf$l/disable_ipv6"
    up="${P}$f-up$l" sp="${P}$f-sp$l"
    ip link show "$up" >/dev/null 2>&1 || ip link add "$up" type veth peer name "$sp"
    ip link set "$up" master "$br-leaf$l" up
    ip link set "$sp" master "$br" up
  done
  if [ -n "${VC_ALL_PARTITION:-}" ]; then
    # A job across fabrics (the partition of every node) needs node-to-node traffic between the fabrics: routed by
    # the host, through the bridges only (the host's ip_forward stays as it is; the setting goes with the bridge)
    echo 1 >"/proc/sys/net/ipv4/conf/$br/forwarding"
  fi
  spec=$(shaping "$f")
  for n in $(nodes_of "$f"); do
    ns="${P}$n" hv="${P}$n"
    [ -e "/run/netns/$ns" ] || ip netns add "$ns"
    if ! ip -n "$ns" link show "$nic" >/dev/null 2>&1; then
      ip link add "$hv" type veth peer name "$nic" netns "$ns"
    fi
    ip link set "$hv" master "$(node_bridge "$n")" up
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$VC_TCP_CONGESTION" \
      || die "node $n: cannot make $VC_TCP_CONGESTION its TCP congestion control (host allows: $(cat "$ALLOWED_CC"))"
    ip -n "$ns" addr replace "$(node_ip "$n")/$(prefix_len "$f")" dev "$nic"
    ip -n "$ns" link set "$nic" up
    ip -n "$ns" route replace default via "$gw"
    if [ -n "$spec" ]; then
      # shellcheck disable=SC2086  # the spec is tc words
      tc qdisc replace dev "$hv" root $spec
      # shellcheck disable=SC2086
      tc -n "$ns" qdisc replace dev "$nic" root $spec
    fi
  done
}

start_slurmd() {  # start_slurmd NODE: in the node's network namespace, with its own hostname and sysfs view
  local n=$1 ns="${P}$1"
  pid_alive "slurmd-$n.pid" && return 0
  mkdir -p "$S/sysfs/$n" "$S/spool/$n" "$S/tmp/$n"
  # The mount namespace is private: the sysfs and the bind mounts vanish with the node's last process. nsenter,
  # unshare and sh each exec the next, so the PID launch records is slurmd's. The node's /dev/shm is its own tmpfs,
  # as a real node's is: on the host's, a segment a killed MPI job left behind outlived the cluster, and MPICH 5
  # names its segment after the job and step ids (mpich_shm_<FNV-1a of "472.1">_<node>), which a cluster with a
  # fresh state hands out again: a later job 472 failed MPI_Init ("Out of memory") on the leftover.
  launch "slurmd-$n.pid" "$S/log/slurmd-$n.out" nsenter --net="/run/netns/$ns" unshare --mount --uts \
    --propagation private sh -c '
    mount -t sysfs sysfs "$1" && mount --bind "$1/class/net" /sys/class/net &&
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm &&
    mount --bind "$2" /etc/hosts && hostname "$3" && exec /usr/sbin/slurmd -D -f "$4" -N "$3"' \
    slurmd "$S/sysfs/$n" "$S/etc/hosts" "$n" "$CONF"
}

wait_nodes() {  # wait_nodes SECONDS: until every node is idle; a slurmd that exits meanwhile is named at once
  local end=$((SECONDS + $1)) n p
  while [ "$SECONDS" -lt "$end" ]; do
    nodes_idle && return 0
    for n in $(all_nodes); do
      p=$(cat "$S/pids/slurmd-$n.pid" 2>/dev/null) || continue
      kill -0 "$p" 2>/dev/null || die "slurmd on $n exited (see $S/log/slurmd-$n.log and slurmd-$n.out)"
    done
    sleep 0.2
  done
  die "timed out after $1 s waiting for every node to be idle (sinfo -N; logs in $S/log)"
}

resume_drained() {
  # slurmctld keeps a node's drain across restarts (say, 'Kill task failed' from a step the last `down` cut short);
  # every slurmd starts afresh here, so such a node is put back in service
  local drained
  drained=$(timeout 10 env SLURM_CONF="$CONF" sinfo -h -N -t drain,draining -o '%N' 2>/dev/null | sort -u | tr '\n' ',') || true
  [ -n "$drained" ] || return 0
  log "resuming nodes drained before this start: ${drained%,}"
  timeout 10 env SLURM_CONF="$CONF" scontrol update NodeName="${drained%,}" State=RESUME 2>/dev/null || true
}

nodes_idle() {
  local out; out=$(timeout 10 env SLURM_CONF="$CONF" sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
  # a node in two partitions (VC_ALL_PARTITION) has a line for each
  [ "$(echo "$out" | grep -E ' (idle|mix|alloc)$' | awk '{print $1}' | sort -u | wc -l)" -eq "$(all_nodes | wc -l)" ]
}

# --- faults: shaping or cutting one node's link or one leaf's uplink ------------------------------------------------
# A fault is recorded in faults/<link> (the spec) so `faults`, `status` and `clear` know what was changed.
tbf_for_rate() {  # tbf_for_rate RATE: a tbf whose bucket holds 33 ms of RATE (at least 128 KB: veth sends 64 KB GSO)
  local num unit bps burst
  [[ $1 =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || return 1
  num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case $unit in bit) bps=$num ;; kbit) bps=$((num * 1000)) ;; mbit) bps=$((num * 1000000)) ;; gbit) bps=$((num * 1000000000)) ;; esac
  burst=$((bps / 8 * 33 / 1000)); [ "$burst" -ge 131072 ] || burst=131072
  echo "tbf rate $1 burst $burst latency 20ms"
}
# shape_link WHAT DEFAULT_SPEC DEV[@NS]... -- ACTION...: apply ACTION to every end; DEFAULT_SPEC is what clear
# restores (empty: no qdisc)
shape_link() {
  local what=$1 default=$2 ends=() end dev ns spec action; shift 2
  while [ "$1" != -- ]; do ends+=("$1"); shift; done; shift
  [ $# -gt 0 ] || die "usage: tools/vcluster shape-node|shape-uplink NAME RATE|down|clear|QDISC..."
  mkdir -p "$S/faults"
  case $1 in
    clear|off)
      action=clear ;;
    down) action=down ;;
    *) if spec=$(tbf_for_rate "$1") && [ $# = 1 ]; then action=shape
       elif [[ $1 =~ ^(tbf|netem|htb|pfifo|bfifo|fq|fq_codel|sfq|red|cake)$ ]]; then action=shape spec="$*"
       else die "'$*': a rate (500mbit, 100mbit, 2gbit), down, clear, or a tc qdisc spec (tbf rate 100mbit burst 1mb latency 5ms)"
       fi ;;
  esac
  for end in "${ends[@]}"; do
    dev=${end%@*} ns=""; [ "$end" = "$dev" ] || ns=${end#*@}
    local ipn=(ip) tcn=(tc)
    [ -z "$ns" ] || { ipn=(ip -n "$ns"); tcn=(tc -n "$ns"); }
    "${ipn[@]}" link show "$dev" >/dev/null 2>&1 || die "$what: no link $dev${ns:+ in $ns} (is the cluster up with this layout?)"
    case $action in
      clear)
        "${ipn[@]}" link set "$dev" up
        if [ -n "$default" ]; then
          # shellcheck disable=SC2086
          "${tcn[@]}" qdisc replace dev "$dev" root $default
        else
          "${tcn[@]}" qdisc del dev "$dev" root 2>/dev/null || true
        fi ;;
      down) [ -n "$ns" ] || ip link set "$dev" down ;;   # the host end: the node keeps its address and routes
      shape)
        # shellcheck disable=SC2086
        "${tcn[@]}" qdisc replace dev "$dev" root $spec ;;
    esac
  done
  local key=${what// /_}
  case $action in
    clear) rm -f "$S/faults/$key"; log "$what: cleared${default:+ (back to $default)}" ;;
    down) echo "down" >"$S/faults/$key"; log "$what: down" ;;
    shape) echo "$spec" >"$S/faults/$key"; log "$what: $spec (both directions)" ;;
  esac
}
cmd_shape_node() {
  local n=${1:-} f; shift || true
  [ -n "$n" ] || die "usage: tools/vcluster shape-node NODE RATE|down|clear|QDISC..."
  f=$(fabric_of "$n") && all_nodes | grep -x "$n" >/dev/null || die "unknown node '$n' (nodes: $(all_nodes | tr '\n' ' '))"
  local ifv="VC_${f^^}_IFACE"
  shape_link "node $n" "$(shaping "$f")" "${P}$n" "${!ifv}@${P}$n" -- "$@"
}
cmd_shape_uplink() {
  local sw=${1:-} f l; shift || true
  [[ $sw =~ ^(${P})?(fast|gige)-leaf([0-9]+)$ ]] \
    || die "usage: tools/vcluster shape-uplink SWITCH RATE|down|clear|QDISC... (SWITCH as Slurm names it: fast-leaf2)"
  f=${BASH_REMATCH[2]} l=${BASH_REMATCH[3]}
  [ "$l" -ge 1 ] && [ "$l" -le "$(leaves "$f")" ] || die "no switch $f-leaf$l (VC_${f^^}_LEAVES=$(leaves "$f"))"
  shape_link "uplink $f-leaf$l" "" "${P}$f-up$l" "${P}$f-sp$l" -- "$@"
}
cmd_faults() {
  local f
  for f in "$S"/faults/*; do [ -e "$f" ] && echo "${f##*/}" "$(cat "$f")" | sed 's/_/ /'; done
  return 0
}
