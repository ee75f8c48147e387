//! Known crawlers and bots, told apart by their user agent, so that a public count is a count
//! of people (as GoatCounter, Plausible and Umami count). The patterns are the `isbot` crate's
//! maintained list, compiled into one regular expression once per isolate, on first use.

use std::sync::OnceLock;

use isbot::Bots;

fn known_bots() -> &'static Bots {
    static BOTS: OnceLock<Bots> = OnceLock::new();
    BOTS.get_or_init(Bots::default)
}

/// Whether `user_agent` is a known crawler or bot. A request without one is taken as a
/// visitor: browsers always send it, and a script that leaves it out could as well send a
/// browser's.
#[must_use]
pub fn is_bot(user_agent: Option<&str>) -> bool {
    user_agent.is_some_and(|agent| !agent.trim().is_empty() && known_bots().is_bot(agent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crawlers_are_bots_and_browsers_are_not() {
        for agent in [
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "curl/8.5.0",
            "python-requests/2.31.0",
        ] {
            assert!(is_bot(Some(agent)), "{agent}");
        }
        for agent in [
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        ] {
            assert!(!is_bot(Some(agent)), "{agent}");
        }
        assert!(!is_bot(None));
        assert!(!is_bot(Some("")));
    }
}
