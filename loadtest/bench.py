#!/usr/bin/env python3
"""Runs the benchmark: every system, every scenario, side by side, into one report.

For each system and scenario, three runs, one after the other:
1. a warm-up (not measured), so JIT, caches and shards are as they are in use;
2. the capacity hold: wrk (one thread, 32 kept-alive connections, on core 0) replaying the
   requests k6 would send (wrk/record.mjs, wrk/replay.lua) as fast as the server answers, the
   server on a whole core of its own (core 1, uncapped unless `--cpu-quota` asks for a cap);
   ops/s at saturation and the server's CPU over the hold only; the row is a capacity row
   (`bound: server`) only if the server was at least 90% busy;
3. the latency run: open model (k6 constant-arrival-rate), uncapped, at one offered rate per
   scenario that is the same for every system, so latencies compare.

Then the failover run (failover.py: a server killed with SIGKILL mid-load and started again) and
the paired holds of edgecount against the floor of each path (pairs.py).

Usage: bench.py [--profile full|quick|smoke] [--systems a,b] [--scenarios x,y] [--out DIR]
                [--cpu-quota CORES] [--pair-rounds N] [--pairs-only]
"""

from __future__ import annotations

import argparse
import atexit
import csv
import os
import io
import json
import platform
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import failover
import pairs
from systems import LOADTEST, ROOT, SYSTEMS, System, available

K6 = ROOT / ".tools" / "bin" / "k6"
WRK_DIR = LOADTEST / "wrk"
# wrk's connections in a capacity hold: enough to keep a one-core server busy while it waits on
# its storage, as k6's 32 virtual users did.
WRK_CONNECTIONS = int(os.environ.get("BENCH_WRK_CONNECTIONS", "32"))
BATCH_SIZE = 50
# A capacity row counts only if its server was at least this busy over the hold.
SERVER_BOUND_BUSY = 0.9
# The server's CPU cap in capacity holds, in cores; none by default: a server has its whole core,
# which wrk can saturate. A cap (BENCH_CPU_QUOTA or --cpu-quota) left workerd's CPU per op as it
# was but made webdis + Redis look 1.6-1.9x dearer than on a core of its own (docs/performance.md).
DEFAULT_CPU_QUOTA = float(os.environ["BENCH_CPU_QUOTA"]) if os.environ.get("BENCH_CPU_QUOTA") else None
# Offered rate of the latency runs, in requests/s, the same for every system of a scenario: one
# that the slowest system serves uncapped with room to spare.
LATENCY_RATES = {"batch": 20.0, "batch-async": 20.0, "ncache": 20.0}
DEFAULT_LATENCY_RATE = 300.0


@dataclass(frozen=True)
class Profile:
    # Seconds of the warm-up before each hold (0: none), and of each hold and latency run.
    probe_s: int
    measure_s: int
    keyspace: int
    cache_keys: int
    samples: int
    systems: tuple[str, ...]
    scenarios: tuple[str, ...]
    client_sweep: tuple[int, ...]
    ceilings: bool
    # Rounds of paired holds of edgecount against its floors (see pairs.py); 0 for none.
    pair_rounds: int = 0
    # How many of the paths with a floor get paired holds, in the scenarios' order; 0 for all.
    pair_paths: int = 0
    # The failover run (failover.py): the systems killed mid-run, its length and when the kill
    # comes, in seconds.
    failover_systems: tuple[str, ...] = ()
    failover_s: int = 0
    failover_kill_at_s: int = 0
    # Whether the paired holds end with a read after the shards sat idle (pairs.COLD_IDLE_S).
    pair_after_idle: bool = True


ALL_SYSTEMS = ("edgecount-workerd", "edgecount-workerd-cdn", "edgecount-workerd-cdn-5s", "edgecount-wrangler-dev",
               "js-floor-workerd", "js-hello-workerd", "redis-webdis", "redis-webdis-aof-always",
               "redis-webdis-aof-everysec", "memcached", "ehcache", "nginx-static")
