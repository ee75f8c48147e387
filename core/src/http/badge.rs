//! The counter badge of `GET /v1/badge/:ns/:key.svg`: its query (`incr`, `label`, `color`) and
//! the SVG, a flat two-part badge in the style READMEs use, sized from the text so any label and
//! any 64-bit value fit.

use crate::http::query::read_known_parameters;
use crate::CoreError;

/// The label when none is asked for.
pub const DEFAULT_LABEL: &str = "views";
/// The value part's colour when none is asked for.
pub const DEFAULT_COLOR: &str = "#4c1";
/// Longest label, in characters.
pub const MAX_LABEL_CHARS: usize = 64;

/// Colour names a badge accepts besides hex, as badge services name them.
const NAMED_COLORS: [(&str, &str); 12] = [
    ("brightgreen", "#4c1"),
    ("green", "#97ca00"),
    ("yellowgreen", "#a4a61d"),
    ("yellow", "#dfb317"),
    ("orange", "#fe7d37"),
    ("red", "#e05d44"),
    ("blue", "#007ec6"),
    ("lightgrey", "#9f9f9f"),
    ("grey", "#555"),
    ("gray", "#555"),
    ("purple", "#8a2be2"),
    ("pink", "#ff69b4"),
];

/// What a badge request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadgeQuery {
    /// Count this view before rendering.
    pub incr: bool,
    /// Count this view's visitor in the day's unique visitors (with `incr`), and show the
    /// period's unique visitors instead of its count.
    pub unique: bool,
    pub label: String,
    /// A CSS hex colour, `#` included.
    pub color: String,
}

impl BadgeQuery {
    /// Parses the query string (without `?`). Unknown parameters are ignored, as on the counter
    /// routes, so cache-busting suffixes work.
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] for a bad `incr`, `label` or `color`, or one given twice.
    pub fn parse(query: &str) -> Result<Self, CoreError> {
        let mut parsed = Self {
            incr: false,
            unique: false,
            label: DEFAULT_LABEL.to_owned(),
            color: DEFAULT_COLOR.to_owned(),
        };
        read_known_parameters(query, &["incr", "label", "color", "unique"], |slot, value| {
            match slot {
                0 => parsed.incr = parse_switch("incr", value)?,
                1 => parsed.label = parse_label(value)?,
                3 => parsed.unique = parse_switch("unique", value)?,
                _ => parsed.color = parse_color(value)?,
            }
            Ok(())
        })?;
        Ok(parsed)
    }
}

fn invalid(name: &str, expected: &str) -> CoreError {
    CoreError::InvalidParameter { name: name.to_owned(), expected: expected.to_owned() }
}

fn parse_switch(name: &str, value: &str) -> Result<bool, CoreError> {
    match value {
        "1" | "true" => Ok(true),
        "0" | "false" | "" => Ok(false),
        _ => Err(invalid(name, "1 or 0")),
    }
}

pub(crate) fn parse_label(value: &str) -> Result<String, CoreError> {
    let chars = value.chars().count();
    if chars == 0 || chars > MAX_LABEL_CHARS {
        return Err(invalid("label", "1 to 64 characters"));
    }
    // U+FFFE and U+FFFF are no XML characters: an SVG holding one does not parse.
    if value.chars().any(|c| c.is_control() || c == '\u{fffe}' || c == '\u{ffff}') {
        return Err(invalid("label", "free of control characters and U+FFFE, U+FFFF"));
    }
    Ok(value.to_owned())
}

/// A hex colour (`4c1`, `#44cc11`) or one of [`NAMED_COLORS`], as `#` and hex digits.
pub(crate) fn parse_color(value: &str) -> Result<String, CoreError> {
    let lower = value.trim().to_ascii_lowercase();
    if let Some((_, hex)) = NAMED_COLORS.iter().find(|(name, _)| *name == lower) {
        return Ok((*hex).to_owned());
    }
    let digits = lower.strip_prefix('#').unwrap_or(&lower);
    if matches!(digits.len(), 3 | 6) && digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(format!("#{digits}"));
    }
    Err(invalid("color", "a hex colour like 4c1 or a name like blue"))
}

