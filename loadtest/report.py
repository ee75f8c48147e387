#!/usr/bin/env python3
"""Turns a run's summary.json into report.md (tables and ratios) and chart.png.

Ratios compare each row with redis-webdis and with ehcache on the same scenario of the same
run, and only when both rows are capacity rows (the server at least 90% busy over the hold):
a ratio against a client-bound row would measure the load generator. No figure is compared
across runs. Usage: report.py <run-dir>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

BASELINES = ("redis-webdis", "ehcache")
ORDER = ("edgecount-workerd", "edgecount-workerd-cdn", "edgecount-wrangler-dev", "redis-webdis", "ehcache",
         "nginx-static", "js-hello-workerd", "redis-benchmark")


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
    return f"{row['server_busy']:.0%} of {of}" + ("" if row.get("bound") == "server" else " (client-bound)")


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
                  f"| p50 ms{rate} | p95 ms | p99 ms | errors | goals met | notes |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        for r in group:
            notes = [r.get("note", ""), r.get("persistence", "")]
            if "edge_hit_ratio" in r and (r.get("shard_calls_per_request") or 0) >= 0:
                notes.append(f"edge hits {r['edge_hit_ratio']:.0%}, shard calls/request "
                             f"{cell(r.get('shard_calls_per_request'), 3)}, coalesced ops {r.get('coalesced_ops')}")
            lines.append(
                f"| {r['system']} | {cell(r['ops_per_s'], 0)} | {busy(r)} | {ratio(r, by_system.get(BASELINES[0]))} "
                f"| {ratio(r, by_system.get(BASELINES[1]))} | {cell(r.get('server_cpu_us_per_op'), 1)} "
                f"| {cell(r['p50_ms'])} | {cell(r['p95_ms'])} | {cell(r['p99_ms'])} | {r['error_rate']:.3%} "
                f"| {'yes' if r.get('meets_goals') else 'no'} | {'; '.join(n for n in notes if n)} |")
        lines.append("")
    return lines


def request_path_overhead(rows: list[dict]) -> list[str]:
    """edgecount's cheapest request (`/v1/health`: the Rust entry, routing, the configuration, a
    JSON answer, no shard) against a JavaScript hello world on the same workerd."""
    health = {r["system"]: r for r in rows if r["scenario"] == "health"}
    rust, js = health.get("edgecount-workerd"), health.get("js-hello-workerd")
    if not rust or not js or not rust.get("server_cpu_us_per_op") or not js.get("server_cpu_us_per_op"):
        return []
    if rust.get("bound") != "server" or js.get("bound") != "server":
        return ["### request path overhead", "", "Not computed: a health row was client-bound.", ""]
    cpu_ratio = rust["server_cpu_us_per_op"] / js["server_cpu_us_per_op"]
    return ["### request path overhead", "",
            f"edgecount's `/v1/health` costs {rust['server_cpu_us_per_op']:.0f} µs of server CPU per request "
            f"against {js['server_cpu_us_per_op']:.0f} µs for a JavaScript hello world on the same workerd: "
            f"{cpu_ratio:.2f}x (throughput {ratio(rust, js)}).", ""]


def write_report(run_dir: Path, summary: dict) -> None:
    rows, machine = summary["rows"], summary["machine"]
    persistence = {r["system"]: r["persistence"] for r in rows if r.get("persistence")}
    lines = [
        f"# edgecount benchmark, {machine['date']}",
        "",
        f"Profile `{summary['profile']}` on {machine['cpu']} ({machine['cores']} cores, "
        f"{machine['memory_gib']} GiB), {machine['pinning']}. k6 {' '.join(machine['k6'])}, "
        f"workerd {' '.join(machine['workerd'])}, {' '.join(machine['redis'])}, {' '.join(machine['java'])}.",
        "",
        "`capacity ops/s`: a closed-model hold (32 virtual users as fast as answers come) after a "
        "warm-up, with the server capped at a fraction of a core by a cgroup CPU quota so that it, "
        "not k6, is the bottleneck. `server busy`: the server's CPU over the hold as a share of that "
        "cap; a row under 90% is client-bound and no ratio is computed from it. Server CPU is user + "
        "system time of the server's processes per op, over the hold only. Latencies are from a "
        "separate open-model run (k6 constant-arrival-rate, uncapped) at one offered rate per "
        "scenario, the same for every system; `goals met`: that run had no dropped iterations and "
        "under 0.1% errors. A batch request counts 50 ops.",
        "",
        "Persistence: " + "; ".join(f"{s}: {p}" for s, p in persistence.items()) + ".",
        "",
    ]
    if summary.get("skipped"):
        lines += ["Not run: " + "; ".join(f"{s} ({why})" for s, why in summary["skipped"].items()) + ".", ""]
    lines += tables(rows)
    lines += request_path_overhead(rows)
    lines += ["![ops/s and p99 per system and scenario](chart.png)", ""]
    (run_dir / "report.md").write_text("\n".join(lines))


def write_chart(run_dir: Path, rows: list[dict]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: matplotlib is not installed; no chart drawn", file=sys.stderr)
        return False
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    systems = [s for s in ORDER if any(r["system"] == s for r in rows)]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(max(8, 1.6 * len(scenarios)), 8), sharex=True)
    width = 0.8 / max(1, len(systems))
    for i, system in enumerate(systems):
        by_scenario = {r["scenario"]: r for r in rows if r["system"] == system}
        xs = [j + i * width for j, s in enumerate(scenarios) if s in by_scenario]
        present = [s for s in scenarios if s in by_scenario]
        top.bar(xs, [by_scenario[s]["ops_per_s"] for s in present], width, label=system)
        bottom.bar(xs, [by_scenario[s]["p99_ms"] for s in present], width, label=system)
    top.set_yscale("log")
    top.set_ylabel("ops/s (log)")
    bottom.set_yscale("log")
    bottom.set_ylabel("p99 latency, ms (log)")
    bottom.set_xticks([j + 0.4 - width / 2 for j in range(len(scenarios))], scenarios, rotation=30)
    top.legend(fontsize="small", ncols=2)
    top.set_title("edgecount and baselines, same machine, same run")
    figure.tight_layout()
    figure.savefig(run_dir / "chart.png", dpi=110)
    return True


def main() -> int:
    run_dir = Path(sys.argv[1])
    summary = json.loads((run_dir / "summary.json").read_text())
    write_report(run_dir, summary)
    charted = write_chart(run_dir, summary["rows"])
    print(f"report: {run_dir / 'report.md'}" + (f", {run_dir / 'chart.png'}" if charted else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
