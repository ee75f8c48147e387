"""Paired holds: edgecount and the floor of each path, measured in alternation.

One capacity hold per system and scenario compares two figures taken minutes apart, and on a
shared 2-core machine the same server's CPU per op drifts by tens of percent between runs (the
floors moved by up to 42% between two runs of the same code). A ratio near a target cannot be
settled that way. Here both systems run side by side, and for each scenario they take turns:
edgecount, floor, floor, edgecount, ... (who goes first alternates, so a drift over the round
falls on both), each turn a capacity hold like the main run's (wrk, the server on its whole core). Each round gives one ratio of CPU
per op; the row quotes the median ratio and the spread of the rounds, so a reader sees whether
a target is met in every round or only in some.

Every turn starts with the same short warm-up of the system about to be held. Without it, the
system held second in a round had sat idle through the other's hold (and, every other round,
through two): the runtime then evicts its idle Durable Objects, and the next hold pays for
their restart and their SQLite pages read again, a fixed cost of about half a CPU second for
either system (2026-11-25, 16 shards, a million counters), which a hold of 10 s at 0.15 of a
core (as holds were then) had 1.5 s of CPU to absorb. The rounds then measured which system had idled, not what an op costs. That cost
is measured on its own, the same for both: after the rounds, each system is warmed, left idle
for `COLD_IDLE_S`, and held once (the `cold` figures).

The floors: a JavaScript hello world for the request-only paths (health, hot reads), a
JavaScript worker calling a JavaScript Durable Object with the same SQL for the shard paths.
"""

from __future__ import annotations

from statistics import median
from time import sleep
from typing import Callable

from systems import System

EDGECOUNT = "edgecount-workerd"
# Each path and the floor it is judged against.
FLOOR_OF = {
    "health": "js-hello-workerd",
    "hot": "js-hello-workerd",
    "read": "js-floor-workerd",
    "write": "js-floor-workerd",
    "mixed": "js-floor-workerd",
    "batch": "js-floor-workerd",
}

# A hold: (system, scenario, round) -> the row of a capped hold (see bench.capacity_hold).
Hold = Callable[[System, str, int], dict]
# How long a system sits idle before its cold hold: past the runtime's eviction of idle
# Durable Objects (about 10 s).
COLD_IDLE_S = 15


def paired_rows(edgecount: System, floors: dict[str, System], scenarios: list[str], rounds: int,
                warm: Callable[[System, str], None], hold: Hold,
                say: Callable[[str], None], cold_idle_s: int = COLD_IDLE_S) -> list[dict]:
    """One row per scenario: each round's CPU per op of both systems, their ratios, the median
    ratio and its spread. Rounds in which either server was not the bottleneck are kept but
    left out of the median, as capacity rows are."""
    rows = []
    for scenario in scenarios:
        floor = floors[FLOOR_OF[scenario]]
        for system in (edgecount, floor):
            warm(system, scenario)
        rounds_seen = []
        for turn in range(rounds):
            order = (edgecount, floor) if turn % 2 == 0 else (floor, edgecount)
            held = {}
            for system in order:
                warm(system, scenario)
                held[system.name] = hold(system, scenario, turn)
            ours, theirs = held[edgecount.name], held[floor.name]
            both_bound = ours["bound"] == "server" and theirs["bound"] == "server"
            ratio = (ours["server_cpu_us_per_op"] / theirs["server_cpu_us_per_op"]
                     if ours["server_cpu_us_per_op"] and theirs["server_cpu_us_per_op"] else None)
            rounds_seen.append({
                "edgecount_us": ours["server_cpu_us_per_op"], "floor_us": theirs["server_cpu_us_per_op"],
                "edgecount_busy": ours["server_busy"], "floor_busy": theirs["server_busy"],
                "ratio": round(ratio, 3) if ratio else None, "counted": both_bound and ratio is not None,
            })
            say(f"  pair {scenario} round {turn + 1}: edgecount {ours['server_cpu_us_per_op']} us/op, "
                f"{floor.name} {theirs['server_cpu_us_per_op']} us/op"
                + (f", ratio {ratio:.2f}" if ratio else "") + ("" if both_bound else " (not server-bound)"))
        counted = [r["ratio"] for r in rounds_seen if r["counted"]]
        cold = {}
        for system in (edgecount, floor) if cold_idle_s else ():
            warm(system, scenario)
            sleep(cold_idle_s)
            cold[system.name] = hold(system, scenario, rounds)["server_cpu_us_per_op"]
        if cold:
            say(f"  pair {scenario} after {cold_idle_s} s idle: edgecount {cold[edgecount.name]} us/op, "
                f"{floor.name} {cold[floor.name]} us/op")
        rows.append({
            "scenario": scenario, "floor": floor.name, "rounds": rounds_seen,
            "cold_edgecount_us": cold.get(edgecount.name), "cold_floor_us": cold.get(floor.name),
            "median_ratio": round(median(counted), 3) if counted else None,
            "min_ratio": min(counted) if counted else None,
            "max_ratio": max(counted) if counted else None,
            "counted_rounds": len(counted),
        })
    return rows


def report_lines(pairs: list[dict]) -> list[str]:
    """The report's section on the paired holds."""
    if not pairs:
        return []
    lines = [
        "## edgecount against its floors, in alternating holds",
        "",
        "Each round holds edgecount and the path's floor one after the other, each on the servers' whole core "
        "(who goes first alternates), each hold right after a short warm-up of its own; a ratio is "
        "edgecount's CPU per op over the floor's in the same round. Only rounds in which both servers "
        f"were the bottleneck count. `after {COLD_IDLE_S} s idle`: one hold of each, warmed and then left "
        "idle that long, so that the runtime has evicted its Durable Objects.",
        "",
        "| path | floor | rounds counted | median ratio | spread | CPU µs/op per round (edgecount / floor) "
        f"| after {COLD_IDLE_S} s idle (edgecount / floor) |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for pair in pairs:
        spread = (f"{pair['min_ratio']:.2f}-{pair['max_ratio']:.2f}" if pair["median_ratio"] is not None else "-")
        median_ratio = f"{pair['median_ratio']:.2f}x" if pair["median_ratio"] is not None else "-"
        per_round = ", ".join(f"{r['edgecount_us']} / {r['floor_us']}" + ("" if r["counted"] else " (not counted)")
                              for r in pair["rounds"])
        cold = (f"{pair['cold_edgecount_us']} / {pair['cold_floor_us']}"
                if pair.get("cold_edgecount_us") and pair.get("cold_floor_us") else "-")
        lines.append(f"| {pair['scenario']} | {pair['floor']} | {pair['counted_rounds']} of {len(pair['rounds'])} "
                     f"| {median_ratio} | {spread} | {per_round} | {cold} |")
    return lines + [""]
