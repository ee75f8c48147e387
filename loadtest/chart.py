"""Draws a run's chart.png: one panel per question the report answers, read at a glance.

1. What does edgecount's CPU per op cost over its floor, path by path?
2. How many ops does a whole core serve, edgecount beside the systems people use instead?
3. What does a million ops cost at list prices, beside Upstash's price per command?
4. When the server is killed mid-run, how long is each system away, and what comes back?

edgecount is drawn in one strong colour, every other system in its own muted one, always the same
colour in every panel; values are printed on the bars. Used by report.py.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Callable

# Every system its own colour, the same in every panel; edgecount the only strong one.
COLOURS = {
    "edgecount-workerd": "#d1495b",
    "js-floor-workerd": "#8d99ae",
    "js-hello-workerd": "#b8c0cc",
    "redis-webdis": "#2b6cb0",
    "redis-webdis-aof-always": "#63a4e8",
    "redis-webdis-aof-everysec": "#9cc7f0",
    "memcached": "#2f855a",
    "ehcache": "#805ad5",
    "nginx-static": "#a0703a",
}
LABELS = {
    "edgecount-workerd": "edgecount",
    "js-floor-workerd": "JS worker + DO (floor)",
    "js-hello-workerd": "JS hello world (floor)",
    "redis-webdis": "Redis via webdis",
    "redis-webdis-aof-always": "Redis, AOF always",
    "redis-webdis-aof-everysec": "Redis, AOF everysec",
    "memcached": "memcached",
    "ehcache": "Ehcache-style Java",
    "nginx-static": "nginx, static body",
}
# The scenarios the capacity panel compares, and the peers drawn beside edgecount.
CAPACITY_SCENARIOS = ("read", "write", "mixed", "hot", "batch", "cache-100b")
PEERS = ("edgecount-workerd", "redis-webdis", "redis-webdis-aof-always", "memcached", "ehcache", "js-floor-workerd")
# The edgecount scenarios whose cost per million is drawn, in the order a reader asks about them.
COST_SCENARIOS = ("read", "write", "write-async", "page-view", "mixed", "hot", "batch", "batch-async", "cache-100b")


def colour(system: str) -> str:
    return COLOURS.get(system, "#cbd5e0")


def label(system: str) -> str:
    return LABELS.get(system, system)


def floor_pairs(summary: dict,
                floor_of: Callable[[list[dict], dict], dict | None]) -> list[tuple[str, float, float, float, str]]:
    """(path, edgecount µs/op, floor µs/op, ratio, the floor system) per path: the paired rounds'
    medians where the run had them (they alternate the two systems, so they are the fairer
    figure), else the two capacity rows of the run."""
    out = []
    for pair in summary.get("pairs", []):
        counted = [r for r in pair.get("rounds", []) if r.get("counted")]
        if counted and pair.get("median_ratio"):
            # The bars are each system's median µs; the ratio printed is the report's median
            # of the rounds' ratios (see cpu_panel).
            out.append((pair["scenario"], median(r["edgecount_us"] for r in counted),
                        median(r["floor_us"] for r in counted), pair["median_ratio"], pair["floor"]))
    if out:
        return out
    for row in summary["rows"]:
        if row["system"] != "edgecount-workerd" or row.get("bound") != "server":
            continue
        floor = floor_of(summary["rows"], row)
        if floor and floor.get("bound") == "server" and floor.get("server_cpu_us_per_op"):
            ours, theirs = row["server_cpu_us_per_op"], floor["server_cpu_us_per_op"]
            out.append((row["scenario"], ours, theirs, ours / theirs, floor["system"]))
    return out


def per_core(row: dict) -> float | None:
    """Ops a whole core serves, from a server-bound row: its ops/s when the server had its whole
    core, else (a row capped by `--cpu-quota`) what its CPU per op would allow on one."""
    if row.get("bound") != "server":
        return None
    if not row.get("cpu_quota_cores"):
        return row.get("ops_per_s")
    us = row.get("server_cpu_us_per_op")
    return 1e6 / us if us else None


def print_values(axis, bars, texts: list[str]) -> None:
    for bar, text in zip(bars, texts):
        axis.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {text}", va="center", fontsize=8)


def legend_below(axis, columns: int = 3) -> None:
    """The legend under the panel, where it covers no bar."""
    axis.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.07), ncols=columns, frameon=False)


def empty(axis, title: str, why: str) -> None:
    axis.set_title(title, loc="left", fontsize=11)
    axis.text(0.5, 0.5, why, ha="center", va="center", transform=axis.transAxes, color="#4a5568")
    axis.set_axis_off()


def cpu_panel(axis, summary: dict, floor_of) -> None:
    title = "1. CPU per op against its floor (µs, lower is better)"
    data = floor_pairs(summary, floor_of)
    if not data:
        return empty(axis, title, "no path with a floor measured in this run")
    height = 0.38
    ys = range(len(data))
    ours = axis.barh([y - height / 2 for y in ys], [d[1] for d in data], height, color=colour("edgecount-workerd"),
                     label="edgecount")
    # Each path's floor in its own system's colour: the hello world for request-only paths.
    floor_names = [d[4] for d in data]
    floors = axis.barh([y + height / 2 for y in ys], [d[2] for d in data], height,
                       color=[colour(name) for name in floor_names])
    for name in dict.fromkeys(floor_names):
        axis.barh([0], [0], color=colour(name), label=f"its floor: {label(name)}")
    print_values(axis, ours, [f"{d[1]:.0f} µs, {d[3]:.2f}x" for d in data])
    print_values(axis, floors, [f"{d[2]:.0f} µs" for d in data])
    axis.set_yticks(list(ys), [d[0] for d in data])
    axis.invert_yaxis()
    axis.set_xlim(0, max(max(d[1], d[2]) for d in data) * 1.45)
    axis.set_title(title, loc="left", fontsize=11)
    legend_below(axis)


def capacity_panel(axis, rows: list[dict]) -> None:
    title = "2. Ops per second a whole core serves (log scale, higher is better)"
    by = {(r["system"], r["scenario"]): r for r in rows}
    groups = [s for s in CAPACITY_SCENARIOS if any(per_core(by.get((p, s), {})) for p in PEERS)]
    if not groups:
        return empty(axis, title, "no server-bound row in this run")
    height = 0.8 / len(PEERS)
    drawn = set()
    values = []
    for g, scenario in enumerate(groups):
        for i, system in enumerate(PEERS):
            value = per_core(by.get((system, scenario), {}))
            if value is None:
                continue
            y = g + (i - (len(PEERS) - 1) / 2) * height
            bars = axis.barh([y], [value], height * 0.95, color=colour(system),
                             label=None if system in drawn else label(system))
            print_values(axis, bars, [f"{value:,.0f}"])
            drawn.add(system)
            values.append(value)
    axis.set_xscale("log")
    axis.set_xlim(min(values) / 2, max(values) * 6)
    axis.set_yticks(range(len(groups)), groups)
    axis.invert_yaxis()
    axis.set_title(title, loc="left", fontsize=11)
    legend_below(axis)


def cost_panel(axis, rows: list[dict], cost_of, upstash: float) -> None:
    title = "3. $ per million ops at list prices (lower is better)"
    by = {r["scenario"]: r for r in rows if r["system"] == "edgecount-workerd"}
    data = [(s, cost_of(by[s])) for s in COST_SCENARIOS if s in by and cost_of(by[s]) is not None]
    if not data:
        return empty(axis, title, "no edgecount row with counted units in this run")
    bars = axis.barh(range(len(data)), [d[1] for d in data], 0.6, color=colour("edgecount-workerd"),
                     label="edgecount on Cloudflare")
    print_values(axis, bars, [f"${d[1]:.2f}" for d in data])
    axis.axvline(upstash, color=colour("redis-webdis"), linestyle="--",
                 label=f"Upstash Redis, ${upstash:.2f} per million commands")
    axis.set_yticks(range(len(data)), [d[0] for d in data])
    axis.invert_yaxis()
    axis.set_xlim(0, max(max(d[1] for d in data), upstash) * 1.3)
    axis.set_title(title, loc="left", fontsize=11)
    legend_below(axis)


def failover_panel(axis, failover: list[dict]) -> None:
    title = "4. Killed mid-run (SIGKILL) and started again: answered ops per second"
    runs = [run for run in failover if run.get("timeline")]
    if not runs:
        return empty(axis, title, "no failover run in this run")
    for run in runs:
        seconds = [point["second"] for point in run["timeline"]]
        axis.plot(seconds, [point["ok"] for point in run["timeline"]], color=colour(run["system"]),
                  linewidth=2.2 if run["system"].startswith("edgecount") else 1.4,
                  label=f"{label(run['system'])}: away {run['longest_gap_s']:.1f} s, "
                        f"{run['lost_acknowledged']} acknowledged lost")
        axis.axvline(run["killed_at_s"], color=colour(run["system"]), linestyle=":", linewidth=1)
    axis.set_xlabel("seconds into the run (dotted: the kill)")
    axis.set_ylabel("answered ops/s")
    axis.set_title(title, loc="left", fontsize=11)
    axis.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=1, frameon=False)


def write_chart(run_dir: Path, summary: dict, floor_of, cost_of, upstash: float) -> bool:
    """Draws `run_dir/chart.png`; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(2, 2, figsize=(16, 12))
    cpu_panel(axes[0][0], summary, floor_of)
    capacity_panel(axes[0][1], summary["rows"])
    cost_panel(axes[1][0], summary["rows"], cost_of, upstash)
    failover_panel(axes[1][1], summary.get("failover", []))
    machine = summary.get("machine", {})
    figure.suptitle(f"edgecount beside its floors and peers: one machine, one run ({machine.get('date', '')}, "
                    f"profile {summary.get('profile', '')})", fontsize=13)
    figure.tight_layout()
    figure.savefig(run_dir / "chart.png", dpi=100)
    plt.close(figure)
    return True
