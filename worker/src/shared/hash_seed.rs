//! Seeds the core's hash tables ([`edgecount_core::hashing`]) from the runtime's random source,
//! once per Wasm instance and before any table is made: every entry point (a request to the
//! worker, a shard's creation) starts here. Without it every isolate would hash client-chosen
//! names with the same keys, computable from the published Wasm.
//!
//! Not at instantiation: the Workers runtime gives no random values outside a request.

use std::cell::Cell;

use wasm_bindgen::prelude::wasm_bindgen;
use worker::console_error;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues)]
    fn get_random_values(bytes: &mut [u8]);
}

thread_local! {
    /// Whether this Wasm instance has seeded. Apart from the isolate's state (`shared::state`):
    /// that holds tables hashed with the seed, so it is made after this is set.
    static SEEDED: Cell<bool> = const { Cell::new(false) };
}

/// Fills `bytes` from the runtime's random source (`crypto.getRandomValues`): a day's visitor
/// salt, say.
pub fn fill_random(bytes: &mut [u8]) {
    get_random_values(bytes);
}

/// Hands the core 64 random bits for its hash seed, the first time it is called in this Wasm
/// instance (a trap's restart makes a new instance, which seeds again).
pub fn seed_once() {
    if SEEDED.replace(true) {
        return;
    }
    let mut bytes = [0_u8; 8];
    get_random_values(&mut bytes);
    if !edgecount_core::hashing::seed(u64::from_le_bytes(bytes)) {
        console_error!("hash tables were made before the random seed: they hash with a predictable one");
    }
}
