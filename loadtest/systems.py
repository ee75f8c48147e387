"""The systems the benchmark measures: how to start, preload, watch and stop each one.

Every server runs on loopback, pinned to core 1 (k6 gets core 0), in a cgroup of its own whose
CPU quota capacity runs set (`cpu_quota.py`), with its output in the run's folder. CPU time is
read from /proc for the server's whole process tree.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cpu_quota import CpuQuota

ROOT = Path(__file__).resolve().parent.parent
LOADTEST = ROOT / "loadtest"
NODE_BIN = ROOT / "node_modules" / ".bin"
SERVER_CORE = "1"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
NS = "bench"


def nginx_command(prefix: Path, config: Path) -> list[str]:
    """nginx with its workers running as the invoking user: run as root, nginx would switch them to
    www-data, which cannot write request bodies or cache files under a private run folder."""
    return ["nginx", "-p", str(prefix), "-c", str(config), "-g", f"user {getpass.getuser()};"]


def pinned(command: list[str]) -> list[str]:
    return ["taskset", "-c", SERVER_CORE, *command]


def http_json(method: str, url: str, body: object | None = None, timeout: float = 30.0) -> object:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        text = response.read()
    return json.loads(text) if text else None


def wait_until_up(url: str, seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status < 500:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not come up within {seconds:.0f} s")


def tree_seconds(root_pids: list[int]) -> tuple[float, float]:
    """The given processes and all their descendants: their user + system CPU, and the time
    their threads waited on block I/O (an fsync, say), which the kernel counts only with
    delay accounting on (`kernel.task_delayacct`; else 0)."""
    parents: dict[int, int] = {}
    times: dict[int, tuple[float, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        # Fields 14 and 15 of proc(5) (utime, stime) and 42 (delayacct_blkio_ticks).
        times[pid] = ((int(fields[11]) + int(fields[12])) / CLOCK_TICKS, int(fields[39]) / CLOCK_TICKS)
    members = set(root_pids)
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    found = [times[pid] for pid in members if pid in times]
    return sum(cpu for cpu, _ in found), sum(io for _, io in found)


def tree_cpu_seconds(root_pids: list[int]) -> float:
    """User + system CPU of the given processes and all their descendants."""
    return tree_seconds(root_pids)[0]


@dataclass
class System:
    """A server under test."""

    name: str
    base_url: str
    scenarios: set[str]
    persistence: str
    processes: list[subprocess.Popen] = field(default_factory=list)
    quota: CpuQuota | None = None

    def start(self, run_dir: Path) -> None:
        raise NotImplementedError

    def persistence_of(self, scenario: str) -> str:
        """What an answer promises about the writes of `scenario`."""
        return self.persistence

    def spawn(self, run_dir: Path, label: str, command: list[str], **kwargs) -> None:
        log = open(run_dir / f"{self.name}-{label}.log", "w")
        if self.quota is None:
            self.quota = CpuQuota.create(self.name)
        quota = self.quota
        # The child joins the cgroup before it runs the server, so that every process the server
        # forks (nginx's workers) is born capped.
        join = (lambda: quota.add(os.getpid())) if quota is not None else None
        process = subprocess.Popen(pinned(command), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=join, **kwargs)
        self.processes.append(process)

    def cap(self, cores: float | None) -> float | None:
        """Caps the server at `cores` of CPU (None lifts the cap); answers the cap in force, None
        when no cgroup could be made (the server then has its whole pinned core)."""
        if self.quota is None:
            return None
        self.quota.cap(cores)
        return cores

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds([p.pid for p in self.processes])

    def io_wait_seconds(self) -> float:
        """How long the server's threads waited on block I/O (0 without delay accounting)."""
        return tree_seconds([p.pid for p in self.processes])[1]

    def preload(self, keyspace: int, cache_keys: int, value_bytes: int) -> None:
        """Writes every counter the read scenarios read, outside the timed part."""

    def stats(self) -> dict | None:
        return None

    def stop(self) -> None:
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        self.processes.clear()
        if self.quota is not None:
            self.quota.remove()
            self.quota = None


