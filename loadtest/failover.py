"""The failover run: a mixed load on one system, its server killed with SIGKILL partway and
started again over its own state, as Azure's Redis guidance tests "under failover".

What it reports per system: answered ops in each second of the run (the timeline), errors, the
longest gap without one answer, how long after the kill the load was back to 90% of its rate
before, and the counters checked against Jepsen's counter bounds afterwards: each key's final
value must be at least its acknowledged increments and at most its attempted ones. A final value
under the acknowledged increments is acknowledged writes lost (Redis with `appendfsync
everysec` may lose up to a second of them; edgecount and `always` must lose none).

The load runs in this process on core 0 (bench.py pins it), from CLIENTS threads with kept-alive
connections, each 80% reads and 20% increments over KEYS keys; a thread whose connection fails
waits a little before trying again, so a dead server does not spin the client's core.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from systems import System, http_json

CLIENTS = 16
KEYS = 64
NS = "failover"
# After a failed connection a client waits this long before it tries again.
RETRY_PAUSE_S = 0.05
# Back to steady: the first second after the kill that answers this share of the rate before it.
STEADY_SHARE = 0.9


@dataclass
class Spelling:
    """How a system spells a read and an increment, and reads the number in each answer (None
    when the answer holds none: webdis wraps a Redis error, `LOADING` while the append-only file
    replays, in a 200)."""

    read: Callable[[int], str]
    incr: Callable[[int], tuple[str, str]]
    value: Callable[[str], int | None]
    read_value: Callable[[str], int | None]
    # The read that checks the counts afterwards: the shard's own value, never a kept one.
    final_read: Callable[[int], str]


def v1_value(body: str) -> int | None:
    try:
        return int(json.loads(body)["value"])
    except (ValueError, KeyError, TypeError):
        return None


def webdis_value(body: str, command: str) -> int | None:
    try:
        answer = json.loads(body)[command]
        return int(answer) if answer is not None else 0
    except (ValueError, KeyError, TypeError):
        return None


SPELLINGS = {
    "v1": Spelling(read=lambda k: f"/v1/counters/{NS}/k{k}",
                   incr=lambda k: ("POST", f"/v1/counters/{NS}/k{k}/incr"), value=v1_value, read_value=v1_value,
                   final_read=lambda k: f"/v1/counters/{NS}/k{k}?consistency=strong"),
    "webdis": Spelling(read=lambda k: f"/GET/{NS}:k{k}",
                       incr=lambda k: ("GET", f"/INCR/{NS}:k{k}"), value=lambda b: webdis_value(b, "INCR"),
                       read_value=lambda b: webdis_value(b, "GET"), final_read=lambda k: f"/GET/{NS}:k{k}"),
}


@dataclass
class Tally:
    """What the clients saw, shared between their threads under one lock."""

    started: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    ok: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    attempted: Counter = field(default_factory=Counter)
    acknowledged: Counter = field(default_factory=Counter)
    last_answer: float = 0.0
    longest_gap: float = 0.0

    def answered(self, now: float) -> None:
        with self.lock:
            self.ok[int(now - self.started)] += 1
            if self.last_answer:
                self.longest_gap = max(self.longest_gap, now - self.last_answer)
            self.last_answer = now

    def failed(self, now: float) -> None:
        with self.lock:
            self.errors[int(now - self.started)] += 1


def client(base_url: str, spelling: Spelling, tally: Tally, stop: threading.Event, seed: int) -> None:
    address = urllib.parse.urlsplit(base_url)
    connection = None
    turn = seed
    while not stop.is_set():
        turn += 1
        key = (turn * 2654435761) % KEYS
        is_incr = turn % 5 == 0
        method, path = spelling.incr(key) if is_incr else ("GET", spelling.read(key))
        if is_incr:
            with tally.lock:
                tally.attempted[key] += 1
        try:
            if connection is None:
                connection = http.client.HTTPConnection(address.hostname, address.port, timeout=5)
            connection.request(method, path)
            response = connection.getresponse()
            body = response.read().decode(errors="replace")
        except (OSError, http.client.HTTPException):
            if connection is not None:
                connection.close()
            connection = None
            tally.failed(time.monotonic())
            time.sleep(RETRY_PAUSE_S)
            continue
        now = time.monotonic()
        number = (spelling.value if is_incr else spelling.read_value)(body)
        if 200 <= response.status < 300 and number is not None:
            tally.answered(now)
            if is_incr:
                with tally.lock:
                    tally.acknowledged[key] += 1
        else:
            tally.failed(now)
    if connection is not None:
        connection.close()


def kill(system: System) -> None:
    """SIGKILL to every process of the system, as a crash would end them."""
    for process in system.processes:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    system.processes.clear()


def final_values(system: System, spelling: Spelling) -> dict[int, int]:
    """Each key's value once the load has stopped, read from where it is kept."""
    out = {}
    for key in range(KEYS):
        answer = http_json("GET", system.base_url + spelling.final_read(key), timeout=30)
        value = spelling.read_value(json.dumps(answer))
        if value is None:
            raise RuntimeError(f"{system.name} answered the final read of k{key} with {answer!r}")
        out[key] = value
    return out


