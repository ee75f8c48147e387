// Writes the requests a k6 scenario of the benchmark sends, in order, for wrk to replay
// (replay.lua): the capacity holds drive each server with wrk, which saturates a whole core
// where k6 cannot, while the requests stay the ones k6 sends. It runs loadtest/k6/bench.js
// itself with k6's modules swapped for recorders, so the two cannot drift apart.
//
// Usage: node record.mjs <out-file> <count>   with bench.js's environment (SYSTEM, BASE_URL,
// SCENARIO, KEYS_DIR, VALUE_BYTES) in process.env.
// Each line of <out-file>: method, path, headers as name:value joined by \x1f, body; tab-separated.
import { build } from "esbuild";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const [out, count] = process.argv.slice(2);
if (!out || !(Number(count) > 0)) {
  console.error("usage: node record.mjs <out-file> <count>");
  process.exit(2);
}

const recorded = [];
let iteration = 0;
const base = new URL(process.env.BASE_URL);
function record(method, url, body, params) {
  const target = new URL(url);
  if (target.host !== base.host)
    throw new Error(`a request off the target: ${url}`);
  const headers = Object.entries(params?.headers ?? {});
  const text = body == null ? "" : String(body);
  for (const part of [
    target.pathname + target.search,
    text,
    ...headers.flat(),
  ]) {
    if (/[\t\n\x1f]/.test(part))
      throw new Error(`cannot record a tab, newline or \\x1f: ${part}`);
  }
  recorded.push(
    [
      method,
      target.pathname + target.search,
      headers.map(([name, value]) => `${name}:${value}`).join("\x1f"),
      text,
    ].join("\t"),
  );
  return { status: 200 };
}

// What bench.js takes from k6, recorded instead of sent.
globalThis.__ENV = process.env;
globalThis.open = (path) => readFileSync(path, "utf8");
globalThis.__edgecountRecorder = {
  http: {
    get: (url, params) => record("GET", url, null, params),
    post: (url, body, params) => record("POST", url, body, params),
    put: (url, body, params) => record("PUT", url, body, params),
    setResponseCallback: () => {},
    expectedStatuses: () => null,
  },
  execution: {
    scenario: {
      get iterationInTest() {
        return iteration;
      },
    },
  },
  SharedArray: function SharedArray(_name, load) {
    return load();
  },
};
const stub = (source) => ({ contents: source, loader: "js" });
const k6Modules = {
  name: "k6-recorder",
  setup(esbuild) {
    esbuild.onResolve({ filter: /^k6(\/.*)?$/ }, (args) => ({
      path: args.path,
      namespace: "k6",
    }));
    esbuild.onLoad({ filter: /.*/, namespace: "k6" }, (args) => {
      const r = "globalThis.__edgecountRecorder";
      return stub(
        {
          k6: "export const check = () => true; export const fail = (m) => { throw new Error(m); };",
          "k6/http": `export default ${r}.http;`,
          "k6/execution": `export default ${r}.execution;`,
          "k6/data": `export const SharedArray = ${r}.SharedArray;`,
        }[args.path],
      );
    });
  },
};

const bundled = join(dirname(out), `record-${process.pid}.mjs`);
await build({
  entryPoints: [join(here, "..", "k6", "bench.js")],
  bundle: true,
  format: "esm",
  platform: "node",
  outfile: bundled,
  plugins: [k6Modules],
  logLevel: "error",
});
const script = await import(pathToFileURL(bundled).href);
for (iteration = 0; iteration < Number(count); iteration++) script.default();
writeFileSync(out, recorded.join("\n") + "\n");
