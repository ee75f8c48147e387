"""Writes partition.json: known answers for edgecount's key placement.

Computed independently of the Rust code, with the `xxhash` package from PyPI and the jump
consistent hash as printed in Lamping and Veach (2014), so the Rust build is checked against a
second implementation. Run: python3 generate_partition.py > partition.json
"""

import json

import xxhash


def jump_consistent_hash(key: int, buckets: int) -> int:
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) % (1 << 64)
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


CASES = [
    ("pages", "home"),
    ("pages", "/blog/hello-world"),
    ("likes", "post:42"),
    ("votes", "café"),
    ("a", "b"),
    ("ab", "c"),
    ("a", "bc"),
    ("product-views", "sku-000001"),
    ("x" * 64, "k" * 256),
    ("ns_1.2-3", "emoji-\U0001F600"),
    ("counters", "a/b/c"),
    ("counters", "..."),
]

vectors = []
for ns, key in CASES:
    h = xxhash.xxh3_64_intdigest(ns.encode() + b"\x00" + key.encode())
    for shards in (1, 2, 16, 100, 1024):
        vectors.append(
            {"ns": ns, "key": key, "hash": f"{h:016x}", "shards": shards,
             "shard": jump_consistent_hash(h, shards)}
        )
print(json.dumps({"algorithm": "jump_consistent_hash(xxh3_64(ns ++ 0x00 ++ key), shards)",
                  "vectors": vectors}, indent=1, ensure_ascii=False))
