//! A shard call's writes in one SQLite transaction, through the storage's `transactionSync`
//! (which workers-rs does not bind): the callback runs at once, and when it throws, every
//! write it made is rolled back.

use edgecount_core::shard::Atomic;
use edgecount_core::StoreResult;
use wasm_bindgen::prelude::{wasm_bindgen, JsValue};
use wasm_bindgen::JsCast;
use worker::State;

#[wasm_bindgen]
extern "C" {
    /// The Durable Object's storage, as far as its transactions go.
    pub type TransactionalStorage;

    #[wasm_bindgen(method, catch, js_name = transactionSync)]
    fn transaction_sync(
        this: &TransactionalStorage,
        body: &mut dyn FnMut() -> Result<JsValue, JsValue>,
    ) -> Result<JsValue, JsValue>;
}

/// A shard's transactions.
pub struct Transactions {
    storage: Option<TransactionalStorage>,
}

impl Transactions {
    /// The transactions of `state`'s storage.
    pub fn of(state: &State) -> Self {
        Self { storage: state.as_raw().storage().ok().map(JsCast::unchecked_into) }
    }
}

impl Atomic for Transactions {
    fn atomically<T>(&self, writes: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        let Some(storage) = &self.storage else {
            return Err("the shard's storage is not available".into());
        };
        let mut writes = Some(writes);
        let mut started = false;
        let mut outcome = None;
        let mut body = || {
            let Some(writes) = writes.take() else { return Ok(JsValue::UNDEFINED) };
            started = true;
            let written = writes();
            // Throwing is how the callback asks for the rollback.
            let thrown = written.as_ref().err().map(|detail| JsValue::from_str(&detail.to_string()));
            outcome = Some(written);
            thrown.map_or(Ok(JsValue::UNDEFINED), Err)
        };
        let committed = storage.transaction_sync(&mut body);
        match (committed, outcome) {
            (Ok(_), Some(written)) => written,
            (Err(_), Some(Err(detail))) => Err(detail),
            // The writes began and never came back: they trapped (a panic aborts). The
            // transaction is rolled back; the trap goes on up, as it would have without it,
            // since this instance cannot be trusted to go on.
            (Err(thrown), None) if started => wasm_bindgen::throw_val(thrown),
            (Err(thrown), _) => Err(format!("the transaction failed: {thrown:?}").into()),
            (Ok(_), None) => Err("the transaction did not run its writes".into()),
        }
    }
}
