#!/usr/bin/env python3
"""Where a request path's CPU goes in the whole workerd process, the runtime included.

`scripts/profile.mjs` samples inside the isolate, so it cannot see what the runtime does
outside V8 (HTTP, `Headers`, jsg wrappers, SQLite, the allocator, the kernel's sockets), and
that is most of a request's cost. This samples the whole process with `perf` (the software
`cpu-clock` event, which needs no hardware counters), with V8 writing a perf map so that the
Wasm's Rust functions and the JavaScript glue have names, and workerd's own symbols read from
its binary. It starts the built worker on workerd pinned to core 1, sends a fixed rate of
requests from k6 on core 0 (not saturated: the server's CPU per request, split by where it
goes, not a capacity figure), records a bounded number of seconds, and prints the CPU per
request in each part of the process and the functions with the most samples.

Usage (after `make build`; k6 comes with `make bench` or `make test`):
  python3 scripts/profile-process.py <path> [--method M] [--rate R] [--seconds S] [--top N]
                                     [--warm-up S] [--idle S] [--cpu-quota CORES] [--body TEXT]
                                     [--preload-counters N] [--preload-entries N] [--hello | --floor]
`{i}` in the path (and in `--body`) becomes the request's number, to spread requests over keys;
`{r}` a random number below `--preload-counters` (or 1), to read random preloaded keys
(`/v1/counters/profile/k{r}`). `--preload-counters` and `--preload-entries` write that many
counters (`profile/k0`...) and 100-byte cache entries (`profile/v0`...) through the batch
route before the warm-up, as the bench preloads; `--idle` waits that long after the warm-up, so
the recording sees what a server does when load comes back to idle shards. `--hello`
profiles the bench's JavaScript hello world (loadtest/baselines/js-hello) instead, the floor of
the request-only paths, and `--floor` its JavaScript worker and Durable Objects
(loadtest/baselines/js-floor), the floor of the shard paths: profile both to see what edgecount
adds to a request.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ROOT / "loadtest" / "baselines"
sys.path.insert(0, str(ROOT / "loadtest"))
import systems  # noqa: E402  (the bench's configs of its JavaScript floors)
from cpu_quota import CpuQuota  # noqa: E402  (the bench's CPU cap)

K6 = ROOT / ".tools" / "bin" / "k6"
WORKERD = ROOT / "node_modules" / ".bin" / "workerd"
NODE = ROOT / "node_modules" / ".bin" / "node"
SAMPLE_HZ = 1999

# The parts of the process, first match wins: (label, pattern on perf's symbol column).
PARTS = [
    ("edgecount Wasm (Rust)", r"\[\.\] JS:(?!.*\.js:)(?!wasm-to-js|js-to-wasm)"),
    ("Wasm/JS call stubs", r"Stub:|JS:wasm-to-js|JS:js-to-wasm|Builtins_Wasm|Builtins_JSToWasm"),
    ("JavaScript (glue, or the hello world)", r"\[\.\] JS:"),
    ("V8 (builtins, heap, compiler)", r"Builtins_|v8::|\[\.\] v8|cppgc|_ZN2v8"),
    ("SQLite", r"sqlite3|json[A-Z]"),
    ("allocator", r"tcmalloc|TCMalloc"),
    ("runtime API (workerd::api, jsg)", r"workerd::api|workerd::jsg|jsg::"),
    ("runtime HTTP and I/O (kj, hyper, tokio)", r"kj::|kj_|hyper|tokio|futures_|http::|httparse|mio::|bytes::"),
    ("runtime other (workerd)", r"workerd"),
    ("kernel", r"\[k\]"),
    ("libc", r"libc|GLIBC|__GI_|__mem|__str|epoll|clock_gettime"),
]

K6_SCRIPT = """import http from "k6/http";
import exec from "k6/execution";
export const options = {
  scenarios: { fixed: { executor: "constant-arrival-rate", rate: Number(__ENV.RATE),
    timeUnit: "1s", duration: __ENV.DURATION, preAllocatedVUs: 50, maxVUs: 400 } },
  summaryTrendStats: ["med", "p(99)"],
};
export default function () {
  const i = String(exec.scenario.iterationInTest);
  const r = String(Math.floor(Math.random() * Number(__ENV.KEYS)));
  const fill = (template) => template.replaceAll("{i}", i).replaceAll("{r}", r);
  const body = __ENV.BODY_TEMPLATE ? fill(__ENV.BODY_TEMPLATE) : null;
  http.request(__ENV.METHOD, `${__ENV.BASE}${fill(__ENV.PATH_TEMPLATE)}`, body);
}
"""


def need(path: Path, what: str, how: str) -> None:
    if not path.exists():
        sys.exit(f"profile-process: {what} is missing ({path.relative_to(ROOT)}); {how}")


def free_port() -> int:
    """A port the kernel has just handed out as free (the test suite runs servers of its own)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


