//! A counter's own rules, kept in its row beside its value: whether its value may be set, the
//! amounts an update may add, and the hash of its admin key. They come from the CountAPI- and
//! Abacus-compatible routes (see [`crate::compat`]); a counter that never had rules follows
//! [`CounterSettings::default`], CountAPI's defaults for a key that `/hit` created.
//!
//! The shard checks them ([`Guard::check`]) in the same turn as the write they guard, so no
//! other write can come between the check and the change.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::CoreError;

/// The SHA-256 of an admin key: the shard stores this, never the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct AdminKeyHash([u8; 32]);

impl AdminKeyHash {
    /// The hash of the key as presented.
    #[must_use]
    pub fn of(key: &str) -> Self {
        Self(Sha256::digest(key.as_bytes()).into())
    }

    /// Whether `other` is this hash, in time that does not depend on where they differ.
    #[must_use]
    pub fn matches(&self, other: &AdminKeyHash) -> bool {
        bool::from(self.0.ct_eq(&other.0))
    }
}

impl From<AdminKeyHash> for String {
    fn from(hash: AdminKeyHash) -> Self {
        hash.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl TryFrom<String> for AdminKeyHash {
    type Error = String;

    fn try_from(hex: String) -> Result<Self, Self::Error> {
        let bad = || format!("`{hex}` is not a 64-digit hex SHA-256");
        if hex.len() != 64 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks(2)) {
            let digits = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(digits, 16).map_err(|_| bad())?;
        }
        Ok(Self(bytes))
    }
}

/// A counter's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterSettings {
    /// Whether `/set` may replace the value (CountAPI's `enable_reset`).
    pub enable_reset: bool,
    /// The smallest amount `/update` may add; at most 0.
    pub update_lowerbound: i64,
    /// The largest amount `/update` may add; at least 0.
    pub update_upperbound: i64,
    /// The hash of the counter's admin key, if it was created with one (Abacus's `/create`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_key_hash: Option<AdminKeyHash>,
}

impl Default for CounterSettings {
    /// CountAPI's defaults: no reset, updates of -1 to 1, no admin key.
    fn default() -> Self {
        Self { enable_reset: false, update_lowerbound: -1, update_upperbound: 1, admin_key_hash: None }
    }
}

/// What must hold before a guarded write may change a counter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "guard", rename_all = "snake_case")]
pub enum Guard {
    /// The counter allows its value to be set (`enable_reset`).
    Reset,
    /// The amount added lies within the counter's update bounds.
    Bounds,
    /// The caller holds the counter's admin key.
    AdminKey { hash: AdminKeyHash },
    /// The caller holds a write token the operator configured for the counter's namespace (the
    /// worker checked it): it may change any counter there, admin key or not.
    Operator,
}

impl Guard {
    /// Checks the guard against a counter's `settings` for a write that adds `amount` (0 for a
    /// write that adds nothing).
    ///
    /// # Errors
    /// [`CoreError::ResetDisabled`], [`CoreError::OutOfBounds`], [`CoreError::NoAdminKey`] or
    /// [`CoreError::WrongAdminKey`]: the write must then change nothing.
    pub fn check(&self, settings: &CounterSettings, amount: i64) -> Result<(), CoreError> {
        match self {
            Self::Reset if settings.enable_reset => Ok(()),
            Self::Reset => Err(CoreError::ResetDisabled),
            Self::Bounds if (settings.update_lowerbound..=settings.update_upperbound).contains(&amount) => {
                Ok(())
            }
            Self::Bounds => Err(CoreError::OutOfBounds {
                lower: settings.update_lowerbound,
                upper: settings.update_upperbound,
            }),
            Self::Operator => Ok(()),
            Self::AdminKey { hash } => match &settings.admin_key_hash {
                None => Err(CoreError::NoAdminKey),
                Some(stored) if stored.matches(hash) => Ok(()),
                Some(_) => Err(CoreError::WrongAdminKey),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_countapis() {
        let defaults = CounterSettings::default();
        assert_eq!(Guard::Reset.check(&defaults, 0), Err(CoreError::ResetDisabled));
        assert_eq!(Guard::Bounds.check(&defaults, 1), Ok(()));
        assert_eq!(Guard::Bounds.check(&defaults, -1), Ok(()));
        assert_eq!(Guard::Bounds.check(&defaults, 2), Err(CoreError::OutOfBounds { lower: -1, upper: 1 }));
        let admin = Guard::AdminKey { hash: AdminKeyHash::of("k") };
        assert_eq!(admin.check(&defaults, 0), Err(CoreError::NoAdminKey));
        assert_eq!(Guard::Operator.check(&defaults, 0), Ok(()));
    }

    #[test]
    fn bounds_are_inclusive_at_both_ends_and_hold_for_extreme_amounts() {
        let settings =
            CounterSettings { update_lowerbound: i64::MIN, update_upperbound: 5, ..Default::default() };
        assert_eq!(Guard::Bounds.check(&settings, i64::MIN), Ok(()));
        assert_eq!(Guard::Bounds.check(&settings, 5), Ok(()));
        assert!(Guard::Bounds.check(&settings, 6).is_err());
        assert!(Guard::Bounds.check(&settings, i64::MAX).is_err());
    }

    #[test]
    fn only_the_right_admin_key_passes() {
        let settings =
            CounterSettings { admin_key_hash: Some(AdminKeyHash::of("right")), ..Default::default() };
        assert_eq!(Guard::AdminKey { hash: AdminKeyHash::of("right") }.check(&settings, 0), Ok(()));
        assert_eq!(
            Guard::AdminKey { hash: AdminKeyHash::of("wrong") }.check(&settings, 0),
            Err(CoreError::WrongAdminKey)
        );
    }

    #[test]
    fn a_hash_travels_as_hex_and_bad_hex_is_refused() {
        let hash = AdminKeyHash::of("token");
        let text = serde_json::to_string(&hash).unwrap();
        assert_eq!(text.len(), 66);
        assert_eq!(serde_json::from_str::<AdminKeyHash>(&text).unwrap(), hash);
        assert!(serde_json::from_str::<AdminKeyHash>("\"zz\"").is_err());
        assert!(serde_json::from_str::<AdminKeyHash>(&format!("\"{}\"", "g".repeat(64))).is_err());
        assert!(serde_json::from_str::<AdminKeyHash>(&format!("\"{}\"", "é".repeat(32))).is_err());
    }
}
