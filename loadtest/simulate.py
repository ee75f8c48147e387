#!/usr/bin/env python3
"""One page at 1,000 to 1,000,000 views a second: what each object takes, how late a count is,
what a crash loses and what a million views cost, for three designs. An analytic model: every
figure below is a formula of the inputs, written out, so that anyone can check it by hand.

Designs:
- `direct`: isolates flush their one-way sums straight to the page's shard (`EDGECOUNT_RELAYS`
  0, the default).
- `relays`: isolates flush to one of the shard's R relays, which merge and forward once per
  relay window (`EDGECOUNT_RELAYS` R); R is the fewest that keep every relay at or under the
  per-object limit and its memory bound.
- `sharded`: Firestore-style distributed counters: the page's counter is split over N objects,
  each view writes one of them at random and is acknowledged once durable; a read sums N.

Assumptions (the inputs below, each with where it comes from):
- Isolates: a view is served by an isolate near its visitor; a page this popular is served in
  every location (Cloudflare names about 330 cities), and an isolate serves at most
  ISOLATE_VIEWS_PER_S views a second of it. So isolates = max(views / ISOLATE_VIEWS_PER_S,
  min(LOCATIONS, views / 10)).
- An isolate flushes a shard once per isolate window, or sooner once FLUSH_OPS ops wait.
- Per-object limit: OBJECT_LIMIT_PER_S calls a second ("Rules of Durable Objects": about 1,000
  a second for simple requests, 200-500 when requests write to storage); past it an object
  queues, then refuses.
- Rows: a flush writes the page's counter row, its visitors' row and the receipt's row
  (ROWS_PER_FLUSH, as counted by `/v1/stats` in the page-view bench: the counter, the day's
  sketch and one record a flush). A sharded-counter view writes its sub-counter and its
  visitors' rows, without a receipt (ROWS_PER_SHARDED_VIEW).
- CPU: the page-view bench's server CPU per view (CPU_US_PER_VIEW: loadtest/windows.py,
  2026-11-29, the worker, relays and shards together on one core), billed at the Workers CPU
  rate.
- Prices: loadtest/prices.json (Cloudflare's list prices).
- Memory: a relay holds each visitor of its window once, VISITOR_BYTES each, within
  RELAY_BYTES (`EDGECOUNT_RELAY_BYTES`); distinct visitors are taken as a share
  DISTINCT_SHARE of views.
- A crash of an isolate loses what it accepted in its window; of a relay, what it took in its
  window (one of R). Visible: the isolate window, plus the relay window, plus a second for the
  calls.

Usage: simulate.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from report import cost_per_million

RATES = (1_000, 10_000, 100_000, 1_000_000)
ISOLATE_VIEWS_PER_S = 1_000
LOCATIONS = 330
ISOLATE_WINDOW_S = 1.0
RELAY_WINDOW_S = 3.0
FLUSH_OPS = 1_000
OBJECT_LIMIT_PER_S = 500
ROWS_PER_FLUSH = 3
ROWS_PER_SHARDED_VIEW = 2
CPU_US_PER_VIEW = 98.0
VISITOR_BYTES = 16
RELAY_BYTES = 16 * 1024 * 1024
DISTINCT_SHARE = 0.5
CALL_S = 1.0



def isolates_for(views: float) -> int:
    return math.ceil(max(views / ISOLATE_VIEWS_PER_S, min(LOCATIONS, views / 10)))


def isolate_flushes_per_s(views: float, isolates: int) -> float:
    """Flushes a second from all isolates: each flushes once a window, or every FLUSH_OPS ops."""
    per_isolate = views / isolates
    return isolates * max(1 / ISOLATE_WINDOW_S, per_isolate / FLUSH_OPS) if per_isolate else 0.0


def dollars(views: float, object_calls: float, rows: float) -> float:
    """$ a million views: the worker request, the object calls and rows written a view, CPU."""
    return cost_per_million({"worker_requests_per_op": 1.0, "shard_calls_per_op": object_calls / views,
                             "rows_read_per_op": 0.0, "rows_written_per_op": rows / views,
                             "server_cpu_us_per_op": CPU_US_PER_VIEW}) or 0.0


def direct(views: float) -> dict:
    isolates = isolates_for(views)
    shard_calls = isolate_flushes_per_s(views, isolates)
    return {
        "design": "direct",
        "isolates": isolates,
        "objects": 1,
        "busiest_object_calls_per_s": round(shard_calls, 1),
        "within_limit": shard_calls <= OBJECT_LIMIT_PER_S,
        "visible_within_s": ISOLATE_WINDOW_S + CALL_S,
        "crash_loses": f"an isolate's window: {views / isolates * ISOLATE_WINDOW_S:,.0f} views",
        "rows_written_per_view": round(shard_calls * ROWS_PER_FLUSH / views, 5),
        "dollars_per_million_views": round(dollars(views, shard_calls, shard_calls * ROWS_PER_FLUSH), 4),
    }


def relays(views: float) -> dict:
    isolates = isolates_for(views)
    flushes = isolate_flushes_per_s(views, isolates)
    held_bytes = views * DISTINCT_SHARE * RELAY_WINDOW_S * VISITOR_BYTES
    count = max(1, math.ceil(flushes / OBJECT_LIMIT_PER_S), math.ceil(held_bytes / RELAY_BYTES))
    relay_calls = flushes / count
    # Each relay forwards once a window (a page is one key: one call).
    shard_calls = count / RELAY_WINDOW_S
    return {
        "design": "relays",
        "isolates": isolates,
        "relays": count,
        "objects": count + 1,
        "busiest_object_calls_per_s": round(max(relay_calls, shard_calls), 1),
        "relay_calls_per_s": round(relay_calls, 1),
        "shard_calls_per_s": round(shard_calls, 2),
        "within_limit": max(relay_calls, shard_calls) <= OBJECT_LIMIT_PER_S,
        "relay_memory_mb": round(held_bytes / count / 1e6, 1),
        "visible_within_s": ISOLATE_WINDOW_S + RELAY_WINDOW_S + CALL_S,
        "crash_loses": (f"an isolate's window ({views / isolates * ISOLATE_WINDOW_S:,.0f} views), or a relay's "
                        f"({views / count * RELAY_WINDOW_S:,.0f} views)"),
        "rows_written_per_view": round(shard_calls * ROWS_PER_FLUSH / views, 7),
        "dollars_per_million_views": round(dollars(views, flushes + shard_calls, shard_calls * ROWS_PER_FLUSH), 4),
    }


def sharded(views: float) -> dict:
    count = max(1, math.ceil(views / OBJECT_LIMIT_PER_S))
    return {
        "design": "sharded",
        "isolates": isolates_for(views),
        "objects": count,
        "busiest_object_calls_per_s": round(views / count, 1),
        "within_limit": views / count <= OBJECT_LIMIT_PER_S,
        "visible_within_s": CALL_S,
        "crash_loses": "nothing acknowledged (each view waits for its write)",
        "rows_written_per_view": ROWS_PER_SHARDED_VIEW,
        "dollars_per_million_views": round(dollars(views, views, views * ROWS_PER_SHARDED_VIEW), 4),
    }


def chart(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (calls, cost) = plt.subplots(1, 2, figsize=(11, 4.2))
    for design, style in (("direct", "o-"), ("relays", "s-"), ("sharded", "^-")):
        mine = [r for r in rows if r["design"] == design]
        xs = [r["views_per_s"] for r in mine]
        calls.plot(xs, [r["busiest_object_calls_per_s"] for r in mine], style, label=design)
        cost.plot(xs, [r["dollars_per_million_views"] for r in mine], style, label=design)
    calls.axhline(OBJECT_LIMIT_PER_S, color="grey", linestyle="--", label="per-object limit")
    calls.set(xscale="log", yscale="log", xlabel="views a second of one page",
              ylabel="calls a second at the busiest object", title="Busiest object")
    cost.axhline(0.35, color="grey", linestyle="--", label="$0.35 target")
    cost.set(xscale="log", xlabel="views a second of one page", ylabel="$ a million views", title="Cost")
    for axes in (calls, cost):
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def table(rows: list[dict]) -> str:
    lines = ["| views/s | design | isolates | objects | busiest object calls/s | visible within | "
             "rows written a view | $ a million views | a crash loses |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['views_per_s']:,} | {r['design']} | {r['isolates']:,} | {r['objects']:,} | "
                     f"{r['busiest_object_calls_per_s']:,}{'' if r['within_limit'] else ' (over)'} | "
                     f"{r['visible_within_s']:g} s | {r['rows_written_per_view']:g} | "
                     f"${r['dollars_per_million_views']:.3f} | {r['crash_loses']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "build" / "simulation"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [{"views_per_s": v, **design(v)} for v in RATES for design in (direct, relays, sharded)]
    inputs = {name: value for name, value in globals().items() if name.isupper()}
    (out / "simulation.json").write_text(json.dumps({"inputs": inputs, "rows": rows}, indent=2) + "\n")
    (out / "simulation.md").write_text(table(rows))
    chart(rows, out / "simulation.png")
    top = next(r for r in rows if r["design"] == "relays" and r["views_per_s"] == RATES[-1])
    ok = top["within_limit"] and top["visible_within_s"] <= 5 and top["dollars_per_million_views"] <= 0.35
    print(table(rows))
    print(f"relays at {RATES[-1]:,} views/s: busiest object {top['busiest_object_calls_per_s']} calls/s, "
          f"visible within {top['visible_within_s']} s, ${top['dollars_per_million_views']} a million: "
          f"{'meets' if ok else 'misses'} the target")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
