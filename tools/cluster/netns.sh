#!/usr/bin/env bash
# A cluster of N nodes on one Linux machine, for running ztrain (or any Open MPI program) as on a real
# multi-node cluster, and for breaking its network on purpose (docs/cluster-netns.md).
#
#   netns.sh up N                 nodes node0..nodeN-1 (N = 1..200)
#   netns.sh mpirun ARGS...       Open MPI's mpirun, run on node0, its hosts the nodes (--host node0:2,node1:2
#                                 style; without -H/--host/--hostfile: every node, ZT_CLUSTER_SLOTS slots each)
#   netns.sh exec NODE CMD...     CMD on that node (its network, hostname and /etc/hosts)
#   netns.sh link NODE down|up    the node's switch port down (the node's link loses carrier) or up again
#   netns.sh link NODE delay MS   every packet to and from the node held MS ms (each way)
#   netns.sh link NODE loss PCT   PCT % of the packets to and from the node dropped at random
#   netns.sh link NODE rate RATE  the node's link limited to RATE each way (tc units: 100mbit, 1gbit, 500kbit)
#   netns.sh link NODE clear      no delay, loss or rate limit; the port up
#   netns.sh kill NODE [SIGNAL]   SIGNAL (default KILL) to every process on the node (ranks, orted, ...)
#   netns.sh ps NODE [NAME]       the processes on the node (pid and command; only those named NAME)
#   netns.sh status               nodes, addresses and the faults in force
#   netns.sh down                 everything up made, gone (processes, namespaces, state); safe to repeat
#
# What a node is: a network namespace (its own interfaces, routes, firewall, qdiscs) plus a UTS
# namespace (its own hostname, so gethostname() and Open MPI see nodeI) and a mount namespace in which
# /etc/hosts names every node (the rest of the file system is shared, as a cluster's shared file system:
# a checkpoint directory is the same directory on every node). A process `sleep infinity` holds each
# node's namespaces; commands enter them with nsenter. Each node's eth0 is one end of a veth pair whose
# other end is a port of a bridge (the switch) in a namespace of its own, so the machine's own
# interfaces, addresses and routes are never touched. Addresses: ZT_CLUSTER_NET.I+1/24 for node I.
#
# mpirun: Open MPI's rsh launcher with its agent replaced by a script that enters the node's
# namespaces (no ssh), one orted per node started by mpirun itself (no tree spawn), and
#   btl=tcp,self,vader, btl_tcp_if_include and oob_tcp_if_include = the cluster's subnet:
# ranks on different nodes talk TCP through the veth links (and feel their faults), ranks on one node
# shared memory. Ranks start with a clean environment, as under ssh: pass variables with -x NAME.
# No rank is bound to a core (hwloc_base_binding_policy=none): the machine's cores are shared.
# mpirun gives up on a node's daemon it can no longer reach when TCP does: after oob_tcp_keepalive_time
# =15 s of silence + 3 probes 2 s apart on an idle connection (Open MPI's default: 300 s + 9 x 20 s),
# or, when it has orders for that daemon (an abort), after 5 unanswered retransmissions (the nodes'
# net.ipv4.tcp_retries2=5, about 13 s; Linux's default 15 is about 15 min: measured, mpirun still
# waiting 9 min after every rank had ended). Long enough that ztrain's own watchdog (dist.timeout_s)
# names the lost node first, short enough that the job ends.
#
# Faults: delay and loss are done in each node's own netfilter (iptables, chain ZT_FAULT in the
# node): loss by `-m statistic --mode random`; delay by the kernel's tc netem where the kernel has it,
# else by NFQUEUE and a small program of ours (ztdelay.c, built on first use) that holds each packet MS
# ms before accepting it. Rate limits are tc tbf qdiscs on both ends of the node's link. `link down`
# sets the switch port down: the node's eth0 loses carrier, every packet to or from it is lost, and
# TCP peers see silence (no reset), as when a cable or a switch port fails.
#
# Environment: ZT_CLUSTER (name, default zt; namespaces ZT_CLUSTER-sw and ZT_CLUSTER-nodeI: two
# clusters of different names coexist), ZT_CLUSTER_NET (first three octets, default 10.77.0),
# ZT_CLUSTER_SLOTS (default slots per node for mpirun, default 2), ZT_CLUSTER_STATE (state
# directory root, default /run/zt-cluster). Needs root, iproute2, util-linux (nsenter, unshare,
# setsid), iptables, a C compiler (for delays without netem), Open MPI (tools/install-deps.sh).
# Exit codes: 0 done, 2 bad arguments or a cluster in the wrong state, 1 a command failed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self=$here/$(basename "${BASH_SOURCE[0]}")
name=${ZT_CLUSTER:-zt}
net=${ZT_CLUSTER_NET:-10.77.0}
state=${ZT_CLUSTER_STATE:-/run/zt-cluster}/$name
sw=$name-sw