class V1System(System):
    """Speaks edgecount's API v1, batch route included: edgecount and the Ehcache baseline."""

    def preload(self, keyspace: int, cache_keys: int, value_bytes: int) -> None:
        def send(ops: list[dict]) -> None:
            # Sets and cache puts are idempotent, so a batch that goes unanswered is sent again
            # (and said, since a healthy server answers one in well under a second).
            for attempt in range(3):
                try:
                    http_json("POST", f"{self.base_url}/v1/batch", {"ops": ops}, timeout=60)
                    return
                except (TimeoutError, urllib.error.URLError) as error:
                    print(f"[bench] {self.name}: a preload batch failed ({error}); sending it again", flush=True)
            raise RuntimeError(f"{self.name}: a preload batch failed three times")

        def counters(start: int) -> None:
            send([{"op": "set", "ns": NS, "key": f"k{i}", "value": i} for i in range(start, min(start + 1000, keyspace))])

        def entries(start: int) -> None:
            value = "v" * value_bytes
            send([{"op": "cache_put", "ns": NS, "key": f"v{i}", "value": value}
                  for i in range(start, min(start + 200, cache_keys))])

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(counters, range(0, keyspace, 1000)))
            list(pool.map(entries, range(0, cache_keys, 200)))

    def stats(self) -> dict | None:
        try:
            return http_json("GET", f"{self.base_url}/v1/stats", timeout=120)  # type: ignore[return-value]
        except (urllib.error.URLError, TimeoutError, ValueError):
            return None


class EdgecountWorkerd(V1System):
    # The shards may hold up to 100,000 cache entries each (wrangler.toml: 50,000), so that the
    # ncache scenario's million items fit in 16 shards without evictions. A key is hot from 5
    # reads/s (wrangler.toml: 50): capped at 0.15 of a core the whole server answers a few
    # hundred requests/s, so the hot scenario's 10 keys would otherwise never become hot, as
    # they would at the rates the default is meant for. The kit reads `/v1/stats` just before
    # and after each hold and bills what changed between: the shards' figures must be fresh
    # (EDGECOUNT_STATS_MAX_AGE_MS 0), not the answer an isolate reuses for 2 s by default.
    VARS = {
        "EDGECOUNT_SHARD_CACHE_ENTRIES": "100000",
        "EDGECOUNT_HOT_THRESHOLD": "5",
        "EDGECOUNT_STATS_MAX_AGE_MS": "0",
    }

    def __init__(self) -> None:
        System.__init__(self, "edgecount-workerd", "http://127.0.0.1:8790",
                         {"health", "read", "write", "write-async", "mixed", "hot", "batch", "batch-async", "cache",
                          "ncache", "clients", "page-view"},
                         "durable (SQLite, written before each answer)")

    def persistence_of(self, scenario: str) -> str:
        if scenario.endswith("-async") or scenario == "page-view":
            return "one-way (answered 202, applied to SQLite within 1 s)"
        return self.persistence

    def start(self, run_dir: Path) -> None:
        state = run_dir / f"{self.name}-state"
        state.mkdir(exist_ok=True)
        config = run_dir / f"{self.name}.capnp"
        overrides = [f"{name}={value}" for name, value in self.VARS.items()]
        subprocess.run([str(NODE_BIN / "node"), str(ROOT / "scripts" / "workerd-config.mjs"), "8790",
                        str(state), str(config), *overrides], check=True, cwd=ROOT)
        self.spawn(run_dir, "server", [str(NODE_BIN / "workerd"), "serve", str(config)], cwd=ROOT)
        wait_until_up("http://127.0.0.1:8790/v1/health")


