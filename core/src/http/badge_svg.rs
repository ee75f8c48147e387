//! A badge's SVG, in the four styles badge services offer (the names shields.io gave them):
//! `flat` (rounded, a light gradient, the default), `flat-square` (square, no gradient),
//! `plastic` (rounded, shinier, 18 px high) and `for-the-badge` (square, 28 px high, bold
//! capitals). Boxes are sized from the text with per-character widths that err wide, so the
//! text fits in every style; `tests/badge-styles.spec.ts` checks that against the widths
//! Chromium measures with the fonts it has. A symbol wider than 1.33 em (`‱`, say) may not fit.

/// A badge's style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    #[default]
    Flat,
    FlatSquare,
    Plastic,
    ForTheBadge,
}

impl Style {
    /// The style's name, as [`Style::parse`] takes it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Flat => "flat",
            Self::FlatSquare => "flat-square",
            Self::Plastic => "plastic",
            Self::ForTheBadge => "for-the-badge",
        }
    }

    /// The style named `name`, if it is one.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "flat" => Some(Self::Flat),
            "flat-square" => Some(Self::FlatSquare),
            "plastic" => Some(Self::Plastic),
            "for-the-badge" => Some(Self::ForTheBadge),
            _ => None,
        }
    }
}

/// How a badge looks: its style and colours (CSS colours, checked by the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look<'a> {
    pub style: Style,
    pub label_color: &'a str,
    pub color: &'a str,
    pub text_color: &'a str,
}

/// Each style's measures, in pixels.
struct Geometry {
    height: u32,
    radius: u32,
    /// Space either side of a text.
    padding: u32,
    /// Font size, and the text's baseline from the top.
    font_px: u32,
    baseline: u32,
    bold: bool,
    /// Extra space after each character (`letter-spacing`).
    spacing: u32,
    /// The gradient over the whole badge, as `(offset, colour, opacity)` stops, if any.
    gradient: &'static [(&'static str, &'static str, &'static str)],
    /// A darker copy of each text 1 px lower.
    shadow: bool,
}

impl Style {
    fn geometry(self) -> Geometry {
        match self {
            Self::Flat => Geometry {
                height: 20,
                radius: 3,
                padding: 6,
                font_px: 11,
                baseline: 14,
                bold: false,
                spacing: 0,
                gradient: &[("0", "#bbb", ".1"), ("1", "#000", ".1")],
                shadow: true,
            },
            Self::FlatSquare => Geometry { radius: 0, gradient: &[], shadow: false, ..Self::Flat.geometry() },
            Self::Plastic => Geometry {
                height: 18,
                radius: 4,
                baseline: 13,
                gradient: &[
                    ("0", "#fff", ".7"),
                    (".1", "#aaa", ".1"),
                    (".9", "#000", ".3"),
                    ("1", "#000", ".5"),
                ],
                ..Self::Flat.geometry()
            },
            Self::ForTheBadge => Geometry {
                height: 28,
                radius: 0,
                padding: 12,
                font_px: 10,
                baseline: 18,
                bold: true,
                spacing: 1,
                gradient: &[],
                shadow: false,
            },
        }
    }
}

/// An upper bound on the width in pixels of `text` at `font_px` (Verdana, or the sans-serif a
/// browser falls back to, which is no wider by more than these allow): wide for capitals and
/// `m`/`w`, narrow for `i`/`l`/punctuation, wide scripts and emoji at a full em. Bold adds a
/// tenth.
fn text_width(text: &str, font_px: u32, bold: bool, spacing: u32) -> u32 {
    // Widths in twelfths of the font size, the wider of Verdana's and DejaVu Sans's (the font
    // a browser without Verdana falls back to), rounded up.
    let twelfths: u32 = text
        .chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '\'' | '.' | ',' | ':' | ';' | '|' | '!' => 5,
            'f' | 'r' | 't' | 'I' | ' ' | '(' | ')' | '[' | ']' | '-' => 6,
            '@' | '%' => 14,
            'm' | 'w' | 'M' | 'W' => 13,
            '#' | '+' | '<' | '=' | '>' | '^' | '~' => 11,
            c if c.is_ascii_uppercase() => 10,
            c if c.is_ascii_digit() => 9,
            c if c.is_ascii() => 8,
            // Other scripts, symbols and emoji: a full em and a third.
            _ => 16,
        })
        .sum();
    let width = (twelfths * font_px).div_ceil(12);
    let width = if bold { width + width.div_ceil(10) } else { width };
    width + spacing * text.chars().count() as u32
}

