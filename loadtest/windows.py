#!/usr/bin/env python3
"""The page-view workload at several windows: rows written a view, $ a million views, staleness.

A one-way count waits in its isolate for the isolate's window (`EDGECOUNT_ONE_WAY_INTERVAL_MS`)
and, with relays (`EDGECOUNT_RELAYS`), in its relay for the relay's window
(`EDGECOUNT_RELAY_INTERVAL_MS`); every key counted in a window costs its rows once. For each
setting: a capacity hold of the page-view scenario (bench.py's: one-way increments with unique
visitors, Zipf over 10,000 pages, wrk on core 0, workerd on core 1) long enough to span several
of the longest window, then a wait until every view is applied. The rows and calls billed are
summed from `/v1/stats` read every 2 s (`ShardTotals`) and the server's CPU from `/proc`, from
before the hold to after that wait, so the views' later flushes are counted with them.

Usage: windows.py [--out DIR] [--hold-windows K] [--min-hold S]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import bench
from report import cost_per_million
from systems import LOADTEST, EdgecountWorkerd

# (isolate window ms, relays a shard, relay window ms)
SETTINGS = ((1_000, 0, 0), (1_000, 1, 5_000), (1_000, 1, 15_000), (1_000, 1, 30_000), (1_000, 1, 60_000))
KEYSPACE = 100_000
SAMPLES = 400_000


def say(message: str) -> None:
    print(f"[windows {time.strftime('%H:%M:%S')}] {message}", flush=True)


def drain_s(isolate_ms: int, relay_ms: int) -> float:
    return (isolate_ms + relay_ms) / 1000 + 3


class ShardTotals:
    """The shards' calls, rows read and rows written since it started, summed from `/v1/stats`
    read every POLL_S: a shard idle for a window may be evicted, and its counts start again
    from zero, so one reading before and one after would miss what it counted in between.
    Being read also keeps it from idling out: the readings are `stats` calls, not `runOps`,
    and count in none of the figures."""

    NAMES = ("calls", "rows_read", "rows_written")
    POLL_S = 2.0

    def __init__(self, system: EdgecountWorkerd) -> None:
        self.system = system
        self.last: dict[int, dict] = {}
        self.sums = dict.fromkeys(self.NAMES, 0)
        self.edge: dict = {}
        self.read()

    def read(self) -> None:
        stats = self.system.stats()
        if not stats:
            return
        self.edge = stats["edge"]
        for shard in stats["shards"]:
            before = self.last.get(shard["shard"])
            for name in self.NAMES:
                now = shard.get(name, 0)
                then = before.get(name, 0) if before else now
                self.sums[name] += now - then if now >= then else now
            self.last[shard["shard"]] = shard

    def wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(min(self.POLL_S, max(0.0, deadline - time.monotonic())))
            self.read()


def one_setting(run_dir: Path, keys_dir: Path, isolate_ms: int, relays: int, relay_ms: int, hold_s: int) -> dict:
    system = EdgecountWorkerd()
    system.VARS = {**EdgecountWorkerd.VARS, "EDGECOUNT_ONE_WAY_INTERVAL_MS": str(isolate_ms),
                   "EDGECOUNT_RELAYS": str(relays), "EDGECOUNT_RELAY_INTERVAL_MS": str(relay_ms or 5_000)}
    folder = run_dir / f"isolate-{isolate_ms}-relays-{relays}-{relay_ms}"
    folder.mkdir(parents=True, exist_ok=True)
    system.start(folder)
    try:
        bench.wrk_run(system, "page-view", folder, keys_dir, 3, SAMPLES, phase="warmup")
        time.sleep(drain_s(isolate_ms, relay_ms))
        cpu_before = system.cpu_seconds()
        totals = ShardTotals(system)
        flushes_before = totals.edge["one_way"]["flush_calls"]
        # The hold runs in a thread while the totals are read every few seconds.
        result: dict = {}
        worker = threading.Thread(target=lambda: result.update(
            hold=bench.wrk_run(system, "page-view", folder, keys_dir, hold_s, SAMPLES)))
        worker.start()
        while worker.is_alive():
            totals.wait(totals.POLL_S)
        hold = result["hold"]
        views = bench.metric(hold, "http_reqs", "count")
        held_s = hold["state"]["testRunDurationMs"] / 1000
        totals.wait(drain_s(isolate_ms, relay_ms))
        cpu = system.cpu_seconds() - cpu_before
        flushes = totals.edge["one_way"]["flush_calls"] - flushes_before
        # Calls to Durable Objects: the shards' (from relays, or from the isolate) and, with
        # relays, the isolate's flushes to them.
        relay_calls = flushes if relays else 0
        # A view is one worker request; its Durable Object calls, the shards' and the relays'.
        per_view = {
            "worker_requests_per_op": 1.0,
            "shard_calls_per_op": (totals.sums["calls"] + relay_calls) / views,
            "rows_read_per_op": totals.sums["rows_read"] / views,
            "rows_written_per_op": totals.sums["rows_written"] / views,
            "server_cpu_us_per_op": cpu * 1e6 / views,
        }
        row = {
            "isolate_window_ms": isolate_ms,
            "relays_per_shard": relays,
            "relay_window_ms": relay_ms,
            "hold_s": round(held_s, 1),
            "views_per_s": round(views / held_s, 1),
            "errors": bench.metric(hold, "http_req_failed", "rate"),
            "rows_written_per_view": round(per_view["rows_written_per_op"], 4),
            "object_calls_per_view": round(per_view["shard_calls_per_op"], 5),
            "server_cpu_us_per_view": round(per_view["server_cpu_us_per_op"], 1),
            "dollars_per_million_views": round(cost_per_million(per_view), 4),
            # A view is applied at the latest when both windows and the flushes are over.
            "staleness_at_most_s": round((isolate_ms + relay_ms) / 1000 + 1, 1),
        }
        say(json.dumps(row))
        return row
    finally:
        system.stop()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(bench.ROOT / "build" / "windows"))
    parser.add_argument("--hold-windows", type=int, default=3, help="each hold spans this many of its windows")
    parser.add_argument("--min-hold", type=int, default=20)
    parser.add_argument("--settings", default="", help="indices into SETTINGS, e.g. 0,4 (all if empty)")
    args = parser.parse_args()
    run_dir = Path(args.out).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    keys_dir = run_dir / "keys"
    subprocess.run([sys.executable, str(LOADTEST / "keys.py"), str(keys_dir), str(KEYSPACE), str(SAMPLES)],
                   check=True)
    chosen = [SETTINGS[int(i)] for i in args.settings.split(",")] if args.settings else list(SETTINGS)
    rows = []
    for isolate_ms, relays, relay_ms in chosen:
        hold_s = max(args.min_hold, args.hold_windows * (isolate_ms + relay_ms) // 1000)
        rows.append(one_setting(run_dir, keys_dir, isolate_ms, relays, relay_ms, hold_s))
        (run_dir / "windows-summary.json").write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
