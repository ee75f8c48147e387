// How the runtime's SQLite runs a statement: its plan (`EXPLAIN QUERY PLAN`) and the rows it
// reads as the runtime counts and bills them (a cursor's `rowsRead`), in a Durable Object run
// by the same Miniflare as the specs. The SQLite bundled with the runtime plans some statements
// differently from other builds, so a statement on the hand-over's or the alarm's path is
// checked here rather than with another `sqlite3`.
//
// Usage: node scripts/sql-plan.mjs FILE.json, where the file holds
//   { "setup": [{ "q": "CREATE TABLE ..." }, ...],
//     "queries": [{ "name": "page", "q": "SELECT ... WHERE ns = ?1", "b": ["busy"] }, ...] }
// ("b": the statement's bindings, in order). Prints each query's plan, rows and rows read.
import { readFileSync } from "node:fs";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";

const script = `
export class Probe {
  constructor(ctx) { this.sql = ctx.storage.sql; }
  async fetch(request) {
    const { setup = [], queries = [] } = await request.json();
    for (const { q, b = [] } of setup) this.sql.exec(q, ...b).toArray();
    return Response.json(queries.map(({ name, q, b = [] }) => {
      const plan = this.sql.exec("EXPLAIN QUERY PLAN " + q, ...b).toArray().map((row) => row.detail);
      const cursor = this.sql.exec(q, ...b);
      const rows = cursor.toArray().length;
      return { name, rows, rowsRead: cursor.rowsRead, plan };
    }));
  }
}
export default {
  fetch(request, env) { return env.PROBE.get(env.PROBE.idFromName("probe")).fetch(request); },
};`;

const [file] = process.argv.slice(2);
if (!file) {
  console.error("usage: node scripts/sql-plan.mjs FILE.json");
  process.exit(2);
}
const mf = new Miniflare(
  convertV4MiniflareOptions({
    workers: [
      {
        name: "sql-plan",
        modules: true,
        script,
        compatibilityDate: "2025-09-01",
        durableObjects: { PROBE: { className: "Probe", useSQLite: true } },
      },
    ],
  }),
);
try {
  const answer = await mf.dispatchFetch("http://sql-plan/", {
    method: "POST",
    body: readFileSync(file, "utf8"),
  });
  if (!answer.ok) throw new Error(`${answer.status}: ${await answer.text()}`);
  for (const { name, rows, rowsRead, plan } of await answer.json())
    console.log(
      `${name}: ${rows} rows, ${rowsRead} rows read\n  ${plan.join("\n  ")}`,
    );
} finally {
  await mf.dispose();
}
