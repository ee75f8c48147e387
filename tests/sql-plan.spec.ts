// scripts/sql-plan.mjs shows how the runtime's SQLite runs a statement: its plan and the rows it
// reads as billed. The hand-over's page of records was chosen with it: a comparison of a pair of
// columns, the first also held to a list of values, stepped through every row before the
// cursor, where an equality and one comparison seek. A short run here checks that it still
// reports both.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "edgecount-sql-plan-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("reports a seek's plan and its rows read, and a walk's", () => {
  const file = join(dir, "queries.json");
  writeFileSync(
    file,
    JSON.stringify({
      setup: [
        {
          q: "CREATE TABLE t (a TEXT NOT NULL, b TEXT NOT NULL, c TEXT NOT NULL, PRIMARY KEY (a, b, c)) WITHOUT ROWID",
        },
        {
          q: "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999) INSERT INTO t SELECT 'x', 'y', printf('%04d', i) FROM n",
        },
      ],
      queries: [
        {
          name: "seek",
          q: "SELECT c FROM t WHERE a = ?1 AND b = ?2 AND c > ?3 ORDER BY c LIMIT 10",
          b: ["x", "y", "0900"],
        },
        {
          name: "walk",
          q: "SELECT c FROM t WHERE a = ?1 AND b IN ('w', 'y') AND (b, c) > (?2, ?3) ORDER BY b, c LIMIT 10",
          b: ["x", "y", "0900"],
        },
      ],
    }),
  );
  const report = execFileSync(
    join(ROOT, "node_modules/.bin/node"),
    ["scripts/sql-plan.mjs", file],
    { cwd: ROOT, encoding: "utf8", timeout: 60_000 },
  );
  expect(report).toContain("seek: 10 rows, 10 rows read");
  expect(report).toMatch(
    /SEARCH t USING PRIMARY KEY \(a=\? AND b=\? AND c>\?\)/,
  );
  const walked = /walk: 10 rows, (\d+) rows read/.exec(report);
  expect(walked).not.toBeNull();
  // As many rows as it returns at least; on this runtime, every row before the cursor too.
  expect(Number(walked?.[1])).toBeGreaterThanOrEqual(10);
}, 90_000);
