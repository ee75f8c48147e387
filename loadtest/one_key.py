#!/usr/bin/env python3
"""How many acknowledged increments a second one key takes: every writer on the same key, wrk
(one thread, 32 kept-alive connections, core 0) posting `incr` as fast as answers come, the
server on core 1. One key is one shard's to make durable, one group after another; the row
reports ops/s, the server's CPU a write, the groups a write, and the answers that were not 200
(503 `shard_overloaded` past the shard's bound of writes waiting, none expected at this
concurrency).

Usage: one_key.py [--out DIR] [--seconds S] [--connections N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import bench
from systems import EdgecountWorkerd

SCRIPT = """
wrk.method = "POST"
wrk.path = "/v1/counters/one-key/hot/incr"
done = function(summary, latency, requests)
  io.write(string.format("{\\"requests\\": %d, \\"p50_us\\": %d, \\"p99_us\\": %d, \\"errors\\": %d}\\n",
    summary.requests, latency:percentile(50), latency:percentile(99),
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(bench.ROOT / "build" / "one-key"))
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "one-key.lua").write_text(SCRIPT)
    system = EdgecountWorkerd()
    system.start(out)
    try:
        base = ["taskset", "-c", "0", "wrk", "-t1", f"-c{args.connections}", "-s", str(out / "one-key.lua")]
        subprocess.run([*base, "-d3s", system.base_url], capture_output=True, check=True)
        before, cpu_before = system.stats(), system.cpu_seconds()
        started = time.monotonic()
        run = subprocess.run([*base, f"-d{args.seconds}s", system.base_url], capture_output=True, text=True,
                             check=True)
        elapsed = time.monotonic() - started
        cpu = system.cpu_seconds() - cpu_before
        after = system.stats()
        result = json.loads([line for line in run.stdout.splitlines() if line.startswith("{")][-1])
        writes = result["requests"]
        units = bench.billed_units(before, after, writes, writes) if before and after else {}
        row = {
            "connections": args.connections,
            "writes_per_s": round(writes / args.seconds, 1),
            "server_busy": round(cpu / elapsed, 3),
            "server_cpu_us_per_write": round(cpu * 1e6 / writes, 1) if writes else None,
            "p50_ms": result["p50_us"] / 1000,
            "p99_ms": result["p99_us"] / 1000,
            "not_200": result["errors"],
            "groups_per_write": units.get("groups_per_op"),
            "rows_written_per_write": units.get("rows_written_per_op"),
        }
        (out / "one-key-summary.json").write_text(json.dumps(row, indent=2) + "\n")
        print(json.dumps(row))
        return 0
    finally:
        system.stop()


if __name__ == "__main__":
    sys.exit(main())