/// Escapes text for SVG content and attribute values.
#[must_use]
pub fn escape(text: &str) -> String {
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

/// The badge: `label` on the label colour, `value` on the value colour, in `look`'s style, with
/// a title for screen readers (the text as given, whatever the style shows).
#[must_use]
pub fn render(label: &str, value: &str, look: &Look<'_>) -> String {
    let g = look.style.geometry();
    let shown =
        |text: &str| if look.style == Style::ForTheBadge { text.to_uppercase() } else { text.to_owned() };
    let (label_shown, value_shown) = (shown(label), shown(value));
    let label_w = text_width(&label_shown, g.font_px, g.bold, g.spacing) + 2 * g.padding;
    let value_w = text_width(&value_shown, g.font_px, g.bold, g.spacing) + 2 * g.padding;
    let width = label_w + value_w;
    let height = g.height;
    let title = format!("{}: {}", escape(label), escape(value));
    // Ids of the style's own, so that badges of two styles inlined in one page keep theirs.
    let id = look.style.name();
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{title}"><title>{title}</title>"#
    );
    if !g.gradient.is_empty() {
        svg.push_str(&format!(r#"<linearGradient id="s-{id}" x2="0" y2="100%">"#));
        for (offset, color, opacity) in g.gradient {
            svg.push_str(&format!(
                r#"<stop offset="{offset}" stop-color="{color}" stop-opacity="{opacity}"/>"#
            ));
        }
        svg.push_str("</linearGradient>");
    }
    let radius = g.radius;
    svg.push_str(&format!(
        r##"<clipPath id="r-{id}"><rect width="{width}" height="{height}" rx="{radius}" fill="#fff"/></clipPath><g clip-path="url(#r-{id})">"##
    ));
    let (label_color, color) = (escape(look.label_color), escape(look.color));
    svg.push_str(&format!(
        r#"<rect width="{label_w}" height="{height}" fill="{label_color}"/><rect x="{label_w}" width="{value_w}" height="{height}" fill="{color}"/>"#
    ));
    if !g.gradient.is_empty() {
        svg.push_str(&format!(r#"<rect width="{width}" height="{height}" fill="url(#s-{id})"/>"#));
    }
    svg.push_str("</g>");
    let weight = if g.bold { r#" font-weight="bold""# } else { "" };
    let spacing = if g.spacing > 0 { format!(r#" letter-spacing="{}""#, g.spacing) } else { String::new() };
    svg.push_str(&format!(
        r#"<g fill="{}" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="{}"{weight}{spacing}>"#,
        escape(look.text_color),
        g.font_px
    ));
    // Centred in their boxes; letter-spacing also follows the last character, so half of it
    // moves the centre back.
    let centre = |start: u32, w: u32| f64::from(start) + f64::from(w) / 2.0 + f64::from(g.spacing) / 2.0;
    for (text, x) in [(&label_shown, centre(0, label_w)), (&value_shown, centre(label_w, value_w))] {
        let text = escape(text);
        if g.shadow {
            svg.push_str(&format!(
                r##"<text x="{x}" y="{}" fill="#010101" fill-opacity=".3" aria-hidden="true">{text}</text>"##,
                g.baseline + 1
            ));
        }
        svg.push_str(&format!(r#"<text x="{x}" y="{}">{text}</text>"#, g.baseline));
    }
    svg.push_str("</g></svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(style: Style) -> Look<'static> {
        Look { style, label_color: "#555", color: "#4c1", text_color: "#fff" }
    }

    fn width(svg: &str) -> u32 {
        svg.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap()
    }

    #[test]
    fn each_style_is_named_as_badge_services_name_it() {
        for (name, style) in [
            ("flat", Style::Flat),
            ("flat-square", Style::FlatSquare),
            ("plastic", Style::Plastic),
            ("for-the-badge", Style::ForTheBadge),
        ] {
            assert_eq!(Style::parse(name), Some(style));
            assert_eq!(style.name(), name);
        }
        assert_eq!(Style::parse("social"), None);
    }

    #[test]
    fn styles_differ_in_shape_and_for_the_badge_shows_capitals() {
        let flat = render("views", "12", &look(Style::Flat));
        assert!(
            flat.contains(r#"height="20""#) && flat.contains(r#"rx="3""#) && flat.contains("linearGradient")
        );
        let square = render("views", "12", &look(Style::FlatSquare));
        assert!(square.contains(r#"rx="0""#) && !square.contains("linearGradient"));
        let plastic = render("views", "12", &look(Style::Plastic));
        assert!(plastic.contains(r#"height="18""#) && plastic.contains(r#"stop-opacity=".7""#));
        let big = render("views", "12.3k", &look(Style::ForTheBadge));
        assert!(big.contains(r#"height="28""#) && big.contains(">VIEWS<") && big.contains(">12.3K<"));
        assert!(big.contains("<title>views: 12.3k</title>"), "the title keeps the text as given");
    }

    #[test]
    fn escapes_the_text_and_colours_so_nothing_injects_markup() {
        let svg = render("<script>\"&'", "1", &Look { color: "\"/><x", ..look(Style::Flat) });
        assert!(!svg.contains("<script>") && !svg.contains("<x"));
        assert!(svg.contains("&lt;script&gt;&quot;&amp;&#39;"));
    }

    #[test]
    fn wider_text_makes_a_wider_badge_in_every_style() {
        for style in [Style::Flat, Style::FlatSquare, Style::Plastic, Style::ForTheBadge] {
            let narrow = render("views", "0", &look(style));
            let wide = render("views", "-9223372036854775808", &look(style));
            assert!(width(&wide) > width(&narrow) + 100, "{style:?}");
        }
    }
}
