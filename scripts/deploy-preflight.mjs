// What `make deploy` checks before `wrangler deploy`: it stops when nothing is configured (no
// token and no public namespace), where the worker would answer reads only, unless open writes
// are asked for by name (EDGECOUNT_OPEN=1, which `make deploy` then passes to the worker), and
// it prints what the deployment makes public, the request logs Cloudflare keeps of it, the
// bundle's size against the Workers plans' limits and the secrets still to set.
//
// Usage: node scripts/deploy-preflight.mjs [--config wrangler.toml] [--secrets NAME,NAME] [--deploy]
// With --deploy (`make deploy`) it then runs `wrangler deploy` itself, telling the worker
// EDGECOUNT_OPEN=1 only when it found open writes asked for and nothing else configured: an
// EDGECOUNT_OPEN left in the environment does not follow a deployment that has tokens.
// Without --secrets it asks wrangler which secrets the deployed worker has (`wrangler secret
// list`); when it cannot tell (not logged in, a first deployment), it counts none.
import { execFileSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { parseArgs } from "node:util";
import { unstable_readConfig } from "wrangler";

const { values: args } = parseArgs({
  options: {
    config: { type: "string", default: "wrangler.toml" },
    secrets: { type: "string" },
    deploy: { type: "boolean", default: false },
  },
});
const config = unstable_readConfig({ config: args.config });
const vars = config.vars ?? {};
const TOKEN_LISTS = [
  "EDGECOUNT_ADMIN_TOKENS",
  "EDGECOUNT_WRITE_TOKENS",
  "EDGECOUNT_COUNT_TOKENS",
  "EDGECOUNT_READ_TOKENS",
];

function deployedSecrets() {
  if (args.secrets !== undefined)
    return args.secrets.split(",").filter(Boolean);
  try {
    const out = execFileSync(
      "wrangler",
      ["secret", "list", "--format", "json", "--config", args.config],
      {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
        timeout: 30_000,
      },
    );
    return JSON.parse(out).map((secret) => secret.name);
  } catch {
    return [];
  }
}

const secrets = deployedSecrets();
// A list in [vars] counts only with an entry in it, as the worker reads it (`,` or spaces alone
// configure no token). A secret's value cannot be seen from here: its name is taken at its word.
const entries = (value) =>
  String(value ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
const set = (name) => secrets.includes(name) || entries(vars[name]).length > 0;
// What the worker is deployed with: `wrangler deploy` sends [vars] (of the environment the
// config reader picked, as wrangler picks it) and `make deploy` adds EDGECOUNT_OPEN alone, so
// the shell's own EDGECOUNT_ settings never reach it and are not read here.
const yes = (name) =>
  ["1", "true", "yes"].includes(String(vars[name] ?? "").trim());
// A secret of the name is handed to the worker like a var, and its value cannot be read back.
const flag = (name, on, off) =>
  secrets.includes(name)
    ? `as the secret ${name} says (its value is not shown to this check)`
    : yes(name)
      ? on
      : off;
const publicNamespaces = entries(vars.EDGECOUNT_PUBLIC_NAMESPACES);
const tokens = TOKEN_LISTS.filter(set);
const open = tokens.length === 0 && publicNamespaces.length === 0;

// As the worker reads it: 10/s by default where public namespaces are configured.
const rateLimit = () =>
  vars.EDGECOUNT_RATE_LIMIT !== undefined
    ? Number(vars.EDGECOUNT_RATE_LIMIT)
    : publicNamespaces.length > 0
      ? 10
      : 0;
const say = (line) => console.log(`[deploy] ${line}`);
// Asked for on the command line only: a committed `EDGECOUNT_OPEN` would pass every deploy after.
const askedOpen = ["1", "true", "yes"].includes(
  String(process.env.EDGECOUNT_OPEN ?? "").trim(),
);
if (open && !askedOpen) {
  console.error(
    "[deploy] stopped: no token and no public namespace is configured, so the deployment would answer reads only.\n" +
      "[deploy] Set an admin token first:  openssl rand -hex 24 | npx wrangler secret put EDGECOUNT_ADMIN_TOKENS\n" +
      "[deploy] and, for a public page, EDGECOUNT_PUBLIC_NAMESPACES in wrangler.toml (see docs/operations.md#production-checklist);\n" +
      "[deploy] or ask for open writes by name, where anyone could set, reset and delete every counter:  EDGECOUNT_OPEN=1 make deploy",
  );
  process.exit(1);
}

say(
  open
    ? "OPEN: anyone may set, reset and delete every counter (EDGECOUNT_OPEN=1)"
    : `tokens: ${tokens.join(", ")}`,
);
say(
  publicNamespaces.length
    ? `public counting (anyone may add 1 and read): ${publicNamespaces.join(", ")}`
    : "public counting: none (EDGECOUNT_PUBLIC_NAMESPACES is empty)",
);
say(
  `reads: ${flag("EDGECOUNT_PRIVATE_READS", "need a token", "public, in every namespace")}`,
);
say(`/v1/stats and /metrics: ${open ? "public" : "need an admin token"}`);
say(
  `/stream: ${flag("EDGECOUNT_PRIVATE_READS", "needs a token", "public, as reads are")}`,
);
say(
  `demo page at /: ${flag("EDGECOUNT_DEMO", "served (EDGECOUNT_DEMO in [vars])", "not served")}`,
);
const shellOnly = ["EDGECOUNT_PRIVATE_READS", "EDGECOUNT_DEMO"].filter(
  (name) =>
    process.env[name] !== undefined &&
    String(process.env[name]).trim() !== String(vars[name] ?? "").trim(),
);
if (shellOnly.length)
  say(
    `note: ${shellOnly.join(", ")} in the environment are not deployed (set them in [vars] of wrangler.toml)`,
  );
say(`CORS origins: ${vars.EDGECOUNT_CORS_ORIGINS ?? "*"}`);
// What Cloudflare keeps of each request beside the service's own storage (docs/days.md). Any
// switch that may be on is named: a nested one under a top-level `enabled = false` counts too.
const observability = config.observability;
const logs = [
  (observability?.enabled || observability?.logs?.enabled) && "Workers Logs",
  observability?.traces?.enabled && "Workers traces",
  config.logpush && "Logpush",
  config.tail_consumers?.length && "tail consumers",
].filter(Boolean);
say(
  logs.length
    ? `worker request logs: ${logs.join(", ")} keep each request's URL and headers (see docs/days.md)`
    : observability === undefined
      ? "worker request logs: as the Worker's settings on the account say (wrangler.toml has no [observability])"
      : "worker request logs: none ([observability] enabled = false, no Logpush, no tail consumers; the zone's own logs are set in its dashboard, see docs/days.md)",
);
say(
  `rate limit per client: ${rateLimit() > 0 ? `${rateLimit()}/s` : "off"}; reads of over 40 days' visitors: ${
    vars.EDGECOUNT_RATE_LIMIT !== undefined &&
    Number(vars.EDGECOUNT_RATE_LIMIT) === 0
      ? "off"
      : `${rateLimit() > 0 ? rateLimit() : 10}/s, a bucket of their own`
  }`,
);

const main = resolve(
  dirname(resolve(args.config)),
  config.main ?? "build/entry.js",
);
const files = [
  main,
  resolve(main, "../index.js"),
  resolve(main, "../index_bg.wasm"),
];
const raw = files.reduce((sum, file) => sum + statSync(file).size, 0);
const gzipped = files.reduce(
  (sum, file) => sum + gzipSync(readFileSync(file)).length,
  0,
);
const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
// Workers' limits on a compressed bundle: 3 MiB on the Free plan, 10 MiB on Paid.
say(
  `bundle: ${mib(raw)}, ${mib(gzipped)} gzipped (limits: 3 MiB on Workers Free, 10 MiB on Workers Paid)`,
);

const advised = ["EDGECOUNT_ADMIN_TOKENS"].filter((name) => !set(name));
const inVars = TOKEN_LISTS.filter(
  (name) => String(vars[name] ?? "").trim() !== "",
);
if (advised.length)
  say(
    `secrets still to set: ${advised.join(", ")} (npx wrangler secret put NAME)`,
  );
if (inVars.length)
  say(
    `warning: ${inVars.join(", ")} in [vars] are committed with wrangler.toml; set them as secrets instead`,
  );

if (args.deploy) {
  const deployArgs = ["deploy", "--config", args.config];
  if (open) deployArgs.push("--var", "EDGECOUNT_OPEN:1");
  else if (askedOpen)
    say(
      "EDGECOUNT_OPEN=1 is not passed on: tokens or public namespaces are configured",
    );
  say(`wrangler ${deployArgs.join(" ")}`);
  execFileSync("wrangler", deployArgs, { stdio: "inherit" });
}
