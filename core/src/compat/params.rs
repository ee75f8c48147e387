//! The query parameters of the compatible routes, read as CountAPI and Abacus read them.
//!
//! Unknown parameters are ignored (cache-busting suffixes keep working); a known one given
//! twice is refused, as on API v1, since either reading could be wrong.

use crate::compat::{CompatError, DEFAULT_LOWERBOUND, DEFAULT_UPPERBOUND};
use crate::http::badge::{parse_color, parse_label};
use crate::http::query::read_known_parameters;
use crate::number::parse_i64;
use crate::CoreError;

/// Longest JSONP callback name.
pub const MAX_CALLBACK_LEN: usize = 128;

/// `GET /create?namespace=&key=&value=&enable_reset=&update_lowerbound=&update_upperbound=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateParams {
    pub namespace: Option<String>,
    pub key: Option<String>,
    pub value: i64,
    pub enable_reset: bool,
    pub update_lowerbound: i64,
    pub update_upperbound: i64,
}

impl CreateParams {
    /// # Errors
    /// CountAPI's messages: `update_upperbound must be positive`,
    /// `update_lowerbound must be negative`, or which number is malformed.
    pub fn parse(query: &str) -> Result<Self, CompatError> {
        let mut parsed = Self {
            namespace: None,
            key: None,
            value: 0,
            enable_reset: false,
            update_lowerbound: DEFAULT_LOWERBOUND,
            update_upperbound: DEFAULT_UPPERBOUND,
        };
        let names = ["namespace", "key", "value", "enable_reset", "update_lowerbound", "update_upperbound"];
        read_known_parameters(query, &names, |slot, value| {
            match slot {
                0 => parsed.namespace = Some(value.to_owned()),
                1 => parsed.key = Some(value.to_owned()),
                2 => parsed.value = parse_i64("value", value)?,
                3 => parsed.enable_reset = matches!(value, "1" | "true"),
                4 => parsed.update_lowerbound = parse_i64("update_lowerbound", value)?,
                _ => parsed.update_upperbound = parse_i64("update_upperbound", value)?,
            }
            Ok(())
        })
        .map_err(|error| CompatError::bad_request(&error))?;
        if parsed.update_upperbound < 0 {
            return Err(CompatError::new(400, "update_upperbound must be positive"));
        }
        if parsed.update_lowerbound > 0 {
            return Err(CompatError::new(400, "update_lowerbound must be negative"));
        }
        Ok(parsed)
    }
}

/// The badge of Abacus's `/hit|get/:ns/:key/shield?text=&bgcolor=&textcolor=`, drawn as
/// edgecount's badge: `text` is its label, `bgcolor` and `textcolor` its value's colours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shield {
    pub text: String,
    pub bgcolor: String,
    pub textcolor: String,
}

impl Shield {
    /// # Errors
    /// 400 for a label or colour the badge cannot draw, or one given twice.
    pub fn parse(query: &str) -> Result<Self, CompatError> {
        let mut parsed =
            Self { text: "counter".to_owned(), bgcolor: "#007ec6".to_owned(), textcolor: "#fff".to_owned() };
        read_known_parameters(query, &["text", "bgcolor", "textcolor"], |slot, value| {
            match slot {
                0 => parsed.text = parse_label(value)?,
                1 => parsed.bgcolor = parse_color("bgcolor", value)?,
                _ => parsed.textcolor = parse_color("textcolor", value)?,
            }
            Ok(())
        })
        .map_err(|error| CompatError::bad_request(&error))?;
        Ok(parsed)
    }
}

/// The one number a route takes (`value` of `/set`, `amount` of `/update`, `initializer` of
/// Abacus's `/create`), or `default` when it is optional and absent.
///
/// # Errors
/// 400 when it is missing (and required), malformed, or given twice.
pub fn number(query: &str, name: &str, default: Option<i64>) -> Result<i64, CompatError> {
    let mut found = None;
    read_known_parameters(query, &[name], |_, value| {
        found = Some(parse_i64(name, value)?);
        Ok(())
    })
    .map_err(|error| CompatError::bad_request(&error))?;
    found.or(default).ok_or_else(|| CompatError::new(400, &format!("`{name}` is required")))
}

