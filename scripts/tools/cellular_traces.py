#!/usr/bin/env python3
"""Mahimahi delivery traces shaped like IMC'17 Table 5's cellular networks.

Recorded operator traces cannot be shipped here, so these are synthetic: for each network, a
rate that changes every 100 ms (log-normal around the table's mean throughput, coefficient of
variation CV, each draw correlated with the one before by RHO), with delivery opportunities of
one 1500-byte packet spaced evenly at that rate, millisecond by millisecond. The mean over the
trace is scaled to the table's throughput. Deterministic (fixed
seed); writes NAME.up and NAME.down (the table gives one throughput, used both ways: a page
load's uplink carries only requests) into the output directory, 60 s each, looping.

    python3 scripts/tools/cellular_traces.py [OUT_DIR]   # default scenarios/traces

The scenario scenarios/imc17-fig14-cellular.toml uses them, with each network's RTT, RTT
spread, loss and reordering as link fields (see the scenario's comments for the mapping).
"""
import math
import os
import random
import sys

# IMC'17 Table 5: mean throughput (Mbit/s) per network.
NETWORKS = {
    "verizon-3g": 0.17,
    "verizon-lte": 4.0,
    "sprint-3g": 0.31,
    "sprint-lte": 2.4,
}
PERIOD_MS = 60_000
STEP_MS = 100
CV = 0.5
RHO = 0.8
PACKET_BITS = 1500 * 8


def trace(mean_mbps, rng):
    sigma = math.sqrt(math.log(1 + CV * CV))
    z, per_ms = 0.0, []
    for _ in range(PERIOD_MS // STEP_MS):
        z = RHO * z + math.sqrt(1 - RHO * RHO) * rng.gauss(0, 1)
        factor = math.exp(sigma * z - sigma * sigma / 2)
        pkts_per_ms = mean_mbps * 1e6 * factor / PACKET_BITS / 1000
        per_ms.extend([pkts_per_ms] * STEP_MS)
    # Scale to the table's mean, then place the opportunities.
    want = mean_mbps * 1e6 * PERIOD_MS / 1000 / PACKET_BITS
    scale = want / sum(per_ms)
    lines = []
    carry = 0.0
    for ms, lam in enumerate(per_ms, start=1):
        carry += lam * scale
        n = int(carry)
        carry -= n
        lines.extend([str(ms)] * n)
    if not lines or lines[-1] != str(PERIOD_MS):
        lines.append(str(PERIOD_MS))
    return lines


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "scenarios/traces"
    os.makedirs(out, exist_ok=True)
    for i, (name, mbps) in enumerate(sorted(NETWORKS.items())):
        for j, direction in enumerate(["down", "up"]):
            rng = random.Random(1000 * i + j)
            lines = trace(mbps, rng)
            path = os.path.join(out, f"{name}.{direction}")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            got = len(lines) * PACKET_BITS / (PERIOD_MS / 1000) / 1e6
            print(f"{path}: {len(lines)} opportunities, mean {got:.3f} Mbit/s (table {mbps})")


if __name__ == "__main__":
    main()
