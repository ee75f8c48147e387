// The floor for a request on workerd: a JavaScript worker that answers a fixed JSON body, as
// small as edgecount's /v1/health answer. The benchmark's `health` scenario compares
// edgecount's Rust request path with it.
export default {
  async fetch() {
    return new Response('{"status":"ok"}', {
      headers: { "content-type": "application/json; charset=utf-8" },
    });
  },
};