/// The admin token of an Abacus route given as `?token=`, if any.
///
/// # Errors
/// 400 when it is given twice.
pub fn token(query: &str) -> Result<Option<String>, CompatError> {
    let mut found = None;
    read_known_parameters(query, &["token"], |_, value| {
        found = Some(value.to_owned());
        Ok(())
    })
    .map_err(|error| CompatError::bad_request(&error))?;
    Ok(found)
}

/// The JSONP callback of `?callback=fn`, if any: a dotted JavaScript name and nothing else, so
/// the answer can only ever call a function the page already has.
///
/// # Errors
/// 400 for anything else.
pub fn callback(query: &str) -> Result<Option<String>, CompatError> {
    let mut found = None;
    read_known_parameters(query, &["callback"], |_, value| {
        let identifier = |part: &str| {
            let mut chars = part.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '$'))
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$'))
        };
        if value.len() > MAX_CALLBACK_LEN || !value.split('.').all(identifier) {
            return Err(CoreError::InvalidParameter {
                name: "callback".to_owned(),
                expected: format!("a JavaScript function name of at most {MAX_CALLBACK_LEN} characters"),
            });
        }
        found = Some(value.to_owned());
        Ok(())
    })
    .map_err(|error| CompatError::bad_request(&error))?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_takes_countapis_defaults_and_messages() {
        let defaults = CreateParams::parse("").unwrap();
        assert_eq!(
            (defaults.namespace, defaults.key, defaults.value, defaults.enable_reset),
            (None, None, 0, false)
        );
        assert_eq!((defaults.update_lowerbound, defaults.update_upperbound), (-1, 1));
        let full = CreateParams::parse(
            "namespace=n1x&key=k1x&value=-5&enable_reset=true&update_lowerbound=-9&update_upperbound=0",
        )
        .unwrap();
        assert_eq!(full.namespace.as_deref(), Some("n1x"));
        assert_eq!(
            (full.value, full.enable_reset, full.update_lowerbound, full.update_upperbound),
            (-5, true, -9, 0)
        );
        assert!(CreateParams::parse("enable_reset=1").unwrap().enable_reset);
        assert!(!CreateParams::parse("enable_reset=0").unwrap().enable_reset);
        let message = |q: &str| CreateParams::parse(q).unwrap_err().message;
        assert_eq!(message("update_upperbound=-1"), "update_upperbound must be positive");
        assert_eq!(message("update_lowerbound=1"), "update_lowerbound must be negative");
        assert!(message("value=ten").contains("`value`"));
        assert_eq!(CreateParams::parse("value=1&value=2").unwrap_err().status, 400);
    }

    #[test]
    fn a_route_number_is_required_unless_it_has_a_default() {
        assert_eq!(number("value=42&x=1", "value", None), Ok(42));
        assert_eq!(number("", "initializer", Some(0)), Ok(0));
        assert_eq!(number("", "value", None).unwrap_err().message, "`value` is required");
        assert_eq!(number("amount=1.5", "amount", None).unwrap_err().status, 400);
        assert_eq!(number("value=9223372036854775807", "value", None), Ok(i64::MAX));
    }

    #[test]
    fn shields_map_abacus_parameters_onto_the_badge() {
        let plain = Shield::parse("").unwrap();
        assert_eq!(
            (plain.text.as_str(), plain.bgcolor.as_str(), plain.textcolor.as_str()),
            ("counter", "#007ec6", "#fff")
        );
        let styled = Shield::parse("text=visits&bgcolor=ff0000&textcolor=000").unwrap();
        assert_eq!(
            (styled.text.as_str(), styled.bgcolor.as_str(), styled.textcolor.as_str()),
            ("visits", "#ff0000", "#000")
        );
        assert_eq!(Shield::parse("bgcolor=url(x)").unwrap_err().status, 400);
    }

    #[test]
    fn callbacks_are_plain_function_names() {
        assert_eq!(callback("callback=handle").unwrap().as_deref(), Some("handle"));
        assert_eq!(callback("callback=window.app.%24got_1").unwrap().as_deref(), Some("window.app.$got_1"));
        assert_eq!(callback("").unwrap(), None);
        for bad in ["alert(1)", "a..b", "1a", "a%3Bb", "", &"a".repeat(129)] {
            assert!(callback(&format!("callback={bad}")).is_err(), "{bad}");
        }
    }
}
