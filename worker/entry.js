// The worker's entry module, over worker-build's output (index.js). scripts/build-worker.sh
// copies it next to index.js.
//
// index.js exports its classes wrapped in Proxies that, on every construction and on every
// method of every instance, check whether a trap has poisoned the Wasm instance and, if so,
// start a new one. That costs a Proxy, a wrapped function and an extra promise per call, on
// every request and every shard call. This module exports plain entry points instead and keeps
// the recovery: it notes a trap itself (a `WebAssembly.RuntimeError` thrown or rejected) and
// lets the Proxies restart the instance on the next request.
import { DurableObject } from "cloudflare:workers";
import worker, { Shard as ProxiedShard } from "./index.js";

// What index.js keeps about its Wasm instance: whether a trap poisoned it, and which instance
// is current (it counts up on every restart).
const instance = globalThis.__worker_init_state;

// The classes behind the Proxies (a Proxy passes `prototype` through to its target).
const WasmShard = ProxiedShard.prototype.constructor;
const fetchWasm = worker.prototype.fetch;

function noteTrap(error) {
  if (error instanceof WebAssembly.RuntimeError) instance.criticalError = true;
}

// A trap inside a request's later turns surfaces as an unhandled rejection.
addEventListener("unhandledrejection", (event) => noteTrap(event.reason));

// Constructing through index.js's Proxy restarts a poisoned instance.
function restartIfTrapped(ctx, env) {
  if (instance.criticalError) new worker(ctx, env);
}

function guarded(call) {
  try {
    return call();
  } catch (error) {
    noteTrap(error);
    throw error;
  }
}

// A shard's answer is handled by its caller, so a trap in its later turns is no unhandled
// rejection: note it on the way. (`runOps` answers at once when it can, a promise otherwise.)
function guardedAsync(call) {
  const answer = guarded(call);
  if (!(answer instanceof Promise)) return answer;
  return answer.catch((error) => {
    noteTrap(error);
    throw error;
  });
}

export default {
  fetch(request, env, ctx) {
    restartIfTrapped(ctx, env);
    return guarded(() => fetchWasm.call({ env, ctx }, request));
  },
};

// The shard: a Durable Object (the runtime offers RPC only to subclasses of DurableObject)
// holding the Wasm object, made again if the instance was restarted since.
export class Shard extends DurableObject {
  #wasm;
  #instanceId;

  constructor(ctx, env) {
    super(ctx, env);
    this.#current();
  }

  #current() {
    restartIfTrapped(this.ctx, this.env);
    if (this.#wasm === undefined || this.#instanceId !== instance.instanceId) {
      this.#wasm = new WasmShard(this.ctx, this.env);
      this.#instanceId = instance.instanceId;
    }
    return this.#wasm;
  }

  runOps(body) {
    return guardedAsync(() => this.#current().runOps(body));
  }

  stats(shard) {
    return guarded(() => this.#current().stats(shard));
  }

  placement(placement) {
    return guardedAsync(() => this.#current().placement(placement));
  }

  // A change of the shard count (see worker/src/shard/hand_over.rs).
  handOver(keys, from, to) {
    return guarded(() => this.#current().handOver(keys, from, to));
  }

  adopt(parcels, from, to) {
    return guarded(() => this.#current().adopt(parcels, from, to));
  }

  settleChange(from, to) {
    return guarded(() => this.#current().settleChange(from, to));
  }

  handedOver(from, to) {
    return guarded(() => this.#current().handedOver(from, to));
  }

  migrate(shard) {
    return guardedAsync(() => this.#current().migrate(shard));
  }

  watch(ns, key) {
    return guarded(() => this.#current().watch(ns, key));
  }

  alarm() {
    return guardedAsync(() => this.#current().alarm());
  }

  fetch(request) {
    return guardedAsync(() => this.#current().fetch(request));
  }
}
