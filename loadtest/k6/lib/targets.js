// How each system under test spells the same operations. edgecount and the Ehcache-style
// baseline share API v1 (the JavaScript floor speaks the part of it the benchmark uses); webdis maps Redis commands to URLs; nginx serves a fixed body.
import http from "k6/http";

const NS = "bench";
const JSON_HEADERS = { headers: { "content-type": "application/json" } };

const v1 = (base) => ({
  health: () => http.get(`${base}/v1/health`),
  get: (key) => http.get(`${base}/v1/counters/${NS}/k${key}`),
  incr: (key) => http.post(`${base}/v1/counters/${NS}/k${key}/incr`, null),
  incrOneWay: (key) =>
    http.post(`${base}/v1/counters/${NS}/k${key}/incr?async=1`, null),
  // Visitor n of the site: its address and user agent, as a browser's request carries them.
  pageView: (page, visitor) =>
    http.post(
      `${base}/v1/counters/pages/p${page}/incr?async=1&unique=1`,
      null,
      {
        headers: {
          "cf-connecting-ip": `10.${visitor >> 16}.${(visitor >> 8) & 255}.${visitor & 255}`,
          "user-agent": `Mozilla/5.0 (bench visitor ${visitor % 7})`,
        },
      },
    ),
  cacheGet: (key) => http.get(`${base}/v1/cache/${NS}/v${key}`),
  cachePut: (key, value) =>
    http.put(`${base}/v1/cache/${NS}/v${key}`, value, {
      headers: { "content-type": "application/octet-stream" },
    }),
  batch: (ops, query = "") =>
    http.post(
      `${base}/v1/batch${query}`,
      JSON.stringify({
        // Counter ops name keys k<n>, cache ops v<n>, as the single-key routes do.
        ops: ops.map(([op, key, value]) =>
          op.startsWith("cache_")
            ? { op, ns: NS, key: `v${key}`, ...(value ? { value } : {}) }
            : { op, ns: NS, key: `k${key}` },
        ),
      }),
      JSON_HEADERS,
    ),
});

const webdis = (base) => ({
  health: () => http.get(`${base}/PING`),
  get: (key) => http.get(`${base}/GET/${NS}:k${key}`),
  incr: (key) => http.get(`${base}/INCR/${NS}:k${key}`),
  cacheGet: (key) => http.get(`${base}/GET/${NS}:v${key}`),
  // webdis takes the last argument of a PUT from the body.
  cachePut: (key, value) => http.put(`${base}/SET/${NS}:v${key}`, value),
  batch: null,
});

const nginx = (base) => ({
  health: () => http.get(`${base}/`),
  get: () => http.get(`${base}/`),
  incr: null,
  cacheGet: null,
  cachePut: null,
  batch: null,
});

const jsHello = (base) => ({
  health: () => http.get(`${base}/`),
  // Any other path answers like an edgecount hot read (see the worker).
  get: (key) => http.get(`${base}/v1/counters/${NS}/k${key}`),
  incr: null,
  cacheGet: null,
  cachePut: null,
  batch: null,
});

export function target(system, base) {
  if (system === "js-hello-workerd") return jsHello(base);
  if (
    system.startsWith("edgecount") ||
    system === "ehcache" ||
    system === "js-floor-workerd"
  )
    return v1(base);
  if (system.startsWith("redis-webdis")) return webdis(base);
  if (system === "nginx-static") return nginx(base);
  throw new Error(`unknown system ${system}`);
}
