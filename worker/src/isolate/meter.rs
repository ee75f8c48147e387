//! Rate limits per client, kept in this isolate: each request is charged to its client's token
//! bucket (`edgecount_core::edge::rate_limit`) before it does any work, and its answer carries the
//! `RateLimit-*` figures.
//!
//! A client is its bearer token when the token is one of the configured ones, else its address
//! (`CF-Connecting-IP`, which Cloudflare sets and a client cannot forge), an IPv6 address by its
//! /64. Unknown tokens and count tokens count as the address, so inventing tokens does not buy
//! fresh buckets and a count token's visitors do not share one. The buckets live per isolate, so
//! a client spread over many edge locations may get more in total; the limit protects each
//! isolate and the shards behind it.

use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::state;
use edgecount_core::edge::rate_limit::{ClientId, ClientLimiter, Decision, RateLimit, RequestCharge};

/// The charges made for one request, so its answer can carry the figures.
pub struct Meter {
    request: RequestCharge,
    last: Option<Decision>,
}

impl Meter {
    /// The meter for a request from `client_address` sent with `token`.
    pub fn for_request(client_address: Option<&str>, config: &Config, token: Option<&str>) -> Self {
        let client = match token {
            // A count token is in pages' source, shared by every visitor: they are counted apart.
            Some(token) if config.access.is_private_token(token) => ClientId::token(token),
            _ => ClientId::address(client_address.unwrap_or_default()),
        };
        Self { request: RequestCharge::new(client), last: None }
    }

    /// Charges the request as one of `ops` ops: every request as one on arrival, a batch again
    /// once its ops are counted. What it paid already is part of its cost (one per op, at most
    /// the burst), so a batch of any size fits a full bucket. Free when no limit is configured.
    ///
    /// # Errors
    /// [`ApiError::RateLimited`] when the client's bucket holds less than is due.
    pub fn charge(&mut self, config: &Config, ops: usize) -> Result<(), ApiError> {
        let Some(limit) = config.rate_limit else { return Ok(()) };
        self.charge_under(limit, ops)
    }

    /// Charges a read of visitors as `ops` requests (`visitors_read_cost` of its days) to the
    /// client's bucket for such reads, [`Config::visitors_rate_limit`], kept apart from the
    /// bucket of every other request: a read of many days may merge a sketch a day on its
    /// shard, and any client may send one, so it is limited even where nothing else is, while
    /// a count or another read never waits for it. A read that costs one (40 days or fewer) paid
    /// its one on arrival and is not charged here.
    ///
    /// # Errors
    /// [`ApiError::RateLimited`] when the client's bucket holds less than is due.
    pub fn charge_visitors(&mut self, config: &Config, ops: usize) -> Result<(), ApiError> {
        let Some(limit) = config.visitors_rate_limit.filter(|_| ops > 1) else { return Ok(()) };
        let mut request = RequestCharge::new(self.request.client());
        let charged = state::with(|s| {
            s.visitor_rate_limits.borrow_mut().get_or_insert_with(|| ClientLimiter::new(limit)).charge(
                &mut request,
                ops,
                now_ms(),
            )
        });
        self.decided(charged)
    }

    fn charge_under(&mut self, limit: RateLimit, ops: usize) -> Result<(), ApiError> {
        // The configuration is read once per isolate (`Config::for_isolate`), so the limit
        // the buckets were made for is the limit still in force.
        let charged = state::with(|s| {
            s.rate_limits.borrow_mut().get_or_insert_with(|| ClientLimiter::new(limit)).charge(
                &mut self.request,
                ops,
                now_ms(),
            )
        });
        self.decided(charged)
    }

    fn decided(&mut self, charged: Option<Decision>) -> Result<(), ApiError> {
        let Some(decision) = charged else { return Ok(()) };
        self.last = Some(decision);
        if decision.allowed {
            Ok(())
        } else {
            Err(ApiError::RateLimited(decision))
        }
    }

    /// The `RateLimit-*` headers of the latest charge, if any.
    #[must_use]
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        self.last.map_or_else(Vec::new, |decision| {
            vec![
                ("ratelimit-limit", decision.limit.to_string()),
                ("ratelimit-remaining", decision.remaining.to_string()),
                ("ratelimit-reset", decision.reset_s.to_string()),
            ]
        })
    }
}
