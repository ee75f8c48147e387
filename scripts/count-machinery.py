#!/usr/bin/env python3
"""How many lines the machinery behind edgecount's guarantees takes (docs/architecture.md).

The files are the ones a review named (the hand-over, one-way counting, receipts and group
commit, the isolate's concurrency), or what replaced them. Each line is counted once, as one of:

- **code**: everything that is not a test;
- **tests**: an inline `#[cfg(test)] mod tests { ... }` block, or a file the crate compiles only
  for tests (declared `#[cfg(test)] mod name;`, such as `tests.rs` and a test fake).

Usage: python3 scripts/count-machinery.py [--at COMMIT] [--files]
  --at COMMIT   count the files as they were at COMMIT (through `git show`)
  --files       print each file's counts as well as the totals
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The machinery: single files, and folders whose every `.rs` file is part of it.
MACHINERY = [
    "worker/src/shard/resharding/hand_over.rs",
    # Split out of hand_over.rs (and the Durable Object's file) to break an import circle.
    "worker/src/shard/resharding/state.rs",
    "worker/src/shard/resharding/store.rs",
    "worker/src/shard/resharding/mod.rs",
    "core/src/shard/migration.rs",
    "core/src/shard/placement.rs",
    "worker/src/isolate/placement.rs",
    "core/src/edge/one_way.rs",
    "worker/src/isolate/one_way.rs",
    # Moved out of isolate/one_way.rs when relays began to share it.
    "worker/src/shared/one_way_flusher.rs",
    "core/src/shard/receipt.rs",
    "core/src/shard/group_commit.rs",
    # What the isolate's coalescing took (removed when the shard began grouping calls), and
    # what replaced it: the shard's groups and the futures on the runtime.
    "core/src/edge/coalescer.rs",
    "worker/src/isolate/request_task",
    "worker/src/isolate/shard_calls",
    "worker/src/shard/group.rs",
    "worker/src/shared/tasks.rs",
    "worker/src/http/cancellation",
    # Before they became folders.
    "worker/src/isolate/request_task.rs",
    "worker/src/isolate/shard_calls.rs",
    "worker/src/http/cancellation.rs",
]

TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+)\s*;")
INLINE_TESTS = re.compile(r"^#\[cfg\(test\)\]\s*\n\s*mod\s+\w+\s*\{", re.M)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def files_at(commit: str | None) -> dict[str, str]:
    """The machinery's files and their text, in the working tree or at `commit`."""
    if commit is None:
        paths = [p for entry in MACHINERY for p in expand(ROOT / entry)]
        return {str(p.relative_to(ROOT)): p.read_text() for p in paths}
    listed = git("ls-tree", "-r", "--name-only", commit).splitlines()
    wanted = [
        p for p in listed
        if p.endswith(".rs") and any(p == e or p.startswith(e + "/") for e in MACHINERY)
    ]
    return {p: git("show", f"{commit}:{p}") for p in wanted}


def expand(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(path.rglob("*.rs"))
    return [path] if path.exists() else []


def count(files: dict[str, str]) -> list[tuple[str, int, int]]:
    """Each file's (path, code lines, test lines)."""
    test_files = set()
    for path, text in files.items():
        folder = str(Path(path).parent)
        for name in TEST_MODULE.findall(text):
            # `mod name;` in `x/mod.rs` is `x/name.rs`; in `x/y.rs`, `x/y/name.rs`.
            base = folder if path.endswith("mod.rs") else path[: -len(".rs")]
            test_files.add(f"{base}/{name}.rs")
    counted = []
    for path, text in sorted(files.items()):
        lines = len(text.splitlines())
        if path in test_files:
            counted.append((path, 0, lines))
            continue
        tests = 0
        block = INLINE_TESTS.search(text)
        if block:
            tests = lines - text[: block.start()].count("\n")
        counted.append((path, lines - tests, tests))
    return counted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--at", help="count the files as they were at this commit")
    parser.add_argument("--files", action="store_true", help="print each file's counts")
    args = parser.parse_args()
    counted = count(files_at(args.at))
    if not counted:
        print("none of the machinery's files found", file=sys.stderr)
        return 1
    if args.files:
        for path, code, tests in counted:
            print(f"{code:6d} {tests:6d}  {path}")
    code = sum(c for _, c, _ in counted)
    tests = sum(t for _, _, t in counted)
    print(f"{code + tests} lines in {len(counted)} files: {code} code, {tests} tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
