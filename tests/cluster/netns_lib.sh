# shellcheck shell=bash
# A test cluster of network namespaces (tools/cluster/netns.sh), for the tests' sake (sourced after
# ../lib.sh). Each test gets a cluster of its own name, taken down on every exit (pass or fail):
#   cluster_up N              nodes node0..nodeN-1, or skip (77) saying why (not root, no iptables, ...)
#   cluster_mpirun NP ARGS... ztrain-style mpirun across the nodes (a hang guard of ZT_TIMEOUT s)
#   cluster_ranks_left [I..]  how many ztrain processes are still on the cluster's nodes (or nodes I..)
#   cluster_wait_gone T0 SECS [I..]  until no ztrain is left on any node (or on nodes I..; at most SECS
#                             s): $gone_s = the time since T0 (date +%s.%N, the fault) when the last one
#                             was gone; else returns 1
NETNS=$ZT_SOURCE/tools/cluster/netns.sh
# The bound on the cluster: every rank ends within dist.timeout_s + this (the watchdog's 7 s on one host,
# plus the nodes' probe (1 s) and MPI_Abort's orders crossing the links, with room for 8 ranks on 2 cores).
CLUSTER_MARGIN_S=${CLUSTER_MARGIN_S:-10}
export gone_s=""  # set by cluster_wait_gone
export ZT_CLUSTER=ztt$$
CLUSTER_NODES=0

cluster_down() { [ "$CLUSTER_NODES" -eq 0 ] || "$NETNS" down >/dev/null 2>&1; CLUSTER_NODES=0; }

cluster_up() {
  [ "$(id -u)" -eq 0 ] || skip "network namespaces need root (running as $(id -un))"
  local c
  for c in ip nsenter unshare iptables tc; do
    command -v "$c" >/dev/null || skip "'$c' not found (tools/install-deps.sh installs iproute2, util-linux, iptables)"
  done
  ip netns add "$ZT_CLUSTER-probe" 2>/dev/null || skip "cannot create a network namespace here (a container without CAP_SYS_ADMIN?)"
  ip netns del "$ZT_CLUSTER-probe"
  trap 'cluster_down; rm -rf "$ZT_WORK"' EXIT
  "$NETNS" up "$1" || fail "netns.sh up $1"
  CLUSTER_NODES=$1
}

cluster_mpirun() {
  local np=$1; shift
  timeout --kill-after=10 "${ZT_TIMEOUT:-240}" "$NETNS" mpirun -np "$np" "$@"
}

cluster_ranks_left() {
  local i n=0 nodes=("$@")
  [ ${#nodes[@]} -gt 0 ] || mapfile -t nodes < <(seq 0 $((CLUSTER_NODES - 1)))
  for i in "${nodes[@]}"; do
    n=$((n + $("$NETNS" ps "node$i" ztrain | wc -l)))
  done
  echo "$n"
}

cluster_wait_gone() {
  local t0=$SECONDS fault=$1 secs=$2
  shift 2
  while [ "$(cluster_ranks_left "$@")" -gt 0 ]; do
    [ $((SECONDS - t0)) -lt "$secs" ] || return 1
    sleep 0.2
  done
  gone_s=$(awk -v a="$fault" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
