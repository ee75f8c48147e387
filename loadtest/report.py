#!/usr/bin/env python3
"""Turns a run's summary.json into report.md (tables and ratios) and chart.png.

Ratios compare each row with redis-webdis and with ehcache on the same scenario of the same
run, and edgecount's CPU per op with its floor (the JavaScript floor system for shard paths,
the JavaScript hello world for request-only paths), only when both rows are capacity rows (the
server at least 90% busy over the hold): a ratio against a client-bound row would measure the
load generator. Cost per million ops comes from the units each row counted and prices.json.
No figure is compared across runs. Usage: report.py <run-dir>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import chart
import pairs

BASELINES = ("redis-webdis", "ehcache")
ORDER = ("edgecount-workerd", "edgecount-workerd-cdn", "edgecount-workerd-cdn-5s", "edgecount-wrangler-dev",
         "js-floor-workerd", "js-hello-workerd", "redis-webdis", "redis-webdis-aof-always", "redis-webdis-aof-everysec",
         "redis-benchmark", "memcached", "ehcache", "nginx-static")
PRICES = json.loads((Path(__file__).resolve().parent / "prices.json").read_text())
# The floor of each path: shard paths against the JavaScript worker + Durable Object system, the
# others (no shard call) against the JavaScript hello world's health row.
FLOOR_SYSTEM = "js-floor-workerd"
SHARD_SCENARIOS = ("read", "write", "mixed", "batch")


def floor_row(rows: list[dict], row: dict) -> dict | None:
    if not row["system"].startswith("edgecount"):
        return None
    if row["scenario"] in SHARD_SCENARIOS:
        wanted = (FLOOR_SYSTEM, row["scenario"])
    elif row["scenario"] in ("health", "hot", "write-async", "batch-async"):
        wanted = ("js-hello-workerd", "health")
    else:
        return None
    return next((r for r in rows if (r["system"], r["scenario"]) == wanted), None)


def floor_ratio(rows: list[dict], row: dict) -> str:
    return ratio(row, floor_row(rows, row), "server_cpu_us_per_op")


def cost_per_million(row: dict) -> float | None:
    """Dollars per million ops at Cloudflare's list prices, from the units the row counted:
    worker requests, shard (Durable Object) calls, SQLite rows read and written, and CPU time
    (the whole workerd's, worker and shards, priced at the Workers CPU rate)."""
    needed = ("worker_requests_per_op", "shard_calls_per_op", "rows_read_per_op", "rows_written_per_op",
              "server_cpu_us_per_op")
    if any(row.get(name) is None for name in needed):
        return None
    price = PRICES["cloudflare"]
    return (row["worker_requests_per_op"] * price["worker_requests_per_million"]
            + row["shard_calls_per_op"] * price["durable_object_requests_per_million"]
            + row["rows_read_per_op"] * price["sqlite_rows_read_per_million"]
            + row["rows_written_per_op"] * price["sqlite_rows_written_per_million"]
            + row["server_cpu_us_per_op"] / 1000 * price["worker_cpu_ms_per_million"])


def cost_cell(row: dict) -> str:
    cost = cost_per_million(row)
    if cost is not None:
        return f"${cost:.3f}"
    if row["system"].startswith("redis"):
        return f"${PRICES['upstash']['commands_per_million']:.2f} (Upstash)"
    return "-"


def units_note(row: dict) -> str:
    if row.get("rows_written_per_op") is None:
        return ""
    return (f"per op: {row['worker_requests_per_op']:g} requests, {row['shard_calls_per_op']:g} shard calls, "
            f"{row['rows_read_per_op']:g} rows read, {row['rows_written_per_op']:g} rows written")


def ratio(row: dict, baseline: dict | None, field: str = "ops_per_s") -> str:
    if not baseline or not baseline.get(field) or not row.get(field):
        return "-"
    if row.get("bound") != "server" or baseline.get("bound") != "server":
        return "client-bound"
    return f"{row[field] / baseline[field]:.2f}x"


def busy(row: dict) -> str:
    if row.get("server_busy") is None:
        return "-"
    cap = row.get("cpu_quota_cores")
    of = f"{cap:g} core" if cap else "1 core"
    waited = f" + {row['server_io_wait']:.0%} waiting on disk" if row.get("server_io_wait", 0) >= 0.05 else ""
    return f"{row['server_busy']:.0%} of {of}{waited}" + ("" if row.get("bound") == "server" else " (client-bound)")


def cell(value: object, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def tables(rows: list[dict]) -> list[str]:
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    lines = []
    for scenario in scenarios:
        group = sorted((r for r in rows if r["scenario"] == scenario),
                       key=lambda r: ORDER.index(r["system"]) if r["system"] in ORDER else 99)
        by_system = {r["system"]: r for r in group}
        rates = {r.get("latency_rate") for r in group if r.get("latency_rate")}
        rate = f" at {rates.pop():g} req/s" if len(rates) == 1 else ""
        lines += [f"### {scenario}", "",
                  f"| system | capacity ops/s | server busy | vs redis-webdis | vs ehcache | server CPU µs/op "
                  f"| CPU vs floor | $ per million ops | p50 ms{rate} | p95 ms | p99 ms | errors | goals met | notes |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        for r in group:
            notes = [r.get("note", ""), r.get("persistence", ""), units_note(r), r.get("shard_state", "")]
            if "edge_hit_ratio" in r and (r.get("shard_calls_per_request") or 0) >= 0 and r["system"] != FLOOR_SYSTEM:
                notes.append(f"edge hits {r['edge_hit_ratio']:.0%}, shard groups {r.get('groups_per_op')} an op")
            lines.append(
                f"| {r['system']} | {cell(r['ops_per_s'], 0)} | {busy(r)} | {ratio(r, by_system.get(BASELINES[0]))} "
                f"| {ratio(r, by_system.get(BASELINES[1]))} | {cell(r.get('server_cpu_us_per_op'), 1)} "
                f"| {floor_ratio(rows, r)} | {cost_cell(r)} | {cell(r['p50_ms'])} | {cell(r['p95_ms'])} | {cell(r['p99_ms'])} | {r['error_rate']:.3%} "
                f"| {'yes' if r.get('meets_goals') else 'no'} | {'; '.join(n for n in notes if n)} |")
        lines.append("")
    return lines


def where_time_goes(rows: list[dict]) -> list[str]:
    """Server CPU per op along the request path, from the floor systems and edgecount in this
    run: what a request costs on workerd at all, what a Durable Object hop and its SQL add, and
    what edgecount adds on top of each."""
    by = {(r["system"], r["scenario"]): r for r in rows}
    steps = [
        ("a request on workerd: JavaScript hello world", ("js-hello-workerd", "health"), None),
        ("edgecount, no shard: `GET /v1/health`", ("edgecount-workerd", "health"), ("js-hello-workerd", "health")),
        ("JavaScript hello world answering with a hot read's headers", ("js-hello-workerd", "hot"),
         ("js-hello-workerd", "health")),
        ("edgecount, hot read from the isolate cache", ("edgecount-workerd", "hot"), ("js-hello-workerd", "health")),
        ("the same hot read, against the hello world with its headers", ("edgecount-workerd", "hot"),
         ("js-hello-workerd", "hot")),
        ("edgecount one-way increment (202 at once, applied within a second)", ("edgecount-workerd", "write-async"),
         ("js-hello-workerd", "health")),
        ("floor read: JS worker, RPC to a JS Durable Object, one SELECT", (FLOOR_SYSTEM, "read"), None),
        ("edgecount read from its shard", ("edgecount-workerd", "read"), (FLOOR_SYSTEM, "read")),
        ("floor increment: SELECT and upsert", (FLOOR_SYSTEM, "write"), None),
        ("edgecount durable increment", ("edgecount-workerd", "write"), (FLOOR_SYSTEM, "write")),
        ("floor 50-op batch, one RPC per shard, per op", (FLOOR_SYSTEM, "batch"), None),
        ("edgecount 50-op batch, per op", ("edgecount-workerd", "batch"), (FLOOR_SYSTEM, "batch")),
    ]
    lines = ["### where a request's time goes", "",
             "Server CPU per op at saturation (capacity holds of this run). Each edgecount step is set "
             "against its floor: the JavaScript hello world for paths without a shard, the JavaScript "
             "worker + Durable Object system running the same SQL for shard paths.", "",
             "| step | server CPU µs/op | floor µs/op | over the floor |", "|---|---:|---:|---:|"]
    for label, key, floor_key in steps:
        row = by.get(key)
        if not row or not row.get("server_cpu_us_per_op"):
            continue
        valid = row.get("bound") == "server"
        cpu = f"{row['server_cpu_us_per_op']:,.0f}" + ("" if valid else " (client-bound)")
        floor = by.get(floor_key) if floor_key else None
        if floor and floor.get("server_cpu_us_per_op"):
            times = ratio(row, floor, "server_cpu_us_per_op")
            extra = row["server_cpu_us_per_op"] - floor["server_cpu_us_per_op"]
            over = f"{extra:+,.0f} µs ({times})" if times != "client-bound" else times
            lines.append(f"| {label} | {cpu} | {floor['server_cpu_us_per_op']:,.0f} | {over} |")
        else:
            lines.append(f"| {label} | {cpu} | | |")
    return lines + [""] if len(lines) > 6 else []


def prices_note() -> list[str]:
    cf, upstash = PRICES["cloudflare"], PRICES["upstash"]
    return [f"`$ per million ops`: Cloudflare list prices as of {PRICES['as_of']} ({cf['plan']}; "
            f"{', '.join(cf['sources'])}): ${cf['worker_requests_per_million']} per million worker requests, "
            f"${cf['durable_object_requests_per_million']} per million Durable Object requests (shard calls), "
            f"${cf['sqlite_rows_read_per_million']} per million rows read, "
            f"${cf['sqlite_rows_written_per_million']} per million rows written, "
            f"${cf['worker_cpu_ms_per_million']} per million CPU ms (the whole workerd's CPU per op, worker and "
            f"shards). Not counted: {cf['not_counted']}. Redis rows show {upstash['plan']}'s "
            f"${upstash['commands_per_million']} per million commands ({upstash['sources'][0]}).", ""]


def sketch_lines(run_dir: Path) -> list[str]:
    """The unique-visitor sketch beside Redis's HyperLogLog (sketch.json, by sketch_vs_redis.py)."""
    path = run_dir / "sketch.json"
    if not path.exists():
        return []
    rows = sorted(json.loads(path.read_text()), key=lambda r: (r["visitors"], r["system"]))
    lines = ["### unique visitors: the sketch beside Redis PFADD/PFCOUNT", "",
             "The same stream of distinct visitors into one key of each: the estimate, its error and the "
             "bytes stored (Redis: `STRLEN` of the key).", "",
             "| visitors | system | estimate | error | bytes |", "|---:|---|---:|---:|---:|"]
    lines += [f"| {r['visitors']:,} | {r['system']} | {r['estimate']:,} | {r['error']:+.3%} | {r['bytes']:,} |"
              for r in rows]
    return lines + [""]


def failover_lines(failovers: list[dict]) -> list[str]:
    """The failover run's table (failover.py): how long each system was away after a SIGKILL,
    and what its counters kept."""
    if not failovers:
        return []
    lines = ["### failover: SIGKILL mid-run, started again over its own state", "",
             "Mixed load (80% reads, 20% increments over "
             f"{failovers[0].get('keys', 64)} keys, 16 kept-alive clients on core 0, the server uncapped on core 1); "
             "the server's processes killed with SIGKILL and started again at once. `away`: the longest gap "
             "without one answer; `back to steady`: from the kill to the first second at 90% of the rate "
             "before it, held a second more; the bounds are Jepsen's, on a strong read of each key afterwards: "
             "acknowledged <= final value <= attempted. The load is the bench's own Python clients, so "
             "the rates are theirs, not the servers' capacities, and the errors are mostly their retries "
             "while the server is down.", "",
             "| system | persistence | ops/s before | lowest ops/s after | away s | back to steady s | errors "
             "| increments attempted / acknowledged / counted | acknowledged lost | keys outside the bounds |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for f in failovers:
        back = "never" if f["back_to_steady_s"] is None else f"{f['back_to_steady_s']:.1f}"
        lines.append(f"| {f['system']} | {f['persistence']} | {f['steady_ops_per_s']:,} | {f['dip_ops_per_s']:,} "
                     f"| {f['longest_gap_s']:.2f} | {back} | {f['errors']:,} | {f['attempted_increments']:,} / "
                     f"{f['acknowledged_increments']:,} / {f['counted']:,} | {f['lost_acknowledged']:,} "
                     f"| {f['keys_outside_bounds']} |")
    return lines + [""]


def write_report(run_dir: Path, summary: dict) -> None:
    rows, machine = summary["rows"], summary["machine"]
    # A system's scenarios may promise different things (edgecount's one-way writes): its most
    # common promise is listed plainly, any other with the scenarios it covers.
    promises: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        if r.get("persistence"):
            promises.setdefault(r["system"], {}).setdefault(r["persistence"], []).append(r["scenario"])
    persistence = {}
    for system, by_promise in promises.items():
        ranked = sorted(by_promise.items(), key=lambda item: -len(item[1]))
        persistence[system] = "; ".join(
            [ranked[0][0]] + [f"in {', '.join(sorted(set(scenarios)))}: {p}" for p, scenarios in ranked[1:]])
    lines = [
        f"# edgecount benchmark, {machine['date']}",
        "",
        f"Profile `{summary['profile']}` on {machine['cpu']} ({machine['cores']} cores, "
        f"{machine['memory_gib']} GiB), {machine['pinning']}. {' '.join(machine.get('wrk', []))}, "
        f"k6 {' '.join(machine['k6'])}, "
        f"workerd {' '.join(machine['workerd'])}, {' '.join(machine['redis'])}, {' '.join(machine['java'])}.",
        "",
        "`capacity ops/s`: a closed-model hold of wrk (one thread, 32 kept-alive connections, on core 0) "
        "replaying the requests k6 would send, as fast as answers come, after a warm-up, with the server on "
        "a whole core of its own (core 1; `cpu_quota_cores` says so when a run asked for a cgroup cap). "
        "`server busy`: the server's CPU over the hold as a share of its core (or cap), plus the share its "
        "threads waited on the disk (an fsync before a durable answer) where the kernel counts it; a row under "
        "90% is client-bound and no ratio is computed from it. Server CPU is user + "
        "system time of the server's processes per op, over the hold only. Latencies are from a "
        "separate open-model run (k6 constant-arrival-rate, uncapped) at one offered rate per "
        "scenario, the same for every system; `goals met`: that run had no dropped iterations and "
        "under 0.1% errors. A batch request counts 50 ops.",
        "",
    ]
    if persistence:
        lines += ["Persistence: " + "; ".join(f"{s}: {p}" for s, p in persistence.items()) + ".", ""]
    if summary.get("skipped"):
        lines += ["Not run: " + "; ".join(f"{s} ({why})" for s, why in summary["skipped"].items()) + ".", ""]
    lines += prices_note()
    lines += where_time_goes(rows)
    lines += pairs.report_lines(summary.get("pairs", []))
    lines += tables(rows)
    lines += failover_lines(summary.get("failover", []))
    lines += sketch_lines(run_dir)
    if rows:  # a run of the paired holds only has no rows to chart
        lines += ["![CPU per op against the floor, capacity per core, $ per million, failover](chart.png)", ""]
    (run_dir / "report.md").write_text("\n".join(lines))


def main() -> int:
    run_dir = Path(sys.argv[1])
    summary = json.loads((run_dir / "summary.json").read_text())
    write_report(run_dir, summary)
    charted = bool(summary["rows"]) and chart.write_chart(
        run_dir, summary, floor_row, cost_per_million, PRICES["upstash"]["commands_per_million"])
    if summary["rows"] and not charted:
        print("report: matplotlib is not installed; no chart drawn", file=sys.stderr)
    print(f"report: {run_dir / 'report.md'}" + (f", {run_dir / 'chart.png'}" if charted else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
