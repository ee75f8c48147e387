//! Who a request is charged to: a configured token, an IPv4 address, or an IPv6 /64.

use std::net::IpAddr;

use xxhash_rust::xxh3::xxh3_64;

/// Who a request is counted against.
///
/// Addresses are grouped as they are handed out: an IPv4 address is one client, an IPv6 client
/// is its /64, because a subscriber or a server gets a whole /64 and may send each request from
/// a fresh address in it. An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is its IPv4 address.
/// Whatever does not parse as an address shares one bucket, so garbage cannot buy fresh ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientId(u64);

impl ClientId {
    /// The client behind a bearer token (the token is hashed, never kept).
    #[must_use]
    pub fn token(token: &str) -> Self {
        Self::tagged("token", token.as_bytes())
    }

    /// A client known only by its address (`CF-Connecting-IP`; empty when there is none).
    #[must_use]
    pub fn address(address: &str) -> Self {
        match address.trim().parse::<IpAddr>() {
            Ok(ip) => Self::ip(ip),
            Err(_) => Self::tagged("unparsable address", &[]),
        }
    }

    fn ip(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self::tagged("ipv4", &v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self::tagged("ipv4", &v4.octets()),
                None => Self::tagged("ipv6/64", &v6.octets()[..8]),
            },
        }
    }

    /// The client as text, to name it to a shard (see [`crate::shard::watchers`]): a hash, not
    /// the address or token.
    #[must_use]
    pub fn label(self) -> String {
        format!("{:016x}", self.0)
    }

    /// The tag keeps the kinds apart: a token can never share a bucket with an address.
    fn tagged(tag: &str, bytes: &[u8]) -> Self {
        Self(xxh3_64(&[tag.as_bytes(), b"\0", bytes].concat()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_addresses_in_one_slash_64_are_one_client() {
        let first = ClientId::address("2001:db8:1:2::1");
        assert_eq!(first, ClientId::address("2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_eq!(first, ClientId::address("2001:0db8:0001:0002:abcd::9"));
    }

    #[test]
    fn ipv6_addresses_in_neighbouring_slash_64s_are_different_clients() {
        assert_ne!(ClientId::address("2001:db8:1:2::1"), ClientId::address("2001:db8:1:3::1"));
        assert_ne!(ClientId::address("2001:db8:1:2::1"), ClientId::address("2001:db9:1:2::1"));
    }

    #[test]
    fn ipv4_addresses_are_each_their_own_client() {
        assert_ne!(ClientId::address("192.0.2.1"), ClientId::address("192.0.2.2"));
        assert_eq!(ClientId::address("192.0.2.1"), ClientId::address(" 192.0.2.1 "));
    }

    #[test]
    fn an_ipv4_mapped_ipv6_address_is_its_ipv4_address() {
        assert_eq!(ClientId::address("::ffff:192.0.2.1"), ClientId::address("192.0.2.1"));
        assert_eq!(ClientId::address("::ffff:c000:201"), ClientId::address("192.0.2.1"));
        // Not the whole ::ffff:0:0/96 as one /64: each mapped address stays its own client.
        assert_ne!(ClientId::address("::ffff:192.0.2.1"), ClientId::address("::ffff:192.0.2.2"));
    }

    #[test]
    fn unparsable_and_missing_addresses_share_one_client() {
        let shared = ClientId::address("");
        for garbage in ["unknown", "192.0.2.1:443", "fe80::1%eth0", "2001:db8::1::2", "999.0.0.1"] {
            assert_eq!(ClientId::address(garbage), shared, "{garbage}");
        }
        assert_ne!(ClientId::address("192.0.2.1"), shared);
    }

    #[test]
    fn a_token_is_never_the_same_client_as_an_address() {
        assert_ne!(ClientId::token("192.0.2.1"), ClientId::address("192.0.2.1"));
        assert_ne!(ClientId::token(""), ClientId::address(""));
        assert_eq!(ClientId::token("t"), ClientId::token("t"));
    }
}