# Killed mid-run in the failover run: edgecount, and Redis with each durable setting (the in-memory
# Redis would come back empty, which says nothing new).
FAILOVER_SYSTEMS = ("edgecount-workerd", "redis-webdis-aof-always", "redis-webdis-aof-everysec")
# The quick profile leaves out the dev proxy, whose figures say nothing about production.
QUICK_SYSTEMS = tuple(s for s in ALL_SYSTEMS if s != "edgecount-wrangler-dev")
PROFILES = {
    # ncache: the NCache comparison's 80/20 get/put mix over a million 100-byte items, 50 ops
    # per batch; its items are the cache entries preloaded (cache_keys).
    "full": Profile(3, 10, 1_000_000, 1_000_000, 400_000, ALL_SYSTEMS,
                    ("health", "read", "write", "write-async", "mixed", "hot", "batch", "batch-async", "cache-100b",
                     "cache-1k", "ncache", "page-view"),
                    (50, 100, 150, 200, 250, 300), True, pair_rounds=3,
                    failover_systems=FAILOVER_SYSTEMS, failover_s=40, failover_kill_at_s=15),
    "quick": Profile(3, 6, 100_000, 0, 200_000, QUICK_SYSTEMS,
                     ("health", "read", "write", "write-async", "mixed", "hot", "batch", "batch-async", "page-view"), (),
                     True,
                     pair_rounds=2, failover_systems=FAILOVER_SYSTEMS, failover_s=30, failover_kill_at_s=10),
    # A few seconds, for `make test`: keeps the kit from rotting; not a measurement. Its holds
    # still get a second's warm-up and last three: on a machine busy with the rest of the suite,
    # a hold of one second on cold shards has answered nothing (a batch wakes all 16 shards).
    "smoke": Profile(1, 3, 1_000, 0, 5_000, ("edgecount-workerd", "js-floor-workerd", "redis-webdis"),
                     ("read", "write-async", "mixed", "batch", "page-view"), (), False, pair_rounds=1, pair_paths=1,
                     failover_systems=("edgecount-workerd",), failover_s=8, failover_kill_at_s=3,
                     pair_after_idle=False),
}


# After a preload, a server may go on working (SQLite checkpoints after a million writes, say);
# the first scenario would carry that work. Wait until it is this idle, for at most SETTLE_MAX_S.
SETTLE_IDLE_SHARE = 0.05
SETTLE_MAX_S = 60


def settle(system: System) -> None:
    """Waits until `system` uses under SETTLE_IDLE_SHARE of a core over a second, and says how
    long that took, or that it never did within SETTLE_MAX_S."""
    started = time.monotonic()
    while time.monotonic() - started < SETTLE_MAX_S:
        before = system.cpu_seconds()
        time.sleep(1)
        if system.cpu_seconds() - before < SETTLE_IDLE_SHARE:
            say(f"  {system.name} settled after {time.monotonic() - started:.0f} s")
            return
    say(f"  {system.name} still busy {SETTLE_MAX_S} s after its preload; measuring anyway")


def preload_and_settle(system: System, keyspace: int, cache_keys: int) -> None:
    """Preloads `system` if it takes a preload, then lets it settle."""
    if type(system).preload is System.preload:
        return
    say(f"  preloading {keyspace:,} counters and {cache_keys:,} cache entries into {system.name}")
    system.preload(keyspace, cache_keys, 100)
    settle(system)


def port_in_use(base_url: str) -> str | None:
    """The `host:port` of `base_url` when something already listens there, else None."""
    address = urllib.parse.urlsplit(base_url)
    with socket.socket() as probe:
        probe.settimeout(0.5)
        if probe.connect_ex((address.hostname or "127.0.0.1", address.port or 80)) == 0:
            return f"{address.hostname}:{address.port}"
    return None


DELAY_ACCOUNTING = Path("/proc/sys/kernel/task_delayacct")


def count_io_waits() -> None:
    """Turns on the kernel's delay accounting, which counts the time a thread waits on block
    I/O (`summarize` adds it to the busy share), and sets it back as it was when the run ends;
    says so when it cannot (not root)."""
    try:
        before = DELAY_ACCOUNTING.read_text().strip()
        if before != "1":
            DELAY_ACCOUNTING.write_text("1")
            atexit.register(lambda: DELAY_ACCOUNTING.write_text(before))
    except OSError:
        say("kernel.task_delayacct is off and cannot be set here: a server waiting on its disk (durable "
            "writes) will look client-bound")


def io_waits_counted() -> bool:
    """Whether the kernel counts the time a thread waits on block I/O now."""
    try:
        return DELAY_ACCOUNTING.read_text().strip() == "1"
    except OSError:
        return False


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def k6_run(system: System, scenario: str, mode: str, run_dir: Path, keys_dir: Path, duration: int,
           rate: float = 0, vus: int = 32, value_bytes: int = 100, phase: str = "") -> dict:
    label = f"{system.name}-{scenario}-{phase or mode}-{int(rate) if mode == 'open' else vus}"
    summary = run_dir / "k6" / f"{label}.json"
    summary.parent.mkdir(exist_ok=True)
    base_scenario = "cache" if scenario.startswith("cache-") else scenario
    env = {
        "BASE_URL": system.base_url, "SYSTEM": system.name, "SCENARIO": base_scenario, "MODE": mode,
        "DURATION": f"{duration}s", "RATE": str(max(1, int(rate))), "VUS": str(vus),
        "MAX_VUS": str(max(400, vus)), "KEYS_DIR": str(keys_dir), "VALUE_BYTES": str(value_bytes),
        "SUMMARY": str(summary),
    }
    args = ["taskset", "-c", "0", str(K6), "run", "--quiet", "--no-usage-report"]
    for name, value in env.items():
        args += ["-e", f"{name}={value}"]
    args.append(str(LOADTEST / "k6" / "bench.js"))
    completed = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    (run_dir / "k6" / f"{label}.log").write_text(completed.stdout + completed.stderr)
    if not summary.exists():
        raise RuntimeError(f"k6 failed for {label}: {completed.stderr[-2000:]}")
    return json.loads(summary.read_text())


