//! The counter badge of `GET /v1/badge/:ns/:key.svg`: its query (`incr`, `unique`, `label`,
//! `color`, `label_color`, `style`, `abbreviated`) and the text it shows; the SVG itself is
//! [`crate::http::badge_svg`].

use crate::http::badge_svg::{self, Look, Style};
use crate::http::query::read_known_parameters;
use crate::CoreError;

/// The label when none is asked for.
pub const DEFAULT_LABEL: &str = "views";
/// The value part's colour when none is asked for.
pub const DEFAULT_COLOR: &str = "#4c1";
/// The label part's colour when none is asked for.
pub const DEFAULT_LABEL_COLOR: &str = "#555";
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
    /// The value part's colour: a CSS hex colour, `#` included.
    pub color: String,
    /// The label part's colour, the same way (`label_color`, or `labelColor` as shields.io
    /// names it).
    pub label_color: String,
    pub style: Style,
    /// Show the value abbreviated (`12.3k`), see [`abbreviate`].
    pub abbreviated: bool,
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
            label_color: DEFAULT_LABEL_COLOR.to_owned(),
            style: Style::default(),
            abbreviated: false,
        };
        let known = ["incr", "label", "color", "unique", "style", "abbreviated", "label_color", "labelColor"];
        let mut label_colors = 0;
        read_known_parameters(query, &known, |slot, value| {
            match slot {
                0 => parsed.incr = parse_switch("incr", value)?,
                1 => parsed.label = parse_label(value)?,
                2 => parsed.color = parse_color("color", value)?,
                3 => parsed.unique = parse_switch("unique", value)?,
                4 => {
                    parsed.style = Style::parse(value)
                        .ok_or_else(|| invalid("style", "flat, flat-square, plastic or for-the-badge"))?;
                }
                5 => parsed.abbreviated = parse_switch("abbreviated", value)?,
                _ => {
                    label_colors += 1;
                    if label_colors > 1 {
                        return Err(CoreError::DuplicateParameter { name: "label_color".to_owned() });
                    }
                    parsed.label_color = parse_color("label_color", value)?;
                }
            }
            Ok(())
        })?;
        Ok(parsed)
    }

    /// How the badge looks, its text in `text_color`.
    #[must_use]
    pub fn look<'a>(&'a self, text_color: &'a str) -> Look<'a> {
        Look { style: self.style, label_color: &self.label_color, color: &self.color, text_color }
    }

    /// `value` as this badge shows it.
    #[must_use]
    pub fn shown(&self, value: i64) -> String {
        if self.abbreviated {
            abbreviate(value)
        } else {
            value.to_string()
        }
    }
}

/// `value` in at most three digits and a metric unit, as badges show counts: `999`, `1.2k`,
/// `12.3k`, `123k`, `1.2M`, up to `9.2E`. Cut, never rounded up, so a badge never shows more than
/// was counted (`999,999` is `999k`, not `1000k`).
#[must_use]
pub fn abbreviate(value: i64) -> String {
    let sign = if value < 0 { "-" } else { "" };
    let n = value.unsigned_abs();
    let Some((unit, step)) = [
        ("E", 1e18 as u64),
        ("P", 1e15 as u64),
        ("T", 1e12 as u64),
        ("G", 1e9 as u64),
        ("M", 1e6 as u64),
        ("k", 1e3 as u64),
    ]
    .into_iter()
    .find(|(_, step)| n >= *step) else {
        return value.to_string();
    };
    let tenths = u128::from(n) * 10 / u128::from(step);
    if tenths < 1_000 && tenths % 10 != 0 {
        format!("{sign}{}.{}{unit}", tenths / 10, tenths % 10)
    } else {
        format!("{sign}{}{unit}", tenths / 10)
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
pub(crate) fn parse_color(name: &str, value: &str) -> Result<String, CoreError> {
    let lower = value.trim().to_ascii_lowercase();
    if let Some((_, hex)) = NAMED_COLORS.iter().find(|(name, _)| *name == lower) {
        return Ok((*hex).to_owned());
    }
    let digits = lower.strip_prefix('#').unwrap_or(&lower);
    if matches!(digits.len(), 3 | 6) && digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(format!("#{digits}"));
    }
    Err(invalid(name, "a hex colour like 4c1 or a name like blue"))
}

/// The flat badge: `label` on grey, `value` on `color`, its text in `text_color` (colours
/// [`parse_color`] answered); what the compatible routes draw.
#[must_use]
pub fn render_with_text_color(label: &str, value: i64, color: &str, text_color: &str) -> String {
    let look = Look { style: Style::Flat, label_color: DEFAULT_LABEL_COLOR, color, text_color };
    badge_svg::render(label, &value.to_string(), &look)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_when_nothing_is_asked() {
        let query = BadgeQuery::parse("").unwrap();
        assert_eq!(
            query,
            BadgeQuery {
                incr: false,
                unique: false,
                label: "views".into(),
                color: "#4c1".into(),
                label_color: "#555".into(),
                style: Style::Flat,
                abbreviated: false,
            }
        );
    }

    #[test]
    fn reads_incr_label_and_colour() {
        let query = BadgeQuery::parse("incr=1&label=page%20views&color=%23007ec6&_=123").unwrap();
        assert_eq!((query.incr, query.label.as_str(), query.color.as_str()), (true, "page views", "#007ec6"));
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
            "style=social",
            "abbreviated=yes",
            "label_color=red&labelColor=blue",
            "labelColor=nope",
        ] {
            assert!(BadgeQuery::parse(query).is_err(), "{query}");
        }
        assert!(BadgeQuery::parse(&format!("label={}", "x".repeat(65))).is_err());
    }

    #[test]
    fn reads_style_label_colour_and_abbreviation() {
        let query = BadgeQuery::parse("style=for-the-badge&labelColor=blue&abbreviated=1").unwrap();
        assert_eq!(
            (query.style, query.label_color.as_str(), query.abbreviated),
            (Style::ForTheBadge, "#007ec6", true)
        );
        assert_eq!(BadgeQuery::parse("label_color=333").unwrap().label_color, "#333");
        assert_eq!(query.shown(12_345), "12.3k");
        assert_eq!(BadgeQuery::parse("").unwrap().shown(12_345), "12345");
    }

    #[test]
    fn abbreviates_without_ever_rounding_up() {
        for (value, shown) in [
            (0, "0"),
            (999, "999"),
            (1_000, "1k"),
            (1_234, "1.2k"),
            (12_345, "12.3k"),
            (99_999, "99.9k"),
            (123_456, "123k"),
            (999_999, "999k"),
            (1_000_000, "1M"),
            (1_250_000, "1.2M"),
            (2_000_000_000, "2G"),
            (-12_345, "-12.3k"),
            (i64::MAX, "9.2E"),
            (i64::MIN, "-9.2E"),
        ] {
            assert_eq!(abbreviate(value), shown, "{value}");
        }
    }

    #[test]
    fn escapes_the_label_so_it_cannot_inject_markup() {
        let svg = render_with_text_color("<script>\"&'", 1, "#4c1", "#fff");
        assert!(!svg.contains("<script>"));
        assert!(svg.contains("&lt;script&gt;&quot;&amp;&#39;"));
    }

    #[test]
    fn fits_the_widest_values() {
        let narrow = render_with_text_color("views", 0, "#4c1", "#fff");
        let wide = render_with_text_color("views", i64::MIN, "#4c1", "#fff");
        assert!(wide.contains("-9223372036854775808"));
        let width = |svg: &str| {
            svg.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse::<u32>().unwrap()
        };
        assert!(width(&wide) > width(&narrow) + 100);
    }
}
