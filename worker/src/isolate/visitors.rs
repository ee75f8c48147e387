//! Who a public count comes from: a count in a public namespace sent by a known crawler or bot
//! (`edgecount_core::edge::bots`) without a configured token is answered as usual and not
//! counted. This isolate keeps how many were not, for `/v1/stats`.

use edgecount_core::edge::bots;
use edgecount_core::Namespace;

use crate::shared::config::Config;
use crate::shared::state;

/// Whether a count in `ns` from `user_agent` is to be answered and not counted: the namespace
/// is public, no token with more than the count right came with it, and the user agent is a
/// known bot. Counted when true.
pub fn leaves_uncounted(
    user_agent: Option<&str>,
    config: &Config,
    token: Option<&str>,
    ns: &Namespace,
) -> bool {
    let bot = is_visitor(config, token) && config.access.is_public(ns) && bots::is_bot(user_agent);
    if bot {
        state::with(|s| s.bots_not_counted.set(s.bots_not_counted.get() + 1));
    }
    bot
}

/// Whether a request with `token` is a visitor's: no token, or one any visitor may hold (a
/// count token, shipped in a page's source), rather than one with more than the count right.
pub fn is_visitor(config: &Config, token: Option<&str>) -> bool {
    token.is_none_or(|token| !config.access.is_private_token(token))
}

/// Counts from known bots this isolate answered without counting.
pub fn not_counted() -> u64 {
    state::with(|s| s.bots_not_counted.get())
}