class EdgecountBehindCdn(EdgecountWorkerd):
    """edgecount-workerd behind nginx's proxy_cache, standing in for the CDN tier that honours
    the max-age of hot reads in production (wrangler dev does not emulate it)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "edgecount-workerd-cdn"
        self.base_url = "http://127.0.0.1:8795"
        self.scenarios = {"hot", "mixed"}

    def start(self, run_dir: Path) -> None:
        super().start(run_dir)
        prefix = run_dir / f"nginx-{self.name}"
        (prefix / "tmp").mkdir(parents=True, exist_ok=True)
        self.spawn(run_dir, "cdn", nginx_command(prefix, LOADTEST / "baselines/nginx/cdn.conf"))
        wait_until_up(f"{self.base_url}/v1/health")


class EdgecountBehindCdn5s(EdgecountBehindCdn):
    """The same with hot reads kept 5 s instead of 1 s (`EDGECOUNT_HOT_MAX_AGE`): the CDN can
    only cache what has max-age left, so the longer it is, the more it answers."""

    VARS = {**EdgecountWorkerd.VARS, "EDGECOUNT_HOT_MAX_AGE": "5"}

    def __init__(self) -> None:
        super().__init__()
        self.name = "edgecount-workerd-cdn-5s"


class EdgecountWranglerDev(V1System):
    def __init__(self) -> None:
        super().__init__("edgecount-wrangler-dev", "http://127.0.0.1:8791",
                         {"read", "write", "mixed", "hot", "batch"},
                         "durable (SQLite, written before each answer)")

    def start(self, run_dir: Path) -> None:
        env = {**os.environ, "CLOUDFLARE_CF_FETCH_ENABLED": "false", "WRANGLER_SEND_METRICS": "false",
               "PATH": f"{NODE_BIN}:{os.environ['PATH']}"}
        self.spawn(run_dir, "server", [str(NODE_BIN / "wrangler"), "dev", "--ip", "127.0.0.1",
                                       "--port", "8791", "--persist-to", str(run_dir / "wrangler-state"),
                                       "--show-interactive-dev-session=false",
                                       # Fresh shard figures at each hold's ends, as for workerd.
                                       "--var", "EDGECOUNT_STATS_MAX_AGE_MS:0",
                                       "--var", "EDGECOUNT_OPEN:1"], cwd=ROOT, env=env)
        wait_until_up(f"{self.base_url}/v1/health", seconds=120)

    # Not preloaded: through the dev proxy a million keys take longer than the whole run. Its
    # reads of unwritten counters take the same path (a SQLite lookup that finds no row).
    preload = System.preload


class RedisWebdis(System):
    # Extra redis-server arguments; the in-memory one keeps nothing on disk.
    PERSISTENCE_ARGS: list[str] = []

    def __init__(self, name: str = "redis-webdis", persistence: str = "none (save \"\", appendonly no)",
                 scenarios: set[str] | None = None) -> None:
        super().__init__(name, "http://127.0.0.1:8793",
                         scenarios or {"health", "read", "write", "mixed", "hot", "cache", "clients"}, persistence)

    def start(self, run_dir: Path) -> None:
        data = run_dir / f"{self.name}-data"
        data.mkdir(exist_ok=True)
        self.spawn(run_dir, "redis", ["redis-server", str(LOADTEST / "baselines/redis/redis.conf"),
                                      "--dir", str(data), *self.PERSISTENCE_ARGS])
        deadline = time.monotonic() + 30
        while subprocess.run(["redis-cli", "-p", "6390", "ping"], capture_output=True).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.2)
        self.spawn(run_dir, "webdis", ["webdis", str(LOADTEST / "baselines/redis/webdis.json")])
        wait_until_up(f"{self.base_url}/PING")

    def preload(self, keyspace: int, cache_keys: int, value_bytes: int) -> None:
        value = "v" * value_bytes
        lines = [f"SET {NS}:k{i} {i}" for i in range(keyspace)]
        lines += [f"SET {NS}:v{i} {value}" for i in range(cache_keys)]
        subprocess.run(["redis-cli", "-p", "6390", "--pipe"], input="\n".join(lines).encode() + b"\n",
                       check=True, capture_output=True)


class RedisWebdisAofAlways(RedisWebdis):
    """Acknowledged = on disk, as edgecount: the append-only file fsynced before each answer."""

    PERSISTENCE_ARGS = ["--appendonly", "yes", "--appendfsync", "always"]

    def __init__(self) -> None:
        super().__init__("redis-webdis-aof-always", "durable (appendonly yes, appendfsync always)",
                         {"write", "mixed"})


class RedisWebdisAofEverysec(RedisWebdis):
    """Redis's default durable setting: the append-only file fsynced once a second, so up to a
    second of acknowledged writes can be lost."""

    PERSISTENCE_ARGS = ["--appendonly", "yes", "--appendfsync", "everysec"]

    def __init__(self) -> None:
        # write-async: the same INCR, set beside edgecount's one-way writes, which make the
        # same kind of promise (what the last second accepted may be lost).
        super().__init__("redis-webdis-aof-everysec", "up to 1 s lost (appendonly yes, appendfsync everysec)",
                         {"write", "write-async", "mixed"})


class Memcached(System):
    """Debian's memcached, one worker thread, driven by a small C client over its text protocol
    (baselines/memcached/mcload.c): the seeds' memcached comparison."""

    PORT = 11290
    SOURCE = LOADTEST / "baselines" / "memcached" / "mcload.c"

    def __init__(self) -> None:
        super().__init__("memcached", f"tcp://127.0.0.1:{self.PORT}", {"mixed", "clients"}, "none (memory only)")
        self.client: Path | None = None

    def start(self, run_dir: Path) -> None:
        self.client = run_dir / "mcload"
        subprocess.run(["cc", "-O2", "-pthread", "-o", str(self.client), str(self.SOURCE)], check=True)
        self.spawn(run_dir, "server", ["memcached", "-l", "127.0.0.1", "-p", str(self.PORT), "-t", "1",
                                       "-m", "2048", "-U", "0", *(["-u", "root"] if os.getuid() == 0 else [])])
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.PORT), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("memcached did not start")
                time.sleep(0.1)

    def preload(self, keyspace: int, cache_keys: int, value_bytes: int) -> None:
        subprocess.run([str(self.client), "load", str(self.PORT), str(keyspace), "100"], check=True,
                       capture_output=True)

    def run_load(self, clients: int, seconds: int, keys: int) -> dict:
        """One closed-model run on core 0: ops, seconds, errors and latency percentiles."""
        completed = subprocess.run(
            ["taskset", "-c", "0", str(self.client), "run", str(self.PORT), str(clients), str(seconds), str(keys),
             "100"], capture_output=True, text=True)
        if not completed.stdout.strip():
            raise RuntimeError(f"mcload failed: {completed.stderr[-500:]}")
        return json.loads(completed.stdout)


