"""A CPU quota per server under test, from a cgroup: the means by which each server, not the load
generator, becomes the bottleneck of a capacity run.

On two cores k6 needs a core of its own and tops out around 7-8k requests/s, which is less than
most baselines answer on a whole core. Capping the server at a fraction of a core (cgroup v2
`cpu.max`, or v1 `cpu.cfs_quota_us`) makes every server saturate well below that ceiling, so a
capacity row measures the server. Where cgroups cannot be written (an unprivileged container),
`CpuQuota.create` answers None and the rows say so: without a quota a row is a capacity row only
if its server was busy anyway.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


class CpuQuota:
    """One cgroup, holding one server's processes, whose CPU can be capped and uncapped."""

    def __init__(self, directory: Path, version: int) -> None:
        self.directory = directory
        self.version = version
        self.cores: float | None = None

    @staticmethod
    def create(name: str) -> CpuQuota | None:
        """A fresh cgroup named `edgecount-bench-<name>`, or None when cgroups cannot be written."""
        v2 = (CGROUP_ROOT / "cgroup.controllers").exists()
        parent = CGROUP_ROOT if v2 else CGROUP_ROOT / "cpu"
        directory = parent / f"edgecount-bench-{name}"
        try:
            if v2 and "cpu" not in (CGROUP_ROOT / "cgroup.subtree_control").read_text().split():
                (CGROUP_ROOT / "cgroup.subtree_control").write_text("+cpu")
            directory.mkdir(exist_ok=True)
            quota = CpuQuota(directory, 2 if v2 else 1)
            quota.cap(None)
            return quota
        except OSError:
            return None

    def add(self, pid: int) -> None:
        """Moves `pid` into the cgroup; the processes it starts later are born there."""
        (self.directory / "cgroup.procs").write_text(str(pid))

    def cap(self, cores: float | None) -> None:
        """Limits the cgroup to `cores` (0.25 = a quarter of one core), or lifts the limit."""
        if self.version == 2:
            limit = "max" if cores is None else str(max(1000, int(cores * PERIOD_US)))
            (self.directory / "cpu.max").write_text(f"{limit} {PERIOD_US}")
        else:
            (self.directory / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            limit = "-1" if cores is None else str(max(1000, int(cores * PERIOD_US)))
            (self.directory / "cpu.cfs_quota_us").write_text(limit)
        self.cores = cores

    def remove(self) -> None:
        """Deletes the cgroup once its processes have exited."""
        try:
            self.directory.rmdir()
        except OSError:
            pass