def wrk_requests(system: System, scenario: str, run_dir: Path, keys_dir: Path, value_bytes: int,
                 samples: int) -> Path:
    """The requests k6 would send in `scenario` to `system`, recorded once per run for wrk: as
    many as k6 sends before its key sequence (`samples` keys) starts again, which wrk replays
    from the start in turn (bench.py clears the recordings when a run starts)."""
    base_scenario = "cache" if scenario.startswith("cache-") else scenario
    out = run_dir / "wrk" / f"{system.name}-{scenario}.requests"
    if out.exists():
        return out
    out.parent.mkdir(exist_ok=True)
    # A batch request takes 50 keys of the sequence.
    count = max(1, samples // BATCH_SIZE) if scenario in ("batch", "batch-async", "ncache") else samples
    env = {**os.environ, "BASE_URL": system.base_url, "SYSTEM": system.name, "SCENARIO": base_scenario,
           "KEYS_DIR": str(keys_dir), "VALUE_BYTES": str(value_bytes)}
    subprocess.run([str(ROOT / "node_modules" / ".bin" / "node"), str(WRK_DIR / "record.mjs"), str(out), str(count)],
                   env=env, check=True, cwd=ROOT)
    return out


def wrk_run(system: System, scenario: str, run_dir: Path, keys_dir: Path, duration: int, samples: int,
            value_bytes: int = 100, phase: str = "hold") -> dict:
    """A closed-model run of wrk on core 0 replaying `scenario`'s requests, as fast as answers
    come, summarized in the shape of a k6 summary (the fields `summarize` reads)."""
    requests = wrk_requests(system, scenario, run_dir, keys_dir, value_bytes, samples)
    label = f"{system.name}-{scenario}-{phase}-wrk"
    args = ["taskset", "-c", "0", "wrk", "-t1", f"-c{WRK_CONNECTIONS}", f"-d{duration}s", "--timeout", "10s",
            "-s", str(WRK_DIR / "replay.lua"), system.base_url, "--", str(requests)]
    completed = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    (run_dir / "wrk" / f"{label}.log").write_text(completed.stdout + completed.stderr)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode or not lines:
        raise RuntimeError(f"wrk failed for {label}: {completed.stderr[-2000:]}")
    result = json.loads(lines[-1])
    sent = result["requests"]
    failed = result["bad_status"] + result["socket_errors"]
    tried = sent + result["socket_errors"]
    return {
        "metrics": {
            "http_reqs": {"values": {"count": sent}},
            "http_req_duration": {"values": {"med": result["p50_us"] / 1000, "p(95)": result["p95_us"] / 1000,
                                             "p(99)": result["p99_us"] / 1000}},
            "http_req_failed": {"values": {"rate": failed / tried if tried else 1.0}},
            "dropped_iterations": {"values": {"count": 0}},
        },
        "state": {"testRunDurationMs": result["duration_us"] / 1000},
    }


def metric(summary: dict, name: str, stat: str, default: float = 0.0) -> float:
    return summary["metrics"].get(name, {}).get("values", {}).get(stat, default)


def latency_rate(scenario: str) -> float:
    return LATENCY_RATES.get(scenario, DEFAULT_LATENCY_RATE)


def measure(system: System, scenario: str, profile: Profile, run_dir: Path, keys_dir: Path,
            cpu_quota: float | None) -> dict:
    value_bytes = 1024 if scenario == "cache-1k" else 100
    if profile.probe_s:
        wrk_run(system, scenario, run_dir, keys_dir, profile.probe_s, profile.samples, value_bytes, phase="warmup")
    row = capacity_hold(system, scenario, profile, run_dir, keys_dir, cpu_quota, value_bytes)
    # The latency run, uncapped, at the scenario's common offered rate.
    rate = latency_rate(scenario)
    latency = k6_run(system, scenario, "open", run_dir, keys_dir, profile.measure_s, rate=rate, vus=200,
                     value_bytes=value_bytes)
    dropped = metric(latency, "dropped_iterations", "count")
    errors = metric(latency, "http_req_failed", "rate")
    row.update({
        "latency_rate": rate,
        "p50_ms": round(metric(latency, "http_req_duration", "med"), 3),
        "p95_ms": round(metric(latency, "http_req_duration", "p(95)"), 3),
        "p99_ms": round(metric(latency, "http_req_duration", "p(99)"), 3),
        "error_rate": round(max(errors, row["error_rate"]), 5),
        "dropped_iterations": int(dropped),
        "meets_goals": dropped == 0 and errors < 0.001,
    })
    return row


def capacity_hold(system: System, scenario: str, profile: Profile, run_dir: Path, keys_dir: Path,
                  cpu_quota: float | None, value_bytes: int = 100, phase: str = "hold",
                  with_stats: bool = True) -> dict:
    """A closed-model hold of wrk, the server on its whole core (or capped at `cpu_quota` of
    one when asked), as a row.

    Stats are read outside the window and uncapped (counting a million stored keys under a
    cap can outlast the request's timeout), and the CPU figure spans the wrk run only; the
    server is idle before and after it, so wrk's own start-up adds nothing."""
    # Recorded before the window opens (when there was no warm-up to record them).
    wrk_requests(system, scenario, run_dir, keys_dir, value_bytes, profile.samples)
    before_stats = system.stats() if with_stats else None
    cap = system.cap(cpu_quota)
    before_cpu, before_io = system.cpu_seconds(), system.io_wait_seconds()
    hold = wrk_run(system, scenario, run_dir, keys_dir, profile.measure_s, profile.samples, value_bytes, phase=phase)
    cpu, io_wait = system.cpu_seconds() - before_cpu, system.io_wait_seconds() - before_io
    system.cap(None)
    after_stats = system.stats() if with_stats else None
    return summarize(system, scenario, hold, cpu, before_stats, after_stats, cap, io_wait)


def run_pairs(profile: Profile, systems: list[str], scenarios: list[str], run_dir: Path, keys_dir: Path,
              cpu_quota: float | None) -> list[dict]:
    """The paired holds (pairs.py), on fresh state of their own in `run_dir/pairs`."""
    wanted = [s for s in scenarios if s in pairs.FLOOR_OF and {pairs.EDGECOUNT, pairs.FLOOR_OF[s]} <= set(systems)]
    if profile.pair_paths:
        wanted = wanted[:profile.pair_paths]
    names = [pairs.EDGECOUNT, *sorted({pairs.FLOOR_OF[s] for s in wanted})]
    if not profile.pair_rounds or not wanted or any(available(name) for name in names):
        return []
    pairs_dir = run_dir / "pairs"
    pairs_dir.mkdir(exist_ok=True)
    started = []
    try:
        for name in names:
            busy = port_in_use(SYSTEMS[name].base_url)
            if busy:
                say(f"pairs skipped: {busy} is already in use by another process")
                return []
            say(f"pairs: starting {name}")
            SYSTEMS[name].start(pairs_dir)
            started.append(SYSTEMS[name])
            preload_and_settle(SYSTEMS[name], profile.keyspace, 0)

        def warm(system: System, scenario: str) -> None:
            if profile.probe_s:
                wrk_run(system, scenario, pairs_dir, keys_dir, profile.probe_s, profile.samples, phase="pair-warmup")

        def hold(system: System, scenario: str, turn: int) -> dict:
            return capacity_hold(system, scenario, profile, pairs_dir, keys_dir, cpu_quota, phase=f"pair{turn}",
                                 with_stats=False)

        floors = {name: SYSTEMS[name] for name in names[1:]}
        cold_idle_s = pairs.COLD_IDLE_S if profile.pair_after_idle else 0
        return pairs.paired_rows(SYSTEMS[pairs.EDGECOUNT], floors, wanted, profile.pair_rounds, warm, hold, say,
                                 cold_idle_s)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as error:
        say(f"pairs failed: {error}")
        return []
    finally:
        for system in started:
            system.stop()


def run_failovers(profile: Profile, systems: list[str], run_dir: Path) -> list[dict]:
    """The failover run of each system the profile names (failover.py), each on fresh state in
    `run_dir/failover`, uncapped, the load on core 0 and the server on core 1."""
    wanted = [name for name in profile.failover_systems if name in systems and not available(name)]
    if not profile.failover_s or not wanted:
        return []
    results = []
    affinity = os.sched_getaffinity(0)
    for name in wanted:
        system = SYSTEMS[name]
        busy = port_in_use(system.base_url)
        if busy:
            say(f"failover of {name} skipped: {busy} is already in use by another process")
            continue
        say(f"failover: {name}, {profile.failover_s} s of mixed load, SIGKILL at {profile.failover_kill_at_s} s")
        # Fresh state each run: counts left from an earlier run into the same folder would
        # read as more than was attempted.
        failover_dir = run_dir / "failover" / name
        shutil.rmtree(failover_dir, ignore_errors=True)
        failover_dir.mkdir(parents=True)
        try:
            system.start(failover_dir)
            # The load's threads are born on core 0, as k6 is; the server stays pinned to core 1.
            os.sched_setaffinity(0, {0})
            spelling = "webdis" if name.startswith("redis-webdis") else "v1"
            result = failover.run(system, spelling, failover_dir, profile.failover_s, profile.failover_kill_at_s, say)
            results.append(result)
            say(f"  {name}: {result['steady_ops_per_s']} ops/s before, away {result['longest_gap_s']:.2f} s, back "
                f"to steady {result['back_to_steady_s']} s after the kill; {result['lost_acknowledged']} acknowledged "
                f"increments lost, {result['keys_outside_bounds']} keys outside the bounds")
        except Exception as error:  # noqa: BLE001 - one system's failure must not end the run
            say(f"failover of {name} failed: {error!r}")
        finally:
            os.sched_setaffinity(0, affinity)
            system.stop()
    return results


def summarize(system: System, scenario: str, summary: dict, cpu_s: float, before: dict | None,
              after: dict | None, cap: float | None = None, io_wait_s: float = 0.0) -> dict:
    """A closed-model run as a row: ops/s, the server's CPU per op and how busy it was (its share
    of the cap, or of its one pinned core when uncapped)."""
    requests = metric(summary, "http_reqs", "count")
    ops_per_request = BATCH_SIZE if scenario in ("batch", "batch-async", "ncache") else 1
    duration_s = summary["state"]["testRunDurationMs"] / 1000
    ops = requests * ops_per_request
    dropped = metric(summary, "dropped_iterations", "count")
    errors = metric(summary, "http_req_failed", "rate")
    busy = cpu_s / (duration_s * (cap or 1.0)) if duration_s else 0.0
    # A server whose thread waits on its disk (an fsync before a durable write is answered) is
    # as saturated as one computing: its busy share plus its share waiting on block I/O.
    io_wait = io_wait_s / duration_s if duration_s and not cap else 0.0
    row = {
        "system": system.name,
        "scenario": scenario,
        "ops_per_s": round(ops / duration_s, 1) if duration_s else 0.0,
        "server_busy": round(busy, 3),
        "server_io_wait": round(io_wait, 3),
        "bound": "server" if busy + io_wait >= SERVER_BOUND_BUSY else "client",
        "cpu_quota_cores": cap,
        "p50_ms": round(metric(summary, "http_req_duration", "med"), 3),
        "p95_ms": round(metric(summary, "http_req_duration", "p(95)"), 3),
        "p99_ms": round(metric(summary, "http_req_duration", "p(99)"), 3),
        "error_rate": round(errors, 5),
        "server_cpu_us_per_op": round(cpu_s * 1e6 / ops, 2) if ops else None,
        "requests": int(requests),
        "dropped_iterations": int(dropped),
        "meets_goals": dropped == 0 and errors < 0.001,
        "persistence": system.persistence_of(scenario),
    }
    if before and after:
        row.update(billed_units(before, after, requests, ops))
    return row


def billed_units(before: dict, after: dict, requests: float, ops: float) -> dict:
    """What the platform bills per op over a hold, from `/v1/stats` before and after it (the
    shards count SQLite rows from their cursors), and the shards' state."""
    shards_before = {s["shard"]: s for s in before.get("shards", [])}
    restarted = sum(1 for s in after.get("shards", []) if s["calls"] < shards_before.get(s["shard"], s)["calls"])

    def delta(part: str, name: str) -> float:
        if part == "totals" and after.get("shards"):
            # Per shard: one that restarted during the hold (evicted while idle, say) counts
            # from zero again, so all it counted since happened inside the window.
            total = 0
            for shard in after["shards"]:
                now, then = shard.get(name, 0), shards_before.get(shard["shard"], {}).get(name, 0)
                total += now - then if now >= then else now
            return total
        return after[part].get(name, 0) - before[part].get(name, 0)

    units: dict = {"shard_restarts": restarted}
    if "counters_in_memory" in before["totals"]:
        # What the shards hold in memory once the hold is over: each keeps at most its bound of
        # counters (DEFAULT_CACHED_COUNTERS), whatever it stores.
        held = [s.get("counters_in_memory", 0) for s in after.get("shards", [])]
        units["counters_in_memory_after"] = sum(held)
        units["most_counters_in_memory_of_a_shard_after"] = max(held, default=0)
        units["shard_state"] = (f"{before['totals']['counters_in_memory']:,} of "
                                f"{before['totals']['stored_counters']:,} counters in memory at the start, "
                                f"{sum(held):,} at the end (at most {max(held, default=0):,} in a shard); "
                                f"{restarted} shard restarts")
    hits, misses = delta("edge", "hits"), delta("edge", "misses")
    if min(hits, misses) < 0:
        # The isolate's counters went backwards: it restarted mid-run (wrangler dev reloads),
        # so the before/after difference means nothing.
        return units
    units.update({
        "edge_hit_ratio": round(hits / (hits + misses), 4) if hits + misses else 0.0,
        "shard_calls_per_request": round(delta("totals", "calls") / requests, 4) if requests else None,
        # Shard calls that ran in a group with others (see docs/architecture.md): calls less groups.
        "grouped_calls": delta("totals", "calls") - delta("totals", "groups"),
        "groups_per_op": round(delta("totals", "groups") / ops, 4) if ops else None,
        "worker_requests_per_op": round(requests / ops, 4) if ops else None,
        "shard_calls_per_op": round(delta("totals", "calls") / ops, 4) if ops else None,
        "rows_read_per_op": round(delta("totals", "rows_read") / ops, 4) if ops else None,
        "rows_written_per_op": round(delta("totals", "rows_written") / ops, 4) if ops else None,
    })
    return units


def redis_benchmark(redis: System, *args: str) -> tuple[list[dict], float]:
    """One redis-benchmark run (50 clients, on core 0) with `args`: its CSV records, and how
    busy redis-server was meanwhile (webdis is idle)."""
    before_cpu, started = redis.cpu_seconds(), time.monotonic()
    completed = subprocess.run(["taskset", "-c", "0", "redis-benchmark", "-p", "6390", "-c", "50", *args, "--csv"],
                               capture_output=True, text=True, check=True)
    busy = (redis.cpu_seconds() - before_cpu) / (time.monotonic() - started)
    return list(csv.DictReader(io.StringIO(completed.stdout))), busy


def redis_benchmark_rows(redis: System) -> list[dict]:
    """The machine's Redis ceiling: redis-benchmark without and with pipelining, one run per
    test so that the server's CPU is known for each."""
    rows = []
    for pipeline, test in ((1, "incr"), (1, "get"), (50, "incr"), (50, "get")):
        records, busy = redis_benchmark(redis, "-t", test, "-n", "200000", "-P", str(pipeline))
        for record in records:
            scenario = {"GET": "read", "INCR": "write"}[record["test"]]
            rows.append({
                "system": "redis-benchmark",
                "scenario": scenario if pipeline == 1 else f"{scenario}-P50",
                "ops_per_s": float(record["rps"]),
                "p50_ms": float(record["p50_latency_ms"]),
                "p95_ms": float(record["p95_latency_ms"]),
                "p99_ms": float(record["p99_latency_ms"]),
                "error_rate": 0.0,
                "server_cpu_us_per_op": round(busy * 1e6 / float(record["rps"]), 2),
                "server_busy": round(busy, 3),
                "bound": "server" if busy >= SERVER_BOUND_BUSY else "client",
                "cpu_quota_cores": None,
                "meets_goals": True,
                "persistence": "none",
                "note": f"RESP, 50 clients, pipeline {pipeline}; closed model",
            })
    return rows


def ncache_redis_row(redis: System, items: int) -> dict:
    """The NCache comparison's 80/20 mix over `items` 100-byte values, pipelined 50 deep: a GET
    run and a SET run, blended 80/20 (redis-benchmark runs one command per test)."""
    runs = {}
    for test in ("get", "set"):
        records, busy = redis_benchmark(redis, "-t", test, "-n", "1000000", "-P", "50", "-d", "100",
                                        "-r", str(items))
        record = records[0]
        runs[test] = {"rps": float(record["rps"]), "busy": busy, "p99": float(record["p99_latency_ms"]),
                      "p50": float(record["p50_latency_ms"]), "p95": float(record["p95_latency_ms"])}
    blend = lambda f: 0.8 * f(runs["get"]) + 0.2 * f(runs["set"])  # noqa: E731
    busy = min(r["busy"] for r in runs.values())
    return {
        "system": "redis-benchmark", "scenario": "ncache",
        "ops_per_s": round(1 / blend(lambda r: 1 / r["rps"]), 1),
        "p50_ms": round(blend(lambda r: r["p50"]), 3), "p95_ms": round(blend(lambda r: r["p95"]), 3),
        "p99_ms": round(max(r["p99"] for r in runs.values()), 3), "error_rate": 0.0,
        "server_cpu_us_per_op": round(blend(lambda r: r["busy"] * 1e6 / r["rps"]), 2),
        "server_busy": round(busy, 3), "bound": "server" if busy >= SERVER_BOUND_BUSY else "client",
        "cpu_quota_cores": None, "meets_goals": True, "persistence": "none",
        "note": f"RESP, 50 clients, pipeline 50, {items:,} keys of 100 B; 80/20 blend of a GET and a SET run",
    }


def memcached_rows(system, profile: Profile, cpu_quota: float | None) -> list[dict]:
    """memcached's capacity under the same CPU cap as every server (mixed 80/20, 32 clients),
    then the seeds' client sweep, uncapped, with the C client (mcload.c)."""
    rows = []
    runs = [("mixed", 32, cpu_quota)] + [(f"clients-{n}", n, None) for n in profile.client_sweep]
    for scenario, clients, cap in runs:
        system.run_load(clients, profile.probe_s, profile.keyspace)
        applied = system.cap(cap)
        before_cpu = system.cpu_seconds()
        result = system.run_load(clients, profile.measure_s, profile.keyspace)
        cpu = system.cpu_seconds() - before_cpu
        system.cap(None)
        busy = cpu / (result["seconds"] * (applied or 1.0))
        rows.append({
            "system": system.name, "scenario": scenario,
            "ops_per_s": round(result["ops"] / result["seconds"], 1),
            "server_busy": round(busy, 3), "bound": "server" if busy >= SERVER_BOUND_BUSY else "client",
            "cpu_quota_cores": applied, "p50_ms": result["p50_ms"], "p95_ms": result["p95_ms"],
            "p99_ms": result["p99_ms"], "error_rate": 1.0 if result["errors"] else 0.0,
            "server_cpu_us_per_op": round(cpu * 1e6 / result["ops"], 2) if result["ops"] else None,
            "requests": result["ops"], "meets_goals": result["errors"] == 0, "persistence": system.persistence,
            "note": f"text protocol, {clients} clients (mcload.c), 80/20 get/set of 100 B over "
                    f"{profile.keyspace:,} keys; closed model" + ("" if cap else ", uncapped; latencies from this run"),
        })
        say(f"  memcached / {scenario}: {rows[-1]['ops_per_s']:.0f} ops/s at {busy:.0%} busy")
    return rows


def machine(cpu_quota: float | None) -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory_kb = int(Path("/proc/meminfo").read_text().split()[1])
    version = lambda *cmd: subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[:1]  # noqa: E731
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": len([l for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("processor")]),
        "memory_gib": round(memory_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "k6": version(str(K6), "version"),
        "workerd": version(str(ROOT / "node_modules/.bin/workerd"), "--version"),
        "redis": version("redis-server", "--version"),
        "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[:1],
        "pinning": "wrk and k6 on core 0, servers on core 1",
        "wrk_connections": WRK_CONNECTIONS,
        "io_waits_counted": io_waits_counted(),
        "wrk": [line.split(" Copyright")[0] for line in version("wrk", "--version")],
        "cpu_quota_cores_requested": cpu_quota,
    }


def write_summary(run_dir: Path, rows: list[dict], profile: str, skipped: dict[str, str],
                  cpu_quota: float | None, paired: list[dict] | None = None, pair_rounds: int = 0,
                  failovers: list[dict] | None = None) -> None:
    """Written after every row, so an interrupted run keeps what it measured."""
    summary = {"rows": rows, "machine": machine(cpu_quota), "profile": profile, "skipped": skipped,
               "pairs": paired or [], "pair_rounds": pair_rounds, "failover": failovers or []}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=PROFILES, default="full")
    parser.add_argument("--systems", help="comma-separated subset")
    parser.add_argument("--scenarios", help="comma-separated subset")
    parser.add_argument("--out", help="results folder (default loadtest/results/<timestamp>)")
    parser.add_argument("--cpu-quota", type=float, default=DEFAULT_CPU_QUOTA,
                        help="each server's CPU cap in capacity holds, in cores (default: none, a whole core)")
    parser.add_argument("--pair-rounds", type=int,
                        help="rounds of paired holds per path (default: the profile's; 0 for none)")
    parser.add_argument("--pairs-only", action="store_true",
                        help="only the paired holds of edgecount against its floors, no per-system rows")
    args = parser.parse_args()
    profile = PROFILES[args.profile]
    if args.pair_rounds is not None:
        profile = replace(profile, pair_rounds=max(0, args.pair_rounds))
    systems = args.systems.split(",") if args.systems else list(profile.systems)
    scenarios = args.scenarios.split(",") if args.scenarios else list(profile.scenarios)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    run_dir = (Path(args.out) if args.out else LOADTEST / "results" / stamp).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    keys_dir = run_dir / "keys"
    say(f"profile {args.profile}: {', '.join(systems)} x {', '.join(scenarios)} -> {run_dir}")
    count_io_waits()
    # What an earlier run into the same folder recorded is not this run's.
    for stale in (run_dir / "wrk", run_dir / "pairs" / "wrk", run_dir / "failover"):
        shutil.rmtree(stale, ignore_errors=True)
    subprocess.run([sys.executable, str(LOADTEST / "keys.py"), str(keys_dir), str(profile.keyspace),
                    str(profile.samples)], check=True)

    rows: list[dict] = []
    skipped: dict[str, str] = {}
    for name in ([] if args.pairs_only else systems):
        reason = available(name)
        if reason:
            skipped[name] = reason
            say(f"skipping {name}: {reason}")
            continue
        system = SYSTEMS[name]
        busy = port_in_use(system.base_url)
        if busy:
            # Something else answers there: measuring it would be measuring the wrong server.
            skipped[name] = f"{busy} is already in use by another process"
            say(f"skipping {name}: {skipped[name]}")
            continue
        say(f"starting {name}")
        try:
            system.start(run_dir)
            # cache-100b and cache-1k are the cache scenario with two value sizes.
            wanted = [s for s in scenarios
                      if s in system.scenarios or (s.startswith("cache-") and "cache" in system.scenarios)]
            cache_keys = profile.cache_keys if any(s.startswith(("cache", "ncache")) for s in wanted) else 0
            preload_and_settle(system, profile.keyspace, cache_keys)
            if name == "memcached":
                rows.extend(memcached_rows(system, profile, args.cpu_quota))
                write_summary(run_dir, rows, args.profile, skipped, args.cpu_quota)
                continue
            for scenario in wanted:
                say(f"  {name} / {scenario}")
                row = measure(system, scenario, profile, run_dir, keys_dir, args.cpu_quota)
                say(f"  {name} / {scenario}: {row['ops_per_s']:.0f} ops/s at {row['server_busy']:.0%} of "
                    f"{row['cpu_quota_cores'] or 1} core + {row['server_io_wait']:.0%} waiting on disk "
                    f"({row['bound']}-bound), "
                    f"{row['server_cpu_us_per_op']} us CPU/op; p99 {row['p99_ms']:.2f} ms at "
                    f"{row['latency_rate']:.0f} req/s, goals met: {row['meets_goals']}")
                rows.append(row)
                write_summary(run_dir, rows, args.profile, skipped, args.cpu_quota)
            if "clients" in system.scenarios:
                for vus in profile.client_sweep:
                    summary_before = system.stats()
                    cpu_before, io_before = system.cpu_seconds(), system.io_wait_seconds()
                    summary = k6_run(system, "clients", "closed", run_dir, keys_dir, profile.measure_s, vus=vus)
                    row = summarize(system, "clients", summary, system.cpu_seconds() - cpu_before,
                                    summary_before, system.stats(), io_wait_s=system.io_wait_seconds() - io_before)
                    row["scenario"] = f"clients-{vus}"
                    row["note"] = f"closed model, {vus} virtual users, mixed 80/20"
                    say(f"  {name} / clients {vus}: {row['ops_per_s']:.0f} ops/s")
                    rows.append(row)
            if name == "redis-webdis" and profile.ceilings:
                say("  redis-benchmark ceilings")
                rows.extend(redis_benchmark_rows(system))
                if "ncache" in scenarios:
                    rows.append(ncache_redis_row(system, profile.cache_keys))
            write_summary(run_dir, rows, args.profile, skipped, args.cpu_quota)
        except (RuntimeError, OSError, subprocess.CalledProcessError) as error:
            # One system failing must not cost the others' measurements.
            skipped[name] = f"failed: {error}"
            say(f"{name} failed: {error}")
        finally:
            system.stop()

    failovers = [] if args.pairs_only else run_failovers(profile, systems, run_dir)
    write_summary(run_dir, rows, args.profile, skipped, args.cpu_quota, failovers=failovers)
    paired = run_pairs(profile, systems, scenarios, run_dir, keys_dir, args.cpu_quota)
    write_summary(run_dir, rows, args.profile, skipped, args.cpu_quota, paired, profile.pair_rounds, failovers)
    if "page-view" in scenarios and profile.ceilings:
        # Not timed: the unique-visitor sketch beside Redis's on one visitor stream.
        say("the visitor sketch beside Redis PFADD/PFCOUNT (sketch.json)")
        subprocess.run([sys.executable, str(LOADTEST / "sketch_vs_redis.py"), str(run_dir)], check=False)
    say(f"wrote {run_dir / 'summary.json'} ({len(rows)} rows, {len(paired)} paired)")
    report = subprocess.run([sys.executable, str(LOADTEST / "report.py"), str(run_dir)])
    return report.returncode


if __name__ == "__main__":
    sys.exit(main())