class Ehcache(V1System):
    JAR = LOADTEST / "baselines/ehcache/target/ehcache-counter.jar"

    def __init__(self) -> None:
        super().__init__("ehcache", "http://127.0.0.1:8792",
                         {"read", "write", "mixed", "hot", "batch", "cache", "clients"},
                         "none (on-heap caches)")

    def start(self, run_dir: Path) -> None:
        self.spawn(run_dir, "server", ["java", "-Xms1g", "-Xmx4g", "-jar", str(self.JAR),
                                       "--port", "8792", "--caches", "16"])
        wait_until_up(f"{self.base_url}/v1/health")

    def stats(self) -> dict | None:
        return None


class NginxStatic(System):
    def __init__(self) -> None:
        super().__init__("nginx-static", "http://127.0.0.1:8794", {"health", "read"}, "n/a (fixed body)")

    def start(self, run_dir: Path) -> None:
        prefix = run_dir / "nginx"
        (prefix / "tmp").mkdir(parents=True, exist_ok=True)
        self.spawn(run_dir, "server", nginx_command(prefix, LOADTEST / "baselines/nginx/nginx.conf"))
        wait_until_up(f"{self.base_url}/")


def write_js_worker_config(run_dir: Path, name: str, script: Path, port: int, sql_objects: str | None = None,
                           v8_flags: tuple[str, ...] = ()) -> Path:
    """A workerd config serving one JavaScript module on `port`; with `sql_objects`, that class as
    a SQLite Durable Object namespace bound as SHARDS, stored under the run folder; `v8_flags`
    for V8 (scripts/profile-process.py asks for a perf map)."""
    config = run_dir / f"{name}.capnp"
    module = os.path.relpath(script, run_dir)
    services = [f'(name = "{name}", worker = .worker)']
    objects = ""
    if sql_objects:
        state = run_dir / f"{name}-state"
        state.mkdir(exist_ok=True)
        services.append(f'(name = "storage", disk = (path = "{state}", writable = true))')
        objects = f"""
  bindings = [(name = "SHARDS", durableObjectNamespace = "{sql_objects}")],
  durableObjectNamespaces = [(className = "{sql_objects}", uniqueKey = "{name}-{sql_objects}", enableSql = true)],
  durableObjectStorage = (localDisk = "storage"),"""
    config.write_text(f"""using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  v8Flags = [{", ".join(json.dumps(flag) for flag in v8_flags)}],
  services = [{", ".join(services)}],
  sockets = [(name = "http", address = "127.0.0.1:{port}", http = (), service = "{name}")],
);
const worker :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "{module}")],
  compatibilityDate = "2026-11-01",{objects}
);
""")
    return config


