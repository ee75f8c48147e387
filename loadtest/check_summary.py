#!/usr/bin/env python3
"""Checks that a benchmark run produced a well-formed summary.json with rows for the named
systems; the smoke test in `make test` runs it so the kit cannot rot unnoticed. It checks the
shape of the results, never their speed.

Usage: check_summary.py <summary.json> <system> [<system> ...]
"""

import json
import sys
from pathlib import Path

FIELDS = {"system", "scenario", "ops_per_s", "p50_ms", "p95_ms", "p99_ms", "error_rate", "server_cpu_us_per_op",
          "server_busy", "bound", "cpu_quota_cores", "latency_rate", "persistence"}
# Rows of a capacity hold (wrk) also say how long the server waited on its disk.
HOLD_FIELDS = {"server_io_wait"}
# What the platform bills per op: counted by every system that serves /v1/stats with row counts
# (edgecount and the JavaScript floor), so that the report can price it.
BILLED = {"worker_requests_per_op", "shard_calls_per_op", "rows_read_per_op", "rows_written_per_op"}
BILLED_SYSTEMS = {"edgecount-workerd", "js-floor-workerd"}
FAILOVER_FIELDS = {"system", "persistence", "seconds", "killed_at_s", "ready_at_s", "steady_ops_per_s",
                   "dip_ops_per_s", "back_to_steady_s", "longest_gap_s", "errors", "attempted_increments",
                   "acknowledged_increments", "counted", "lost_acknowledged", "keys_outside_bounds", "timeline"}


def main() -> int:
    summary = json.load(open(sys.argv[1]))
    problems = []
    report = Path(sys.argv[1]).with_name("report.md")
    for row in summary["rows"]:
        missing = FIELDS - row.keys()
        if missing:
            problems.append(f"{row.get('system')}/{row.get('scenario')} lacks {sorted(missing)}")
        if row.get("system") != "redis-benchmark" and not row.get("scenario", "").startswith("clients-"):
            lacking = HOLD_FIELDS - row.keys()
            if lacking:
                problems.append(f"{row.get('system')}/{row.get('scenario')} lacks {sorted(lacking)}")
        if not row.get("ops_per_s", 0) > 0:
            problems.append(f"{row['system']}/{row['scenario']} served nothing")
        if row.get("bound") not in ("server", "client"):
            problems.append(f"{row['system']}/{row['scenario']} has no bound (server or client)")
        if not 0 <= row.get("server_busy", -1) <= 2:
            problems.append(f"{row['system']}/{row['scenario']} has an impossible server_busy {row.get('server_busy')}")
        if row.get("system") in BILLED_SYSTEMS:
            unpriced = BILLED - row.keys()
            if unpriced:
                problems.append(f"{row['system']}/{row['scenario']} lacks {sorted(unpriced)}")
            elif row["scenario"] in ("write", "mixed", "batch") and not (row["rows_written_per_op"] or 0) > 0:
                problems.append(f"{row['system']}/{row['scenario']} wrote no rows")
        if row.get("error_rate", 1) >= 0.001:
            problems.append(f"{row['system']}/{row['scenario']} had {row['error_rate']:.2%} errors")
    for system in sys.argv[2:]:
        if not any(r["system"] == system for r in summary["rows"]):
            problems.append(f"no rows for {system} (skipped: {summary.get('skipped', {}).get(system)})")
    # The paired holds run whenever edgecount and a floor both ran (see pairs.py).
    if {"edgecount-workerd", "js-floor-workerd"} <= set(sys.argv[2:]):
        if not summary.get("pairs"):
            problems.append("no paired holds of edgecount against its floor")
        for pair in summary.get("pairs", []):
            if len(pair["rounds"]) != summary.get("pair_rounds"):
                problems.append(f"pair {pair['scenario']} has {len(pair['rounds'])} rounds, "
                                f"not the {summary.get('pair_rounds')} asked for")
            for turn in pair["rounds"]:
                if not (turn["edgecount_us"] and turn["floor_us"]):
                    problems.append(f"pair {pair['scenario']} has a round without CPU figures: {turn}")
        if "in alternating holds" not in (report.read_text() if report.exists() else ""):
            problems.append(f"{report} lacks the paired holds")
    # The failover run (failover.py) of edgecount, whose acknowledged increments must all survive
    # the SIGKILL: a loss here is a broken guarantee, not a slow machine.
    if "edgecount-workerd" in sys.argv[2:]:
        runs = [f for f in summary.get("failover", []) if f.get("system") == "edgecount-workerd"]
        if not runs:
            problems.append("no failover run of edgecount-workerd")
        for run in runs:
            missing = FAILOVER_FIELDS - run.keys()
            if missing:
                problems.append(f"the failover run lacks {sorted(missing)}")
                continue
            if len(run["timeline"]) != run["seconds"] or not any(p["ok"] for p in run["timeline"]):
                problems.append("the failover run's timeline is not one answered second after another")
            if run["lost_acknowledged"] or run["keys_outside_bounds"]:
                problems.append(f"edgecount lost {run['lost_acknowledged']} acknowledged increments in the failover "
                                f"run ({run['keys_outside_bounds']} keys outside Jepsen's bounds)")
            if not run["acknowledged_increments"]:
                problems.append("the failover run acknowledged no increment, so it checked nothing")
            # A kill that took effect leaves a gap: the runtime takes over a second to come back.
            if not (run["ready_at_s"] > run["killed_at_s"] and run["longest_gap_s"] >= 0.1):
                problems.append(f"the failover run shows no outage (gap {run['longest_gap_s']} s): was it killed?")
        if runs and "failover: SIGKILL mid-run" not in (report.read_text() if report.exists() else ""):
            problems.append(f"{report} lacks the failover table")
    if summary.get("rows") and not Path(sys.argv[1]).with_name("chart.png").exists():
        problems.append("no chart.png")
    if "machine" not in summary:
        problems.append("no machine description")
    if not report.exists() or "where a request's time goes" not in report.read_text():
        problems.append(f"{report} lacks the table of where a request's time goes")
    for problem in problems:
        print(f"check_summary: {problem}")
    passed = len(summary["rows"]) if not problems else 0
    print(f"bench smoke: {passed} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
