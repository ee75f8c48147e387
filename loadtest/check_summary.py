#!/usr/bin/env python3
"""Checks that a benchmark run produced a well-formed summary.json with rows for the named
systems; the smoke test in `make test` runs it so the kit cannot rot unnoticed. It checks the
shape of the results, never their speed.

Usage: check_summary.py <summary.json> <system> [<system> ...]
"""

import json
import sys

FIELDS = {"system", "scenario", "ops_per_s", "p50_ms", "p95_ms", "p99_ms", "error_rate", "server_cpu_us_per_op",
          "server_busy", "bound", "cpu_quota_cores", "latency_rate", "persistence"}


def main() -> int:
    summary = json.load(open(sys.argv[1]))
    problems = []
    for row in summary["rows"]:
        missing = FIELDS - row.keys()
        if missing:
            problems.append(f"{row.get('system')}/{row.get('scenario')} lacks {sorted(missing)}")
        if not row.get("ops_per_s", 0) > 0:
            problems.append(f"{row['system']}/{row['scenario']} served nothing")
        if row.get("bound") not in ("server", "client"):
            problems.append(f"{row['system']}/{row['scenario']} has no bound (server or client)")
        if not 0 <= row.get("server_busy", -1) <= 2:
            problems.append(f"{row['system']}/{row['scenario']} has an impossible server_busy {row.get('server_busy')}")
        if row.get("error_rate", 1) >= 0.001:
            problems.append(f"{row['system']}/{row['scenario']} had {row['error_rate']:.2%} errors")
    for system in sys.argv[2:]:
        if not any(r["system"] == system for r in summary["rows"]):
            problems.append(f"no rows for {system} (skipped: {summary.get('skipped', {}).get(system)})")
    if "machine" not in summary:
        problems.append("no machine description")
    for problem in problems:
        print(f"check_summary: {problem}")
    passed = len(summary["rows"]) if not problems else 0
    print(f"bench smoke: {passed} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
