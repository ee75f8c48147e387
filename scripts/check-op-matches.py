#!/usr/bin/env python3
"""Fails when a `match` over a `ShardOp` or an `OpKind` has a wildcard arm (`_ =>`, or a
binding that takes every other variant): without one, adding an op makes the compiler list every
place that must decide what to do with it. `make lint-rust` runs it.

It asks clippy's `wildcard_enum_match_arm` and `match_wildcard_for_single_variants` lints, which
flag such arms on every enum, over every target, and keeps those whose suggested variants are
ops. What those lints do not see, it does not either: `matches!` and other macros, and a
wildcard inside a tuple or a nested pattern (`match (&call.op, result)`), so a decision that a
new op must revisit is written as a `match` over the op itself (`shard::owner::may_bind`).
Usage: scripts/check-op-matches.py
"""
import json
import subprocess
import sys

OPS = ("ShardOp::", "OpKind::")
LINTS = ("clippy::wildcard_enum_match_arm", "clippy::match_wildcard_for_single_variants")


def main():
    run = subprocess.run(
        ["cargo", "clippy", "--locked", "--quiet", "--workspace", "--all-targets", "--all-features",
         "--message-format=json", "--", "-W", "clippy::wildcard_enum_match_arm",
         "-W", "clippy::match_wildcard_for_single_variants"],
        capture_output=True, text=True, check=False,
    )
    found = set()
    for line in run.stdout.splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-message":
            continue
        diagnostic = message["message"]
        if (diagnostic.get("code") or {}).get("code") not in LINTS:
            continue
        for child in diagnostic["children"]:
            for span in child.get("spans", []):
                if any(op in (span.get("suggested_replacement") or "") for op in OPS):
                    found.add(f'{span["file_name"]}:{span["line_start"]}')
    if run.returncode != 0 and not found:
        print(run.stderr, file=sys.stderr)
        sys.exit(run.returncode)
    for place in sorted(found):
        print(f"[op matches] a wildcard arm over ops at {place}: name the variants")
    if found:
        sys.exit(1)
    print("[op matches] no match over ShardOp or OpKind has a wildcard arm")


if __name__ == "__main__":
    main()