die() { echo "netns.sh: $*" >&2; exit 1; }
usage() { echo "netns.sh: $*" >&2; echo "usage: see the header of $self" >&2; exit 2; }

node_ns() { echo "$name-$1"; }  # node1 -> zt-node1
n_nodes() { cat "$state/nodes" 2>/dev/null || echo 0; }
require_up() { [ -f "$state/nodes" ] || usage "cluster '$name' is not up (netns.sh up N first)"; }
# node_index NODE: I of nodeI, checked against the cluster's size.
node_index() {
  local i=${1#node}
  [[ $1 == node* && $i =~ ^[0-9]+$ && $i -lt $(n_nodes) ]] ||
    usage "no node '$1' in cluster '$name' (nodes node0..node$(($(n_nodes) - 1)))"
  echo "$((10#$i))"
}
holder_pid() { cat "$state/node$1.pid"; }
# in_node I CMD...: CMD in node I's namespaces, in the current directory.
in_node() {
  local i=$1; shift
  nsenter -t "$(holder_pid "$i")" -n -u -m --wd="$PWD" -- "$@"
}

# ---- up / down -------------------------------------------------------------------------------------
cmd_up() {
  local n=${1:-}
  if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then usage "up N: N must be 1..200, got '${n}'"; fi
  [ "$(id -u)" -eq 0 ] || usage "needs root (network namespaces), running as $(id -un)"
  local c
  for c in ip nsenter unshare setsid iptables; do
    command -v "$c" >/dev/null || usage "'$c' not found (Debian: iproute2, util-linux, iptables; tools/install-deps.sh)"
  done
  [[ $net =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || usage "ZT_CLUSTER_NET=$net: give three octets, e.g. 10.77.0"
  if [ -e "$state" ] || ip netns list | grep -E "^($sw|$name-node[0-9]+)( |$)" >/dev/null; then
    usage "cluster '$name' is already up (or was not taken down): netns.sh down first, or another ZT_CLUSTER"
  fi
  mkdir -p "$state"
  trap 'echo "netns.sh: up failed; taking down what was made" >&2; cmd_down >/dev/null 2>&1' ERR
  local i
  : >"$state/hosts"
  printf '127.0.0.1\tlocalhost\n' >>"$state/hosts"
  for ((i = 0; i < n; i++)); do printf '%s.%d\tnode%d\n' "$net" $((i + 1)) "$i" >>"$state/hosts"; done
  for ((i = 0; i < n; i++)); do printf 'node%d slots=%d\n' "$i" "${ZT_CLUSTER_SLOTS:-2}"; done >"$state/hostfile"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for ((i = 0; i < n; i++)); do
    local ns
    ns=$(node_ns "node$i")
    ip netns add "$ns"
    ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$net.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    # TCP gives up on unacknowledged data after 5 retransmissions (about 13 s) instead of 15 (about
    # 15 min): mpirun, whose orders to a lost node's daemon go unacknowledged, then ends in seconds.
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=5
    # The holder: the node's UTS and mount namespaces live as long as it does. --propagation slave:
    # mounts made later on the machine still appear on the node; the node's /etc/hosts stays its own.
    # /sys: a sysfs of the node's network (as `ip netns exec` mounts one: /sys/class/net lists the
    # node's interfaces), with the machine's cgroup hierarchies bound back under /sys/fs/cgroup, as a real
    # node has them (slurmd will not start without them).
    mkdir -p "$state/cg$i"
    setsid -f nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation slave -- sh -c \
      "hostname node$i && mount --bind '$state/hosts' /etc/hosts &&
       mount --rbind /sys/fs/cgroup '$state/cg$i' && mount -t sysfs '$ns' /sys &&
       mount --rbind '$state/cg$i' /sys/fs/cgroup && umount -l '$state/cg$i' &&
       echo \$\$ >'$state/node$i.pid.tmp' &&
       mv '$state/node$i.pid.tmp' '$state/node$i.pid' && exec sleep infinity" </dev/null >/dev/null 2>&1
  done
  for ((i = 0; i < n; i++)); do
    local _
    for _ in $(seq 100); do [ -s "$state/node$i.pid" ] && break; sleep 0.05; done
    [ -s "$state/node$i.pid" ] || { trap - ERR; cmd_down >/dev/null 2>&1; die "node$i's namespaces did not come up"; }
  done
  # The agent Open MPI runs instead of ssh: `agent HOST COMMAND...`.
  printf '#!/bin/sh\nZT_CLUSTER=%q ZT_CLUSTER_STATE=%q exec %q agent "$@"\n' "$name" "${ZT_CLUSTER_STATE:-/run/zt-cluster}" "$self" >"$state/agent"
  chmod 755 "$state/agent"
  echo "$n" >"$state/nodes"
  trap - ERR
  echo "netns.sh: cluster '$name' up: $n node(s) node0..node$((n - 1)) on $net.0/24 (switch namespace $sw)"
}

# Every process whose network namespace is node I's (the holder excluded unless asked).
node_pids() {
  local i=$1 with_holder=${2:-no} holder
  holder=$(holder_pid "$i" 2>/dev/null) || return 0
  ip netns pids "$(node_ns "node$i")" 2>/dev/null | { [ "$with_holder" = yes ] && cat || grep -vxF "$holder"; } || true
}

cmd_down() {
  local i p
  for f in "$state"/node*.pid; do
    [ -f "$f" ] || continue
    i=${f##*/node}; i=${i%.pid}
    # shellcheck disable=SC2046  # a list of pids
    kill -KILL $(node_pids "$i" yes) 2>/dev/null || true
  done
  for f in "$state"/delay*.pid; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^($sw|$name-node[0-9]+)$"); do
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$state"
  echo "netns.sh: cluster '$name' down"
}

# ---- running things ----------------------------------------------------------------------------------
# The environment a command starts with on a node (as under ssh: not the caller's).
clean_env() {
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    ${TMPDIR:+TMPDIR=$TMPDIR} "$@"
}

cmd_agent() {  # called by Open MPI: agent HOST COMMAND...
  local host=$1 i; shift
  i=$(node_index "$host") || exit 255
  exec nsenter -t "$(holder_pid "$i")" -n -u -m --wd=/ -- env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 /bin/sh -c "$*"
}

cmd_mpirun() {
  require_up
  local a hosts=(--hostfile "$state/hostfile")
  for a in "$@"; do case $a in -H | --host | -host | --hostfile | -hostfile | --machinefile | -machinefile) hosts=() ;; esac; done
  # MCA parameters as OMPI_MCA_ variables: mpirun passes them to every orted and rank, and ztrain's
  # start-up table prints the transport ones.
  in_node 0 env OMPI_MCA_plm_rsh_agent="$state/agent" OMPI_MCA_plm_rsh_no_tree_spawn=1 \
    OMPI_MCA_btl=tcp,self,vader OMPI_MCA_btl_tcp_if_include="$net.0/24" OMPI_MCA_oob_tcp_if_include="$net.0/24" \
    OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_rmaps_base_oversubscribe=1 \
    OMPI_MCA_oob_tcp_keepalive_time="${OMPI_MCA_oob_tcp_keepalive_time:-15}" \
    OMPI_MCA_oob_tcp_keepalive_intvl="${OMPI_MCA_oob_tcp_keepalive_intvl:-2}" \
    OMPI_MCA_oob_tcp_keepalive_probes="${OMPI_MCA_oob_tcp_keepalive_probes:-3}" \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "${hosts[@]}" "$@"
}

cmd_exec() {
  require_up
  local i
  i=$(node_index "${1:-}"); shift
  [ $# -gt 0 ] || usage "exec NODE CMD...: no command"
  in_node "$i" "$@"
}

cmd_kill() {
  require_up
  local i sig=${2:-KILL} pids
  i=$(node_index "${1:-}")
  pids=$(node_pids "$i")
  # The node's delay program (link NODE delay) is the cluster's, not the node's: spared.
  [ ! -f "$state/delay$i.pid" ] || pids=$(grep -vxF "$(cat "$state/delay$i.pid")" <<<"$pids" || true)
  [ -n "$pids" ] || { echo "netns.sh: no process on node$i"; return 0; }
  # shellcheck disable=SC2086  # a list of pids
  kill -s "$sig" $pids 2>/dev/null || true
  echo "netns.sh: SIG$sig to $(wc -w <<<"$pids") process(es) on node$i: $(paste -sd ' ' <<<"$pids")"
}

# ---- faults -------------------------------------------------------------------------------------------
has_netem() {  # does this kernel have tc netem? (asked on a scratch dummy-free way: the node's lo)
  in_node "$1" tc qdisc add dev lo root netem delay 0ms 2>/dev/null && in_node "$1" tc qdisc del dev lo root 2>/dev/null
}

fault_chain() {  # the node's ZT_FAULT chains (filter: loss; mangle: delay), created on first use
  local i=$1 table
  for table in filter mangle; do
    in_node "$i" iptables -w -t "$table" -N ZT_FAULT 2>/dev/null || continue
    if [ "$table" = filter ]; then
      in_node "$i" iptables -w -t filter -I INPUT -i eth0 -j ZT_FAULT
      in_node "$i" iptables -w -t filter -I OUTPUT -o eth0 -j ZT_FAULT
    else
      in_node "$i" iptables -w -t mangle -I PREROUTING -i eth0 -j ZT_FAULT
      in_node "$i" iptables -w -t mangle -I OUTPUT -o eth0 -j ZT_FAULT
    fi
  done
}

clear_delay() {  # the NFQUEUE rule first, then its program (which lets the held packets go)
  local i=$1 f=$state/delay$1.pid
  in_node "$i" iptables -w -t mangle -F ZT_FAULT 2>/dev/null || true
  if [ -f "$f" ]; then
    kill -TERM "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  fi
  if [ -f "$state/netem$i" ]; then
    rm -f "$state/netem$i"
    apply_shaping "$i"
  fi
}

ztdelay_bin() {  # built once per cluster from ztdelay.c
  local bin=$state/ztdelay
  if [ ! -x "$bin" ]; then
    command -v cc >/dev/null || die "delay without netem needs a C compiler (cc) to build $here/ztdelay.c"
    cc -O2 -Wall -o "$bin.tmp" "$here/ztdelay.c" || die "building $here/ztdelay.c failed"
    mv "$bin.tmp" "$bin"
  fi
  echo "$bin"
}

set_delay() {
  local i=$1 ms=$2 bin
  clear_delay "$i"
  [ "$ms" = 0 ] && return 0
  if has_netem "$i"; then
    # netem on both ends of the link: each way delayed (a tbf rate limit, if any, stays: netem as root
    # would replace it, so the rate is re-applied below netem).
    touch "$state/netem$i"
    apply_shaping "$i"
    return 0
  fi
  bin=$(ztdelay_bin)
  fault_chain "$i"
  # Queue 0 of the node's own netfilter: both directions through one FIFO of held packets.
  setsid -f nsenter -t "$(holder_pid "$i")" -n -- "$bin" --queue 0 --delay-ms "$ms" --pid-file "$state/delay$i.pid" \
    </dev/null >>"$state/delay$i.log" 2>&1
  local _
  for _ in $(seq 100); do [ -s "$state/delay$i.pid" ] && break; sleep 0.05; done
  [ -s "$state/delay$i.pid" ] || die "ztdelay did not start on node$i: $(tail -n 3 "$state/delay$i.log")"
  # --queue-bypass: should the program die, packets pass undelayed instead of being dropped.
  in_node "$i" iptables -w -t mangle -A ZT_FAULT -j NFQUEUE --queue-num 0 --queue-bypass
}

# tc units -> bytes per second (for the tbf burst): 100mbit, 1gbit, 500kbit, 10mbps (bytes), 1000000 (bit/s).
rate_bytes() {
  local v=${1%%[a-zA-Z]*} u=${1##*[0-9.]}
  [[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || return 1
  case ${u,,} in
    "" | bit) awk -v v="$v" 'BEGIN { printf "%d", v / 8 }' ;;
    kbit) awk -v v="$v" 'BEGIN { printf "%d", v * 1000 / 8 }' ;;
    mbit) awk -v v="$v" 'BEGIN { printf "%d", v * 1000000 / 8 }' ;;
    gbit) awk -v v="$v" 'BEGIN { printf "%d", v * 1000000000 / 8 }' ;;
    bps) awk -v v="$v" 'BEGIN { printf "%d", v }' ;;
    kbps) awk -v v="$v" 'BEGIN { printf "%d", v * 1000 }' ;;
    mbps) awk -v v="$v" 'BEGIN { printf "%d", v * 1000000 }' ;;
    gbps) awk -v v="$v" 'BEGIN { printf "%d", v * 1000000000 }' ;;
    *) return 1 ;;
  esac
}

