#!/usr/bin/env python3
"""Fails when a `match` over a `ShardOp` or an `OpKind` has a wildcard arm (`_ =>`, or a
binding that takes every other variant): without one, adding an op makes the compiler list every
place that must decide what to do with it. `make lint-rust` runs it.

It asks clippy's `wildcard_enum_match_arm` lint, which flags such arms on every enum, and keeps
those whose suggested variants are ops. Usage: scripts/check-op-matches.py
"""
import json
import subprocess
import sys

OPS = ("ShardOp::", "OpKind::")


def main():
    run = subprocess.run(
        ["cargo", "clippy", "--locked", "--quiet", "--workspace", "--all-features",
         "--message-format=json", "--", "-W", "clippy::wildcard_enum_match_arm"],
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
        if (diagnostic.get("code") or {}).get("code") != "clippy::wildcard_enum_match_arm":
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
