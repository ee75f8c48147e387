// Writes a workerd config (Cap'n Proto text) that serves the built worker the way production
// does: the same script, vars and SQLite Durable Objects as wrangler.toml, with no dev proxy and
// no inspector. Usage: node workerd-config.mjs <port> <state-dir> <out.capnp> [NAME=value ...]
// (each NAME=value overrides or adds one of wrangler.toml's vars). WORKERD_V8_FLAGS, if set,
// is a comma-separated list of V8 flags for the config's `v8Flags` (scripts/profile-process.py
// sets `--perf-basic-prof` so that perf can name the Wasm's functions). EDGECOUNT_FRONTS=N, if
// set, serves N front services instead of one, on <port> to <port>+N-1: each is its own isolate
// running the same script, and all call the Durable Objects of one further service, as many
// isolates of one deployment do (loadtest/fronts.py).
import { writeFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { unstable_readConfig } from "wrangler";

const [port, stateDir, out, ...overrides] = process.argv.slice(2);
if (!port || !stateDir || !out) {
  console.error(
    "usage: node workerd-config.mjs <port> <state-dir> <out.capnp>",
  );
  process.exit(2);
}
const config = unstable_readConfig({ config: "wrangler.toml" });
// `embed` paths are read relative to the config file.
const main = resolve(config.main ?? "build/entry.js");
const index = resolve(main, "../index.js");
const fromConfig = (path) => relative(dirname(resolve(out)), path);
const wasm = resolve(main, "../index_bg.wasm");
const text = (value) => JSON.stringify(String(value));
const v8Flags = (process.env.WORKERD_V8_FLAGS ?? "").split(",").filter(Boolean);

const overridden = Object.fromEntries(
  overrides.map((pair) => [
    pair.split("=", 1)[0],
    pair.slice(pair.indexOf("=") + 1),
  ]),
);
// Served on loopback for specs, soaks and benches: open, as `make dev` is, unless overridden
// (`EDGECOUNT_OPEN=0`). A deployment is not: the worker answers reads only until tokens or public
// namespaces are configured, or open writes are asked for by name.
const vars = Object.entries({
  ...config.vars,
  EDGECOUNT_OPEN: "1",
  ...overridden,
}).map(([name, value]) => `(name = ${text(name)}, text = ${text(value)})`);
const objects = config.durable_objects.bindings.map(
  (b) =>
    `(name = ${text(b.name)}, durableObjectNamespace = ${text(b.class_name)})`,
);
const fronts = Number(process.env.EDGECOUNT_FRONTS ?? "0");
// A front's bindings reach the objects of the service that holds them.
const remoteObjects = config.durable_objects.bindings.map(
  (b) =>
    `(name = ${text(b.name)}, durableObjectNamespace = (className = ${text(b.class_name)}, serviceName = "edgecount"))`,
);
const namespaces = config.durable_objects.bindings.map(
  (b) =>
    `(className = ${text(b.class_name)}, uniqueKey = ${text(`edgecount-${b.class_name}`)}, enableSql = true)`,
);

const modules = `modules = [
    (name = "entry.js", esModule = embed ${text(fromConfig(main))}),
    (name = "index.js", esModule = embed ${text(fromConfig(index))}),
    (name = "index_bg.wasm", wasm = embed ${text(fromConfig(wasm))}),
  ],
  compatibilityDate = ${text(config.compatibility_date)},
  compatibilityFlags = [${(config.compatibility_flags ?? []).map(text).join(", ")}],`;
const frontNames = Array.from({ length: fronts }, (_, i) => `front${i}`);
const sockets = fronts
  ? frontNames.map(
      (name, i) =>
        `(name = ${text(name)}, address = ${text(`127.0.0.1:${Number(port) + i}`)}, http = (), service = ${text(name)})`,
    )
  : [
      `(name = "http", address = ${text(`127.0.0.1:${port}`)}, http = (), service = "edgecount")`,
    ];
const frontWorkers = frontNames.map(
  (name) => `
const ${name} :Workerd.Worker = (
  ${modules}
  bindings = [${[...vars, ...remoteObjects].join(",\n    ")}],
);
`,
);

writeFileSync(
  out,
  `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  v8Flags = [${v8Flags.map(text).join(", ")}],
  services = [
    (name = "edgecount", worker = .edgecount),
    ${frontNames.map((name) => `(name = ${text(name)}, worker = .${name}),`).join("\n    ")}
    (name = "do-storage", disk = (path = ${text(resolve(stateDir))}, writable = true)),
  ],
  sockets = [${sockets.join(",\n    ")}],
);

const edgecount :Workerd.Worker = (
  ${modules}
  bindings = [${[...vars, ...objects].join(",\n    ")}],
  durableObjectNamespaces = [${namespaces.join(", ")}],
  durableObjectStorage = (localDisk = "do-storage"),
);
${frontWorkers.join("")}`,
);