class JsHelloWorkerd(System):
    """A JavaScript hello-world worker on the same workerd: the floor for any request there; its
    `hot` row answers with the headers of an edgecount hot read."""

    SCRIPT = LOADTEST / "baselines" / "js-hello" / "worker.js"

    def __init__(self) -> None:
        super().__init__("js-hello-workerd", "http://127.0.0.1:8796", {"health", "hot"}, "n/a (fixed body)")

    def start(self, run_dir: Path) -> None:
        config = write_js_worker_config(run_dir, "js-hello", self.SCRIPT, 8796)
        self.spawn(run_dir, "server", [str(NODE_BIN / "workerd"), "serve", str(config)], cwd=ROOT)
        wait_until_up(f"{self.base_url}/")


class JsFloorWorkerd(V1System):
    """The floor of edgecount's shard paths: a JavaScript worker calling JavaScript Durable
    Objects over RPC that run a shard's SQLite statements (baselines/js-floor/worker.js)."""

    SCRIPT = LOADTEST / "baselines" / "js-floor" / "worker.js"

    def __init__(self) -> None:
        super().__init__("js-floor-workerd", "http://127.0.0.1:8788", {"read", "write", "mixed", "batch"},
                         "durable (SQLite, written before each answer)")

    def start(self, run_dir: Path) -> None:
        config = write_js_worker_config(run_dir, "js-floor", self.SCRIPT, 8788, sql_objects="FloorShard")
        self.spawn(run_dir, "server", [str(NODE_BIN / "workerd"), "serve", str(config)], cwd=ROOT)
        wait_until_up(f"{self.base_url}/v1/health")


SYSTEMS = {s.name: s for s in (EdgecountWorkerd, EdgecountBehindCdn, EdgecountBehindCdn5s, EdgecountWranglerDev,
                                RedisWebdis, RedisWebdisAofAlways, RedisWebdisAofEverysec, Memcached, Ehcache,
                                NginxStatic, JsHelloWorkerd, JsFloorWorkerd)
           for s in [s()]}


def available(name: str) -> str | None:
    """Why a system cannot run here, or None when it can."""
    needs = {
        "redis-webdis": ["redis-server", "redis-cli", "webdis"],
        "redis-webdis-aof-always": ["redis-server", "redis-cli", "webdis"],
        "redis-webdis-aof-everysec": ["redis-server", "redis-cli", "webdis"],
        "memcached": ["memcached", "cc"],
        "nginx-static": ["nginx"],
        "edgecount-workerd-cdn": ["nginx"],
        "edgecount-workerd-cdn-5s": ["nginx"],
        "ehcache": ["java"],
    }.get(name, [])
    missing = [tool for tool in needs if shutil.which(tool) is None]
    if name == "ehcache" and not Ehcache.JAR.exists():
        missing.append(str(Ehcache.JAR.relative_to(ROOT)))
    return f"missing {', '.join(missing)}" if missing else None