/// Approximate width in pixels of `text` in 11px Verdana, the badge font: wide for capitals and
/// `m`/`w`, narrow for `i`/`l`/punctuation, so the boxes fit the text without measuring it.
fn text_width(text: &str) -> u32 {
    text.chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '\'' | '.' | ',' | ':' | ';' | '|' | '!' => 4,
            'f' | 'r' | 't' | 'I' | ' ' | '(' | ')' | '[' | ']' | '-' => 5,
            'm' | 'w' | 'M' | 'W' => 11,
            c if c.is_ascii_uppercase() => 8,
            c if c.is_ascii() => 7,
            // Wide scripts and emoji.
            _ => 12,
        })
        .sum()
}

/// Escapes text for SVG content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The badge: `label` on grey, `value` on `color`, with a title for screen readers.
#[must_use]
pub fn render(label: &str, value: i64, color: &str) -> String {
    render_with_text_color(label, value, color, "#fff")
}

/// [`render`] with its text in `text_color` (a colour [`parse_color`] answered).
#[must_use]
pub fn render_with_text_color(label: &str, value: i64, color: &str, text_color: &str) -> String {
    render_text(label, &value.to_string(), color, text_color)
}

/// [`render_with_text_color`] with any text for the value (escaped here).
#[must_use]
pub fn render_text(label: &str, value: &str, color: &str, text_color: &str) -> String {
    let value = escape(value);
    let (label_w, value_w) = (text_width(label) + 10, text_width(&value) + 10);
    let width = label_w + value_w;
    let (label, color, text_color) = (escape(label), escape(color), escape(text_color));
    let (label_x, value_x) = (label_w * 5, label_w * 10 + value_w * 5);
    format!(
        concat!(
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" aria-label="{label}: {value}">"##,
            r##"<title>{label}: {value}</title>"##,
            r##"<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>"##,
            r##"<clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath>"##,
            r##"<g clip-path="url(#r)"><rect width="{label_w}" height="20" fill="#555"/><rect x="{label_w}" width="{value_w}" height="20" fill="{color}"/><rect width="{width}" height="20" fill="url(#s)"/></g>"##,
            r##"<g fill="{text_color}" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="110">"##,
            r##"<text x="{label_x}" y="150" fill="#010101" fill-opacity=".3" transform="scale(.1)">{label}</text><text x="{label_x}" y="140" transform="scale(.1)">{label}</text>"##,
            r##"<text x="{value_x}" y="150" fill="#010101" fill-opacity=".3" transform="scale(.1)">{value}</text><text x="{value_x}" y="140" transform="scale(.1)">{value}</text>"##,
            r##"</g></svg>"##
        ),
        width = width,
        label = label,
        value = value,
        color = color,
        text_color = text_color,
        label_w = label_w,
        value_w = value_w,
        label_x = label_x,
        value_x = value_x,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_when_nothing_is_asked() {
        let query = BadgeQuery::parse("").unwrap();
        assert_eq!(
            query,
            BadgeQuery { incr: false, unique: false, label: "views".into(), color: "#4c1".into() }
        );
    }

    #[test]
    fn reads_incr_label_and_colour() {
        let query = BadgeQuery::parse("incr=1&label=page%20views&color=%23007ec6&_=123").unwrap();
        assert_eq!(
            query,
            BadgeQuery { incr: true, unique: false, label: "page views".into(), color: "#007ec6".into() }
        );
        assert_eq!(BadgeQuery::parse("color=blue").unwrap().color, "#007ec6");
        assert_eq!(BadgeQuery::parse("color=ABC").unwrap().color, "#abc");
    }

    #[test]
    fn refuses_bad_values() {
        for query in [
            "incr=2",
            "label=",
            "color=url(x)",
            "color=12345",
            "incr=1&incr=1",
            "label=a%0Ab",
            "label=%EF%BF%BF",
            "label=%EF%BF%BE",
        ] {
            assert!(BadgeQuery::parse(query).is_err(), "{query}");
        }
        assert!(BadgeQuery::parse(&format!("label={}", "x".repeat(65))).is_err());
    }

    #[test]
    fn escapes_the_label_so_it_cannot_inject_markup() {
        let svg = render("<script>\"&'", 1, "#4c1");
        assert!(!svg.contains("<script>"));
        assert!(svg.contains("&lt;script&gt;&quot;&amp;&#39;"));
    }

    #[test]
    fn fits_the_widest_values() {
        let narrow = render("views", 0, "#4c1");
        let wide = render("views", i64::MIN, "#4c1");
        assert!(wide.contains("-9223372036854775808"));
        let width = |svg: &str| {
            svg.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse::<u32>().unwrap()
        };
        assert!(width(&wide) > width(&narrow) + 100);
    }
}