# The qdiscs of node I's link, both ends, from its saved rate and netem delay: tbf (rate) as root, netem
# below it (or as root without a rate).
apply_shaping() {
  local i=$1 rate="" ms="" bytes burst dev
  [ -f "$state/rate$i" ] && rate=$(cat "$state/rate$i")
  [ -f "$state/netem$i" ] && ms=$(cat "$state/delayms$i")
  for dev in eth0 "p$i"; do
    local run=(in_node "$i")  # eth0 on the node, p$i on the switch
    [ "$dev" = eth0 ] || run=(ip netns exec "$sw")
    set -- "$dev" "$dev"
    "${run[@]}" tc qdisc del dev "$2" root 2>/dev/null || true
    if [ -n "$rate" ]; then
      bytes=$(rate_bytes "$rate")
      burst=$((bytes / 100))  # 10 ms of the rate, at least 64 KiB (a GSO packet)
      [ "$burst" -ge 65536 ] || burst=65536
      "${run[@]}" tc qdisc add dev "$2" root handle 1: tbf rate "$rate" burst "$burst" latency 1s
      [ -z "$ms" ] || "${run[@]}" tc qdisc add dev "$2" parent 1:1 handle 10: netem delay "${ms}ms" limit 100000
    elif [ -n "$ms" ]; then
      "${run[@]}" tc qdisc add dev "$2" root handle 1: netem delay "${ms}ms" limit 100000
    fi
  done
}