def run(system: System, spelling_name: str, run_dir: Path, seconds: int, kill_at: int,
        say: Callable[[str], None]) -> dict:
    """One failover run of `system`, already started and empty of the failover keys."""
    spelling = SPELLINGS[spelling_name]
    tally = Tally(started=time.monotonic())
    stop = threading.Event()
    threads = [threading.Thread(target=client, args=(system.base_url, spelling, tally, stop, i * 7919), daemon=True)
               for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(kill_at)
        killed_at = time.monotonic() - tally.started
        kill(system)
        say(f"  {system.name}: killed at {killed_at:.1f} s; starting it again")
        system.start(run_dir)
        ready_at = time.monotonic() - tally.started
        time.sleep(max(0.0, seconds - (time.monotonic() - tally.started)))
    finally:
        # Whatever went wrong, no client goes on sending to the port the next system takes.
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
    stopped = time.monotonic()
    with tally.lock:
        # An outage that lasts to the end of the run is a gap too.
        tally.longest_gap = max(tally.longest_gap, stopped - (tally.last_answer or tally.started))
    finals = final_values(system, spelling)
    return summarize(system, tally, finals, seconds, killed_at, ready_at)


def summarize(system: System, tally: Tally, finals: dict[int, int], seconds: int, killed_at: float,
              ready_at: float) -> dict:
    timeline = [{"second": s, "ok": tally.ok.get(s, 0), "errors": tally.errors.get(s, 0)} for s in range(seconds)]
    before = sorted(p["ok"] for p in timeline[1:int(killed_at)]) or [0]
    steady = before[len(before) // 2]
    # From the second the kill fell in: the trough is in it when the server is back within it.
    after = [p for p in timeline if p["second"] >= int(killed_at)]
    # Back to steady: the first whole second after the kill's that answered STEADY_SHARE of the
    # rate before, and whose next second did too (1 s resolution).
    good = [p["second"] for p in after if steady and p["ok"] >= STEADY_SHARE * steady and p["second"] > killed_at]
    back = next((s for s in good if s + 1 in good or s + 1 >= seconds), None)
    lost = sum(max(0, tally.acknowledged[k] - finals[k]) for k in finals)
    outside = [k for k in finals if not tally.acknowledged[k] <= finals[k] <= tally.attempted[k]]
    return {
        "system": system.name,
        "persistence": system.persistence,
        "seconds": seconds,
        "keys": KEYS,
        "killed_at_s": round(killed_at, 2),
        "ready_at_s": round(ready_at, 2),
        "steady_ops_per_s": steady,
        "dip_ops_per_s": min((p["ok"] for p in after), default=0),
        "back_to_steady_s": round(back + 1 - killed_at, 2) if back is not None else None,
        "longest_gap_s": round(tally.longest_gap, 3),
        "errors": sum(tally.errors.values()),
        "attempted_increments": sum(tally.attempted.values()),
        "acknowledged_increments": sum(tally.acknowledged.values()),
        "counted": sum(finals.values()),
        "lost_acknowledged": lost,
        "keys_outside_bounds": len(outside),
        "timeline": timeline,
    }
