#!/usr/bin/env bash
# A small cluster in network namespaces, to run scripts/tools/fleet_ssh.sh end to end for real:
# a control host (where the script runs, on a bridge), one server host and three client
# hosts, each running Debian's sshd with a throwaway key. Addresses are 198.18.0.0/24.
#
#   QBENCH=target/debug/qbench bash scripts/ci/fleet_ssh_check.sh OUT_DIR [QBENCH_ARGS...]
#
# Runs the fleet with OUT=OUT_DIR (shard reports and merged.json land there) and exits with
# its status. Everything it makes (namespaces, sshd processes, keys) is removed on every exit
# path. Needs root, iproute2 and openssh-server/openssh-client.
set -euo pipefail
cd "$(dirname "$0")/../.."

out=${1:?usage: $0 OUT_DIR [QBENCH_ARGS...]}
shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--proto h3 --objects 60x10KB --connections 6)
QBENCH=$(realpath "${QBENCH:-target/debug/qbench}")
sshd=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$sshd" ] || { echo "fleet check: sshd not found (apt-get install openssh-server)" >&2; exit 2; }

id=qbf$$
tmp=$(mktemp -d /tmp/qbench-fleet-check.XXXXXX)
hosts=(srv c0 c1 c2)
declare -A addr=([srv]=198.18.0.2 [c0]=198.18.0.11 [c1]=198.18.0.12 [c2]=198.18.0.13)
made_run_sshd=
sshd_pids=()
cleanup() {
    # Our own children (sshd -D): killed and reaped here, not left to init.
    for p in "${sshd_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${sshd_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    # sshd's session processes (a hung qbench) die with their namespace's last user.
    for h in "${hosts[@]}" ctl; do
        ip netns pids "$id-$h" 2>/dev/null | xargs -r kill 2>/dev/null || true
        ip netns del "$id-$h" 2>/dev/null || true
    done
    [ -n "$made_run_sshd" ] && rmdir /run/sshd 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# sshd refuses to start without its privilege-separation directory (Debian's unit makes it).
if [ ! -d /run/sshd ]; then mkdir -m 0755 /run/sshd; made_run_sshd=1; fi

ip netns add "$id-ctl"
ip -n "$id-ctl" link set lo up
ip -n "$id-ctl" link add br0 type bridge
ip -n "$id-ctl" addr add 198.18.0.1/24 dev br0
ip -n "$id-ctl" link set br0 up
for h in "${hosts[@]}"; do
    ns=$id-$h
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "$id$h" netns "$ns" type veth peer name "p$id$h" netns "$id-ctl"
    ip -n "$ns" addr add "${addr[$h]}/24" dev "$id$h"
    ip -n "$ns" link set "$id$h" up
    ip -n "$id-ctl" link set "p$id$h" master br0 up
done

ssh-keygen -q -t ed25519 -N '' -f "$tmp/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$tmp/id"
cp "$tmp/id.pub" "$tmp/authorized_keys"
for h in "${hosts[@]}"; do
    ip netns exec "$id-$h" "$sshd" -D -f /dev/null \
        -o "ListenAddress=${addr[$h]}" -o "HostKey=$tmp/host_key" \
        -o "AuthorizedKeysFile=$tmp/authorized_keys" -o PidFile=none \
        -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no \
        -o KbdInteractiveAuthentication=no -o UsePAM=no -o StrictModes=no \
        -o "SetEnv=PATH=$PATH" &
    sshd_pids+=($!)
done
for h in "${hosts[@]}"; do
    for _ in $(seq 50); do
        ip netns exec "$id-$h" ss -Hltn "sport = :22" | grep -q . && break
        sleep 0.1
    done
done

ssh_cmd="ssh -i $tmp/id -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5"
ip netns exec "$id-ctl" env SSH="$ssh_cmd" QBENCH="$QBENCH" QBENCH_LOCAL="$QBENCH" \
    OUT="$out" START_DELAY="${START_DELAY:-5}" \
    bash scripts/tools/fleet_ssh.sh "root@${addr[srv]}" "root@${addr[c0]}" "root@${addr[c1]}" \
    "root@${addr[c2]}" -- "${args[@]}"