set_loss() {
  local i=$1 pct=$2
  fault_chain "$i"
  in_node "$i" iptables -w -t filter -F ZT_FAULT
  [ "$pct" = 0 ] && return 0
  in_node "$i" iptables -w -t filter -A ZT_FAULT -m statistic --mode random \
    --probability "$(awk -v p="$pct" 'BEGIN { printf "%.6f", p / 100 }')" -j DROP
}

cmd_link() {
  require_up
  local i what=${2:-} v=${3:-}
  i=$(node_index "${1:-}")
  case $what in
    down) ip -n "$sw" link set "p$i" down ;;
    up) ip -n "$sw" link set "p$i" up ;;
    delay)
      if ! [[ $v =~ ^[0-9]+$ ]] || [ "$v" -gt 60000 ]; then usage "link NODE delay MS: MS must be 0..60000, got '$v'"; fi
      echo "$v" >"$state/delayms$i"
      set_delay "$i" "$v" ;;
    loss)
      if ! [[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v p="$v" 'BEGIN { exit !(p <= 100) }'; then
        usage "link NODE loss PCT: PCT must be 0..100, got '$v'"
      fi
      set_loss "$i" "$v" ;;
    rate)
      if ! rate_bytes "$v" >/dev/null || [ "$(rate_bytes "$v")" -le 0 ]; then
        usage "link NODE rate RATE: RATE as tc writes it (100mbit, 1gbit, 500kbit), got '$v'"
      fi
      echo "$v" >"$state/rate$i"
      apply_shaping "$i" ;;
    clear)
      clear_delay "$i"
      rm -f "$state/rate$i" "$state/delayms$i"
      apply_shaping "$i"
      set_loss "$i" 0
      ip -n "$sw" link set "p$i" up ;;
    *) usage "link NODE down|up|delay MS|loss PCT|rate RATE|clear, got '$what'" ;;
  esac
  echo "netns.sh: node$i link: $what${v:+ $v}"
}

