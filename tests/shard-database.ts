// The SQLite file behind a shard, for specs that look at or alter what a shard stored as a
// release before this one would have left it.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";

/** The SQLite file of the one shard of a service started with `EDGECOUNT_SHARDS: "1"` and
 * persisted in `dir`. */
export function shardDatabase(dir: string): string {
  // Miniflare keeps each object's database as `<id>.sqlite` beside a `metadata.sqlite`.
  const files = readdirSync(dir, { recursive: true, encoding: "utf8" }).filter(
    (file) => /Shard\/[0-9a-f]{64}\.sqlite$/.test(file),
  );
  expect(files).toHaveLength(1);
  return join(dir, files[0]);
}
