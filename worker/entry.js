// The worker's entry module: worker-build's output (index.js) with the Shard class made a
// subclass of the runtime's DurableObject. The runtime offers RPC only to such classes, and the
// worker calls its shards over RPC (`runOps`), which costs less than a `fetch` per call.
// scripts/build-worker.sh copies this file next to index.js.
import { DurableObject } from "cloudflare:workers";
import worker, { Shard } from "./index.js";

Object.setPrototypeOf(Shard.prototype, DurableObject.prototype);
Object.setPrototypeOf(Shard, DurableObject);

export { Shard };
export default worker;
