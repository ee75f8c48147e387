// The worker's entry module, over wasm-bindgen's glue (index.js; scripts/build-worker.sh builds
// both into build/).
//
// A trap (a Rust panic, with panic = "abort") poisons the Wasm instance: the glue then refuses
// every call. This module notes a trap (a `WebAssembly.RuntimeError` thrown or rejected) and
// starts a new instance before the next request or shard call, as workers-rs' worker-build
// shim does; unlike that shim it puts no Proxy around the classes and no wrapped function and
// extra promise around each call, which cost every request and every shard call.
import { DurableObject } from "cloudflare:workers";
import * as wasm from "./index.js";

// Whether a trap poisoned the instance, and which instance is current (counted up on every
// restart); kept by the worker crate.
const instance = wasm.__worker_init_state();

function noteTrap(error) {
  if (error instanceof WebAssembly.RuntimeError) instance.criticalError = true;
}

// A trap inside a request's later turns surfaces as an unhandled rejection.
addEventListener("unhandledrejection", (event) => noteTrap(event.reason));

function restartIfTrapped() {
  if (!instance.criticalError) return;
  console.log("restarting the Wasm instance after a trap");
  wasm.__wbg_reset_state();
  instance.criticalError = false;
  instance.instanceId++;
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
    restartIfTrapped();
    return guarded(() => wasm.fetch(request, env, ctx));
  },
};

// The Wasm object a Durable Object holds, by a symbol, so that RPC (which calls methods by
// name) cannot reach it.
const current = Symbol("current");

// A Durable Object (the runtime offers RPC only to subclasses of DurableObject) holding an
// object of the Wasm class `Class`, made again if the instance was restarted since.
class WasmObject extends DurableObject {
  #Class;
  #wasm;
  #instanceId;

  constructor(ctx, env, Class) {
    super(ctx, env);
    this.#Class = Class;
  }

  [current]() {
    restartIfTrapped();
    if (this.#wasm === undefined || this.#instanceId !== instance.instanceId) {
      this.#wasm = new this.#Class(this.ctx, this.env);
      this.#instanceId = instance.instanceId;
    }
    return this.#wasm;
  }

  fetch(request) {
    return guardedAsync(() => this[current]().fetch(request));
  }
}

// The shard: the authority for the keys that hash to it (worker/src/shard/).
export class Shard extends WasmObject {
  constructor(ctx, env) {
    super(ctx, env, wasm.Shard);
    this[current]();
  }

  runOps(body) {
    return guardedAsync(() => this[current]().runOps(body));
  }

  stats(shard) {
    return guarded(() => this[current]().stats(shard));
  }

  placement(placement) {
    return guardedAsync(() => this[current]().placement(placement));
  }

  // A change of the shard count (see worker/src/shard/resharding/). The two calls that carry
  // keys are named for the protocol that pages a key's records: a shard of a release with
  // another protocol has neither name, so a call between the two releases fails, and is tried
  // again later, instead of being misread.
  handOverPaged(keys, after, from, to) {
    return guarded(() => this[current]().handOverPaged(keys, after, from, to));
  }

  adoptPaged(parcels, from, to) {
    return guardedAsync(() => this[current]().adoptPaged(parcels, from, to));
  }

  settleChange(from, to) {
    return guarded(() => this[current]().settleChange(from, to));
  }

  handedOver(from, to) {
    return guarded(() => this[current]().handedOver(from, to));
  }

  migrate(shard) {
    return guardedAsync(() => this[current]().migrate(shard));
  }

  exportPage(after, ns, most, budget) {
    return guarded(() => this[current]().exportPage(after, ns, most, budget));
  }

  namespacePart(ns, from, to, top) {
    return guarded(() => this[current]().namespacePart(ns, from, to, top));
  }

  import(parcels, respectOwners, cacheBytes) {
    return guardedAsync(() =>
      this[current]().import(parcels, respectOwners, cacheBytes),
    );
  }

  watch(ns, key, client) {
    return guarded(() => this[current]().watch(ns, key, client));
  }

  alarm() {
    return guardedAsync(() => this[current]().alarm());
  }
}

// A relay (see worker/src/relay.rs): takes isolates' one-way flushes for a shard and forwards
// their sums. It stores nothing.
export class Relay extends WasmObject {
  constructor(ctx, env) {
    super(ctx, env, wasm.Relay);
  }

  relayOps(body) {
    return guardedAsync(() => this[current]().relayOps(body));
  }
}
