"""edgecount's unique-visitor sketch beside Redis's HyperLogLog on the same visitor stream.

For 100, 10,000 and 1,000,000 distinct visitors (`visitor-0`, `visitor-1`, ...): Redis's
`PFADD` into one key and `PFCOUNT` (its bytes from `STRLEN`: sparse while small, 12 KB dense),
and edgecount's sketch (core/examples/sketch_error.rs: the same names hashed as the worker and a
shard hash a visitor). Writes sketch.json and prints a table; run by `make bench` (bench.py) or
alone.

Usage: python3 sketch_vs_redis.py <out-dir>
"""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (100, 10_000, 1_000_000)
# Elements per PFADD command, sent through `redis-cli --pipe`.
PER_COMMAND = 1_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def redis(port: int, *args: str) -> str:
    return subprocess.run(["redis-cli", "-p", str(port), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def redis_rows(port: int) -> list[dict]:
    rows = []
    for n in SIZES:
        key = f"visitors-{n}"
        commands = []
        for start in range(0, n, PER_COMMAND):
            names = " ".join(f"visitor-{i}" for i in range(start, min(n, start + PER_COMMAND)))
            commands.append(f"PFADD {key} {names}\r\n")
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input="".join(commands), check=True,
                       capture_output=True, text=True)
        estimate = int(redis(port, "PFCOUNT", key))
        rows.append({"system": "redis", "visitors": n, "estimate": estimate,
                     "error": round((estimate - n) / n, 6), "bytes": int(redis(port, "STRLEN", key))})
    return rows


def edgecount_rows() -> list[dict]:
    run = subprocess.run(["cargo", "run", "--quiet", "--release", "-p", "edgecount-core", "--example",
                          "sketch_error", "--", *map(str, SIZES)], cwd=ROOT, check=True, capture_output=True,
                         text=True)
    return [{"system": "edgecount", **json.loads(line)} for line in run.stdout.splitlines() if line.strip()]


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                redis(port, "PING")
                break
            except subprocess.CalledProcessError:
                time.sleep(0.05)
        rows = redis_rows(port) + edgecount_rows()
    finally:
        server.terminate()
        server.wait()
    (out / "sketch.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"{'visitors':>10} {'system':>10} {'estimate':>10} {'error':>9} {'bytes':>7}")
    for row in sorted(rows, key=lambda r: (r["visitors"], r["system"])):
        print(f"{row['visitors']:>10,} {row['system']:>10} {row['estimate']:>10,} {row['error']:>+9.4%} "
              f"{row['bytes']:>7,}")


if __name__ == "__main__":
    main()