cmd_ps() {
  require_up
  local i p
  i=$(node_index "${1:-}")
  for p in $(node_pids "$i"); do
    [ -z "${2:-}" ] || [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] || continue
    echo "$p $( (tr '\0' ' ' <"/proc/$p/cmdline") 2>/dev/null | cut -c1-200)"
  done
  return 0
}

cmd_status() {
  require_up
  local n i
  n=$(n_nodes)
  echo "cluster '$name': $n node(s), switch namespace $sw, state in $state"
  for ((i = 0; i < n; i++)); do
    local port faults=""
    port=$(ip -n "$sw" -br link show "p$i" | awk '{print $2}')
    [ -f "$state/delayms$i" ] && faults+=" delay $(cat "$state/delayms$i")ms"
    [ -f "$state/rate$i" ] && faults+=" rate $(cat "$state/rate$i")"
    local loss
    loss=$({ in_node "$i" iptables -w -t filter -S ZT_FAULT 2>/dev/null || true; } | sed -n 's/.*--probability \([0-9.]*\).*/\1/p')
    [ -n "$loss" ] && faults+=" loss $(awk -v p="$loss" 'BEGIN { print p * 100 }')%"
    echo "node$i $net.$((i + 1)) port $port processes $(node_pids "$i" | wc -l)${faults:+ faults:$faults}"
  done
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  mpirun) shift; cmd_mpirun "$@" ;;
  exec) shift; cmd_exec "$@" ;;
  link) shift; cmd_link "$@" ;;
  kill) shift; cmd_kill "$@" ;;
  status) cmd_status ;;
  ps) shift; cmd_ps "$@" ;;
  agent) shift; cmd_agent "$@" ;;
  *) usage "unknown command '${1:-}'" ;;
esac
