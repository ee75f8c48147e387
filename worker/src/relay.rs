//! The `Relay` Durable Object: a shell over `edgecount_core::relay`, between the isolates'
//! one-way flushes and a shard. Isolates send a shard's flushes to one of its
//! `EDGECOUNT_RELAYS` relays; the relay merges them in memory and forwards the sums to the
//! shard once `EDGECOUNT_RELAY_INTERVAL_MS` is over, with the flusher isolates use
//! (`shared::one_way_flusher`). It stores nothing: its sums die with it (see the core module
//! for what that loses), and an idle relay costs nothing.
//!
//! It uses only `shared/`: nothing of the front's nor of the shard's code.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use edgecount_core::edge::one_way::OneWayBuffer;
use edgecount_core::relay::Relay as RelayState;
use edgecount_core::shard::protocol::{Placed, ShardRequest, ShardResponse};
use edgecount_core::shard::refusal::Refusal;
use edgecount_core::{CoreError, OpResult, ShardId};
use wasm_bindgen::prelude::{wasm_bindgen, JsValue};
use worker::{durable_object, js_sys, DurableObject, Env, Request, Response, Result, State};

use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::{Config, DEFAULT_RELAY};
use crate::shared::one_way_flusher::{self, random_name, FlushSite};
use crate::shared::{shard_client, tasks};

#[durable_object]
pub struct Relay {
    site: Rc<RelaySite>,
}

/// What a relay holds, and where it sends it.
struct RelaySite {
    env: Env,
    relay: RefCell<RelayState>,
    /// Where the isolates placed the keys this relay takes (its name says so too, see
    /// `edgecount_core::relay::object_name`): known from the first flush, and what it forwards
    /// with, so that the shard places them as their isolates did.
    placed: Cell<Option<Placed>>,
    /// Names this relay's flushes to its shard: random, made again with the object, so that a
    /// relay started again never reuses a number the shard has a record of.
    name: String,
}

#[wasm_bindgen(
    wasm_bindgen = worker::wasm_bindgen,
    wasm_bindgen_futures = worker::wasm_bindgen_futures,
    js_sys = worker::js_sys
)]
impl Relay {
    /// Takes a JSON one-way flush ([`ShardRequest`] under a flush receipt) and answers the JSON
    /// [`ShardResponse`], one result per op; a rejected promise for a request that is not a
    /// flush or names another shard, or a flush that would not fit (`shard_overloaded`, sent
    /// again later by its isolate).
    #[wasm_bindgen(js_name = relayOps)]
    pub fn relay_ops_rpc(&self, body: &str) -> JsValue {
        let taken = serde_json::from_str::<ShardRequest>(body)
            .map_err(|_| Refusal::from(CoreError::InvalidBody { reason: "is not a shard request".into() }))
            .and_then(|request| self.site.take(&request));
        match taken {
            Ok(results) => {
                JsValue::from_str(&serde_json::to_string(&ShardResponse { results }).unwrap_or_default())
            }
            Err(refused) => js_sys::Promise::reject(&JsValue::from_str(&refused.message())).into(),
        }
    }
}

impl RelaySite {
    /// Takes `request` whole, and wakes a flusher when the buffer asks for one.
    fn take(self: &Rc<Self>, request: &ShardRequest) -> std::result::Result<Vec<OpResult>, Refusal> {
        let refused = |reason: &str| Refusal::from(CoreError::InvalidBody { reason: reason.into() });
        let placed = request.placed.ok_or_else(|| refused("says not where its keys were placed"))?;
        if self.placed.get().is_some_and(|kept| kept != placed) {
            return Err(refused("was placed under another shard count than this relay's"));
        }
        self.placed.set(Some(placed));
        let shard = ShardId(placed.shard);
        let (results, wake) = self.relay.borrow_mut().take(request, shard, now_ms())?;
        if wake {
            let site = Rc::clone(self);
            // A relay's tasks run as long as it lives: no request needs to wait on this one.
            let _running = tasks::spawn(async move { one_way_flusher::run(&*site, shard).await });
        }
        Ok(results)
    }
}

impl FlushSite for RelaySite {
    fn with_buffer<T>(&self, f: impl FnOnce(&mut OneWayBuffer) -> T) -> T {
        f(self.relay.borrow_mut().buffer())
    }

    fn sender(&self) -> String {
        self.name.clone()
    }

    async fn send(
        &self,
        shard: ShardId,
        request: &ShardRequest,
    ) -> std::result::Result<Vec<OpResult>, ApiError> {
        // Placed as the isolates placed them, whatever this relay's own configuration says.
        let request = ShardRequest { placed: self.placed.get(), ..request.clone() };
        shard_client::execute_request(&self.env, shard, &request).await
    }
}

impl DurableObject for Relay {
    fn new(_state: State, env: Env) -> Self {
        // Vars that do not parse refuse every front request; the relay then keeps the defaults.
        let limits = Config::for_isolate(&env).map_or(DEFAULT_RELAY, |config| config.relay);
        Self {
            site: Rc::new(RelaySite {
                env,
                relay: RefCell::new(RelayState::new(limits)),
                placed: Cell::new(None),
                name: random_name(),
            }),
        }
    }

    /// Isolates reach relays over RPC only (`relayOps`); this door stays shut.
    async fn fetch(&self, _req: Request) -> Result<Response> {
        Response::error("relays answer over RPC only", 404)
    }
}
