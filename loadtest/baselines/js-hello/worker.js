// The floor for a request on workerd: a JavaScript worker that answers a fixed JSON body, as
// small as edgecount's /v1/health answer. The benchmark's `health` scenario compares
// edgecount's Rust request path with it.
//
// Any other path gets the answer of an edgecount hot read instead: a counter's JSON with the
// headers edgecount sends on an edge hit (caching, CORS, the shard). Its `hot` row shows what
// those headers cost the runtime alone, beside edgecount's hot read, which is still judged
// against the plain hello world.
const HEALTH_HEADERS = { "content-type": "application/json; charset=utf-8" };
const HOT_HEADERS = {
  "content-type": "application/json; charset=utf-8",
  "access-control-allow-origin": "*",
  "access-control-expose-headers":
    "X-Edgecount-Shard, ETag, X-Cache, Age, Idempotent-Replayed, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset",
  age: "0",
  "cache-control": "public, max-age=1",
  "cache-tag": "ec-ns:bench",
  etag: '"0.0"',
  vary: "Accept",
  "x-cache": "HIT",
  "x-edgecount-shard": "13",
};

export default {
  async fetch(request) {
    if (new URL(request.url).pathname === "/") {
      return new Response('{"status":"ok"}', { headers: HEALTH_HEADERS });
    }
    return new Response('{"ns":"bench","key":"k1","value":0,"exists":false}', {
      headers: HOT_HEADERS,
    });
  },
};