PORT = free_port()


def write_config(work: Path, floor: str | None) -> Path:
    """The config of the bench's JavaScript floor `floor` (js-hello, js-floor), or else edgecount's."""
    if floor:
        return systems.write_js_worker_config(work, floor, BASELINES / floor / "worker.js", PORT,
                                              sql_objects="FloorShard" if floor == "js-floor" else None,
                                              v8_flags=("--perf-basic-prof",))
    config = work / "config.capnp"
    (work / "state").mkdir()
    env = {**os.environ, "WORKERD_V8_FLAGS": "--perf-basic-prof"}
    subprocess.run([str(NODE), "scripts/workerd-config.mjs", str(PORT), str(work / "state"), str(config)],
                   cwd=ROOT, env=env, check=True)
    return config


def k6(work: Path, args: argparse.Namespace, seconds: int) -> subprocess.Popen:
    script = work / "fixed-rate.js"
    script.write_text(K6_SCRIPT)
    env = {"RATE": str(args.rate), "DURATION": f"{seconds}s", "PATH_TEMPLATE": args.path,
           "METHOD": args.method, "BASE": f"http://127.0.0.1:{PORT}", "BODY_TEMPLATE": args.body or "",
           "KEYS": str(max(1, args.preload_counters))}
    command = ["taskset", "-c", "0", str(K6), "run", "--quiet", "--no-usage-report"]
    for name, value in env.items():
        command += ["-e", f"{name}={value}"]
    return subprocess.Popen([*command, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def preload(counters: int, entries: int) -> None:
    """Writes `counters` counters and `entries` 100-byte cache entries in namespace `profile`
    through the batch route, four batches at a time, as the bench's preload does."""
    def send(ops: list[dict]) -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{PORT}/v1/batch", method="POST",
                                         data=json.dumps({"ops": ops}).encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            answer.read()

    def counter_batch(start: int) -> None:
        send([{"op": "set", "ns": "profile", "key": f"k{n}", "value": n} for n in range(start, min(start + 1000, counters))])

    def entry_batch(start: int) -> None:
        send([{"op": "cache_put", "ns": "profile", "key": f"v{n}", "value": "v" * 100}
              for n in range(start, min(start + 200, entries))])

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(counter_batch, range(0, counters, 1000)))
        list(pool.map(entry_batch, range(0, entries, 200)))
    print(f"preloaded {counters:,} counters and {entries:,} cache entries in {time.monotonic() - started:.0f} s")


def requests_sent(k6_output: str) -> int:
    match = re.search(r"http_reqs\.*:\s*(\d+)", k6_output)
    return int(match.group(1)) if match else 0


def samples_by_symbol(data: Path) -> collections.Counter:
    report = subprocess.run(["perf", "report", "-i", str(data), "-n", "--no-children", "--sort", "sym", "--stdio",
                             "-g", "none"], capture_output=True, text=True, check=True).stdout
    counts: collections.Counter = collections.Counter()
    for line in report.splitlines():
        fields = line.split(None, 2)
        if len(fields) == 3 and fields[0].endswith("%") and fields[1].isdigit():
            # A function's tier and number vary from run to run; its name does not.
            name = re.sub(r"-\d+-(turbofan|liftoff|maglev|sparkplug)$", "", fields[2].strip())
            counts[name] += int(fields[1])
    return counts


def part_of(symbol: str) -> str:
    return next((label for label, pattern in PARTS if re.search(pattern, symbol)), "other")


def report(counts: collections.Counter, requests: int, seconds: float, top: int) -> None:
    per_sample_us = 1e6 / SAMPLE_HZ
    total = sum(counts.values())
    per_request = lambda samples: samples * per_sample_us / requests  # noqa: E731
    print(f"\n{requests} requests in {seconds:.0f} s, {total} samples: "
          f"{per_request(total):.0f} µs of CPU per request in the whole process")
    parts: collections.Counter = collections.Counter()
    for symbol, samples in counts.items():
        parts[part_of(symbol)] += samples
    print("\nby part (µs per request, share)")
    for label, samples in parts.most_common():
        print(f"{per_request(samples):8.1f}  {100 * samples / total:5.1f}%  {label}")
    print(f"\nfunctions (µs per request, part)")
    for symbol, samples in counts.most_common(top):
        print(f"{per_request(samples):8.1f}  {symbol[:110]}  [{part_of(symbol)}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path")
    parser.add_argument("--method", default="GET")
    parser.add_argument("--body", help="the request body; `{i}` in it becomes the request's number too")
    parser.add_argument("--rate", type=int, default=700, help="requests per second (default 700)")
    parser.add_argument("--seconds", type=int, default=10, help="seconds recorded, at most 60 (default 10)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--warm-up", type=int, default=5, help="seconds of load before recording (default 5)")
    parser.add_argument("--idle", type=int, default=0, help="seconds without load between the warm-up and the recording")
    parser.add_argument("--preload-counters", type=int, default=0, help="counters written before the warm-up")
    parser.add_argument("--preload-entries", type=int, default=0, help="cache entries written before the warm-up")
    parser.add_argument("--cpu-quota", type=float,
                        help="cap the server at this share of a core, as the bench's capacity holds do")
    floors = parser.add_mutually_exclusive_group()
    floors.add_argument("--hello", action="store_const", const="js-hello", dest="floor",
                        help="profile the JavaScript hello world instead (the floor of request-only paths)")
    floors.add_argument("--floor", action="store_const", const="js-floor", dest="floor",
                        help="profile the JavaScript worker and Durable Objects instead (the floor of shard paths)")
    args = parser.parse_args()
    args.seconds = max(1, min(args.seconds, 60))
    if not shutil.which("perf"):
        sys.exit("profile-process: perf is not installed (Debian: linux-perf)")
    for path, what in ((WORKERD, "workerd"), (K6, "k6"), (NODE, "node")):
        need(path, what, "run `make test` or `make bench` once")
    if not args.floor:
        need(ROOT / "build" / "index_bg.wasm", "the built worker", "run `make build` first")
    work = Path(tempfile.mkdtemp(prefix="edgecount-profile-process-"))
    server = quota = None
    try:
        config = write_config(work, args.floor)
        # In the scratch folder: with a perf map, V8 also writes a log of its own where it runs.
        server = subprocess.Popen(["taskset", "-c", "1", str(WORKERD), "serve", str(config)], cwd=work,
                                  stdout=subprocess.DEVNULL, stderr=(work / "workerd.log").open("w"))
        # Each of the three answers /v1/health (the hello world answers any path).
        systems.wait_until_up(f"http://127.0.0.1:{PORT}/v1/health", seconds=30)
        if args.cpu_quota:
            quota = CpuQuota.create("profile-process")
            if quota is None:
                sys.exit("profile-process: no cgroup can be written here, so no CPU quota")
            quota.add(server.pid)
            quota.cap(args.cpu_quota)
        if args.preload_counters or args.preload_entries:
            if args.floor == "js-hello":
                sys.exit("profile-process: the hello world stores nothing to preload")
            preload(args.preload_counters, args.preload_entries)
        print(f"warming up for {args.warm_up} s, then recording {args.seconds} s at {args.rate} requests/s")
        if args.warm_up > 0:
            k6(work, args, args.warm_up).wait()
        if args.idle > 0:
            print(f"idle for {args.idle} s")
            time.sleep(args.idle)
        # k6 runs a second longer on each side, so the recording sees only the steady rate.
        load = k6(work, args, args.seconds + 2)
        time.sleep(1)
        data = work / "perf.data"
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(SAMPLE_HZ), "-p", str(server.pid),
                        "-o", str(data), "--", "sleep", str(args.seconds)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        output, _ = load.communicate()
        sent = requests_sent(output)
        if sent == 0:
            sys.exit(f"profile-process: k6 sent nothing:\n{output[-2000:]}")
        # Requests within the recorded seconds: k6's run spans them and a second on each side,
        # at a steady rate (the rate asked for, or less where k6 or the server fell behind).
        recorded = round(sent * args.seconds / (args.seconds + 2))
        if recorded < 0.95 * args.rate * args.seconds:
            print(f"k6 sent {sent} requests in {args.seconds + 2} s, fewer than {args.rate}/s: "
                  "the figures below are per request sent")
        report(samples_by_symbol(data), recorded, args.seconds, args.top)
    finally:
        if server:
            # workerd does not always end on SIGTERM.
            server.terminate()
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            # V8's perf maps name the process that wrote them; of no use once it is gone.
            Path(f"/tmp/perf-{server.pid}.map").unlink(missing_ok=True)
        if quota:
            quota.remove()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
