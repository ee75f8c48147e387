#!/usr/bin/env python3
"""Fails when a folder of the worker uses one it must not (see docs/architecture.md, "Rules
between the layers"): `shard/` uses nothing of `http/` or `isolate/`, `isolate/` nothing of
`http/`, `relay` only `shared/`, and `shared/` nothing of the others. A `crate::` path names what a file uses,
in a `use` or in its code. `make lint-rust` runs it.

Usage: scripts/check-layers.py
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "worker" / "src"
FORBIDDEN = {
    "shard": ("http", "isolate", "relay"),
    "isolate": ("http", "relay"),
    "relay": ("http", "isolate", "shard"),
    "shared": ("http", "isolate", "shard", "relay"),
}
PATH = re.compile(r"\bcrate::(\w+)")
GROUP = re.compile(r"\bcrate::\{([^}]*)\}")


def code_of(text: str) -> str:
    """`text` without its comments, so that a doc link naming another layer is no use of it."""
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def main() -> int:
    found = []
    for folder, banned in FORBIDDEN.items():
        files = sorted((ROOT / folder).rglob("*.rs")) + [p for p in [ROOT / f"{folder}.rs"] if p.exists()]
        for path in files:
            for number, line in enumerate(code_of(path.read_text()).splitlines(), 1):
                grouped = [name.strip().split("::")[0] for group in GROUP.findall(line) for name in group.split(",")]
                for used in PATH.findall(line) + grouped:
                    if used in banned:
                        found.append(f"{path.relative_to(ROOT.parent.parent)}:{number}: uses crate::{used}")
    for line in found:
        print(f"[layers] {line}")
    if found:
        print("[layers] a folder uses one it must not (docs/architecture.md, \"Rules between the layers\")")
        return 1
    print("[layers] shard/, isolate/ and relay use nothing of http/, nor of each other but shared/; shared/ nothing of them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
