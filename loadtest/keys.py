"""Precomputes the key sequences the k6 scenarios read, outside the timed part.

Writes <out>/uniform.json and <out>/zipf.json: arrays of key indices in [0, keyspace), the
second drawn from a Zipf distribution with exponent 0.99 (rank r has weight 1 / r^0.99), as in
the mixed-workload benchmarks edgecount is compared with; and <out>/pages.json, the page-view
scenario's pages: 10,000 of them, Zipf with exponent 1.0, each with its visitor, one of 50,000
drawn uniformly. Seeded, so every run and every system sees the same sequence.

Usage: python3 keys.py <out-dir> <keyspace> <samples>
"""

import bisect
import itertools
import json
import random
import sys
from pathlib import Path

ZIPF_EXPONENT = 0.99
SEED = 20261122
# The page-view scenario: a site's pages and its visitors.
PAGES = 10_000
PAGES_EXPONENT = 1.0
VISITORS = 50_000


def zipf_sampler(keyspace: int, rng: random.Random, exponent: float = ZIPF_EXPONENT):
    cumulative = list(itertools.accumulate(1.0 / (rank**exponent) for rank in range(1, keyspace + 1)))
    total = cumulative[-1]
    # Ranks are spread over the key space by a fixed permutation so that popular keys do not
    # all sit next to each other (and on the same shard).
    permutation = list(range(keyspace))
    rng.shuffle(permutation)
    return lambda: permutation[bisect.bisect_left(cumulative, rng.random() * total)]


def main() -> None:
    out, keyspace, samples = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    uniform = [rng.randrange(keyspace) for _ in range(samples)]
    draw = zipf_sampler(keyspace, rng)
    zipf = [draw() for _ in range(samples)]
    (out / "uniform.json").write_text(json.dumps(uniform))
    (out / "zipf.json").write_text(json.dumps(zipf))
    page = zipf_sampler(PAGES, rng, PAGES_EXPONENT)
    views = [[page(), rng.randrange(VISITORS)] for _ in range(samples)]
    (out / "pages.json").write_text(json.dumps(views))
    top = max(set(zipf[:10000]), key=zipf[:10000].count)
    print(f"keys: {samples} uniform and {samples} zipf samples over {keyspace} keys "
          f"(hottest key {top} drawn {zipf.count(top)} times)")


if __name__ == "__main__":
    main()
