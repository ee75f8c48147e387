//! Abacus's `GET /stream/:ns/:key`: server-sent events of a counter's value, from the shard
//! that owns it (`data: {"value":N}` now and after each write, until the counter is deleted or
//! the reader leaves).
//!
//! Bounded at both ends: a shard serves at most
//! [`MAX_WATCHERS_PER_SHARD`](edgecount_core::shard::watchers::MAX_WATCHERS_PER_SHARD) streams
//! and an isolate passes on at most [`MAX_STREAMS_PER_ISOLATE`], at most
//! [`MAX_STREAMS_PER_CLIENT`] of them for one client (an address, an IPv6 /64); the shard also
//! serves one client at most
//! [`MAX_WATCHERS_PER_CLIENT`](edgecount_core::shard::watchers::MAX_WATCHERS_PER_CLIENT),
//! whichever isolates its streams come through. So one client cannot take every place; past
//! any of them the answer is 429. A comment line after every `EDGECOUNT_STREAM_KEEPALIVE` seconds of silence keeps idle
//! connections from being closed on the way, and is how a reader that hung up is noticed.

use edgecount_core::compat::CompatError;
use edgecount_core::edge::rate_limit::ClientId;
use futures_util::future::{select, Either};
use futures_util::StreamExt;
use wasm_bindgen::JsCast;
use worker::{js_sys, Env};

use crate::shared::tasks;

use crate::http::message::JsStream;
use crate::http::target::Target;
use crate::shared::config::Config;
use crate::shared::shard_client::{self, WatchRefusal};
use crate::shared::state;

/// Most streams one isolate keeps open: a few shards' worth.
pub const MAX_STREAMS_PER_ISOLATE: usize = 1024;
/// Most streams one client keeps open through an isolate, over all shards: a few shards'
/// worth of the 8 each shard serves a client
/// ([`MAX_WATCHERS_PER_CLIENT`](edgecount_core::shard::watchers::MAX_WATCHERS_PER_CLIENT)).
pub const MAX_STREAMS_PER_CLIENT: usize = 32;
const KEEPALIVE_LINE: &[u8] = b": keepalive\n\n";

/// One stream counted against the isolate's and its client's bounds while it lives.
struct Opened {
    client: ClientId,
}

impl Opened {
    fn claim(client: ClientId) -> Option<Self> {
        state::with(|s| {
            let room = s.open_streams.get() < MAX_STREAMS_PER_ISOLATE
                && s.streams_by_client.borrow().get(&client).copied().unwrap_or(0) < MAX_STREAMS_PER_CLIENT;
            if !room {
                return None;
            }
            s.open_streams.set(s.open_streams.get() + 1);
            *s.streams_by_client.borrow_mut().entry(client).or_insert(0) += 1;
            Some(Self { client })
        })
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        state::with(|s| {
            s.open_streams.set(s.open_streams.get().saturating_sub(1));
            let mut map = s.streams_by_client.borrow_mut();
            if let Some(count) = map.get_mut(&self.client) {
                *count -= 1;
                if *count == 0 {
                    map.remove(&self.client);
                }
            }
        });
    }
}

fn too_many() -> CompatError {
    CompatError::new(429, "Too many open streams; try again later.")
}

/// The event stream of `target`'s counter.
///
/// # Errors
/// 404 for a counter that does not exist, 429 past the bounds, 500 for an unreachable shard.
pub async fn open(
    env: &Env,
    config: &Config,
    target: &Target,
    client: ClientId,
) -> Result<JsStream, CompatError> {
    let keepalive_ms = config.stream_keepalive_s * 1000;
    let opened = Opened::claim(client).ok_or_else(too_many)?;
    let raw = shard_client::watch(env, target.shard, target.ns.as_str(), target.key.as_str(), client)
        .await
        .map_err(|refusal| match refusal {
        WatchRefusal::NotFound => CompatError::new(404, "Key not found"),
        WatchRefusal::TooManyStreams => too_many(),
        WatchRefusal::Unavailable => CompatError::new(500, "Failed to get data. Try again later."),
    })?;
    let events = wasm_streams::ReadableStream::from_raw(raw.unchecked_into()).into_stream();
    // Each step waits for the next event or the keepalive, whichever comes first; the shard's
    // stream keeps a read in flight across a keepalive, so no event is lost. `opened` lives as
    // long as the stream does: the reader leaving drops both.
    let with_keepalive =
        futures_util::stream::unfold((events, opened), move |(mut events, opened)| async move {
            let step = match select(events.next(), Box::pin(tasks::sleep(keepalive_ms))).await {
                Either::Left((Some(Ok(chunk)), _)) => Some(chunk),
                Either::Left(_) => None,
                Either::Right(_) => Some(js_sys::Uint8Array::from(KEEPALIVE_LINE).into()),
            };
            step.map(|chunk| (Ok(chunk), (events, opened)))
        });
    Ok(JsStream(wasm_streams::ReadableStream::from_stream(with_keepalive).into_raw().into()))
}
