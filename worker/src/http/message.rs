//! The request and the response as the handlers see them: plain Rust values that cross into
//! JavaScript as few times as possible.
//!
//! Every call between Wasm and JavaScript costs a few microseconds, about as much as the rest
//! of a request's own work. workers-rs' `Request` reads the request's `cf` object on
//! construction (which workerd builds from JSON on every read), and its `Response` builds a
//! JavaScript `Headers` object that each header set crosses into. Here a request's method, URL
//! and every header the handlers read ([`Header`]) come over in one call, as one string; a
//! response keeps its headers in Rust and becomes a JavaScript `Response` in one call
//! ([`Response::into_web`]).

use futures_util::StreamExt;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsCast;
use wasm_bindgen::JsValue;
use worker::js_sys::{self, Uint8Array};
use worker::worker_sys::web_sys;
use worker::Method;

use crate::shared::api_error::ApiError;

#[wasm_bindgen(inline_js = "
export function requestHead(request, names) {
  const headers = request.headers;
  let head = request.method + '\\n' + request.url;
  for (let i = 0; i < names.length; i++) {
    const value = headers.get(names[i]);
    head += value === null ? '\\n' : '\\n=' + value;
  }
  return head;
}
function answer(status, headers, body) {
  const init = { status, headers: {} };
  const parts = headers.split('\\n');
  for (let i = 0; i + 1 < parts.length; i += 2) init.headers[parts[i]] = parts[i + 1];
  return new Response(body, init);
}
export function answerText(status, text, headersLength, hasBody) {
  const body = hasBody ? text.substring(headersLength) : null;
  return answer(status, text.substring(0, headersLength), body);
}
export function answerBytes(status, headers, body) {
  return answer(status, headers, body.slice());
}
export function answerStream(status, headers, body) {
  return answer(status, headers, body);
}
")]
extern "C" {
    /// `method\nurl` and a line per name: empty when the header is absent, else `=value`.
    #[wasm_bindgen(catch, js_name = requestHead)]
    fn request_head(request: &web_sys::Request, names: &JsValue) -> Result<String, JsValue>;
    /// A `Response` from `text`: its first `headers_length` UTF-16 units are the headers as
    /// `name\nvalue\n...`, the rest the body (if it has one).
    #[wasm_bindgen(catch, js_name = answerText)]
    fn answer_text(
        status: u16,
        text: &str,
        headers_length: usize,
        has_body: bool,
    ) -> Result<web_sys::Response, JsValue>;
    /// A `Response` with a copy of `body`, `headers` as `name\nvalue\n...`.
    #[wasm_bindgen(catch, js_name = answerBytes)]
    fn answer_bytes(status: u16, headers: &str, body: &[u8]) -> Result<web_sys::Response, JsValue>;
    /// A `Response` streaming `body` (a `ReadableStream`), `headers` as `name\nvalue\n...`.
    #[wasm_bindgen(catch, js_name = answerStream)]
    fn answer_stream(status: u16, headers: &str, body: &JsValue) -> Result<web_sys::Response, JsValue>;
}

/// The request headers the handlers read: all of them come over with the request's first call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    Accept,
    Authorization,
    CacheControl,
    /// `CF-Connecting-IP`, the client's address as Cloudflare saw it.
    ClientAddress,
    ContentLength,
    ContentType,
    IdempotencyKey,
    IfNoneMatch,
    Origin,
    /// RFC 7240 preferences (`respond-async` asks for a one-way write).
    Prefer,
    Referer,
    /// Tells known bots, whose public counts are not counted (`isolate::visitors`).
    UserAgent,
}

impl Header {
    const ALL: [Self; 12] = [
        Self::Accept,
        Self::Authorization,
        Self::CacheControl,
        Self::ClientAddress,
        Self::ContentLength,
        Self::ContentType,
        Self::IdempotencyKey,
        Self::IfNoneMatch,
        Self::Origin,
        Self::Prefer,
        Self::Referer,
        Self::UserAgent,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Authorization => "authorization",
            Self::CacheControl => "cache-control",
            Self::ClientAddress => "cf-connecting-ip",
            Self::ContentLength => "content-length",
            Self::ContentType => "content-type",
            Self::IdempotencyKey => "idempotency-key",
            Self::IfNoneMatch => "if-none-match",
            Self::Origin => "origin",
            Self::Prefer => "prefer",
            Self::Referer => "referer",
            Self::UserAgent => "user-agent",
        }
    }
}

thread_local! {
    /// [`Header::ALL`]'s names as a JavaScript array, made once per isolate.
    static HEADER_NAMES: JsValue =
        Header::ALL.iter().map(|h| JsValue::from_str(h.name())).collect::<js_sys::Array>().into();
}

/// An incoming request: its method, path, query and the headers of [`Header`], read in one call.
pub struct Request {
    inner: web_sys::Request,
    method: String,
    path: String,
    query: String,
    headers: [Option<String>; Header::ALL.len()],
}

impl Request {
    /// # Errors
    /// Only if the runtime's request cannot be read.
    pub fn new(inner: web_sys::Request) -> Result<Self, JsValue> {
        let head = HEADER_NAMES.with(|names| request_head(&inner, names))?;
        Ok(Self::from_head(inner, &head))
    }

    fn from_head(inner: web_sys::Request, head: &str) -> Self {
        let mut lines = head.split('\n');
        let method = lines.next().unwrap_or_default().to_owned();
        let (path, query) = split_url(lines.next().unwrap_or_default());
        let headers =
            std::array::from_fn(|_| lines.next().and_then(|line| line.strip_prefix('=')).map(str::to_owned));
        Self { inner, method, path, query, headers }
    }

    /// The method, or `None` for one workers-rs does not name: it reads every unknown method
    /// (`PROPFIND`, `FOO`) as `GET`, which would serve them as reads.
    pub fn method(&self) -> Option<Method> {
        let method = Method::from(self.method.clone());
        (method != Method::Get || self.method.eq_ignore_ascii_case("GET")).then_some(method)
    }

    /// The path, still percent-encoded.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The query string without its `?`, still percent-encoded; empty when there is none.
    pub fn query(&self) -> &str {
        &self.query
    }

    /// The token of `Authorization: Bearer <token>`, if any.
    #[must_use]
    pub fn bearer_token(&self) -> Option<String> {
        self.header(Header::Authorization).and_then(|h| {
            let (scheme, token) = h.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_owned())
        })
    }

    /// A header's value (several sent values joined by `, `), or `None`.
    pub fn header(&self, header: Header) -> Option<String> {
        self.headers[header as usize].clone()
    }

    /// Another handle to the runtime's request (not a copy of the request, as
    /// `web_sys::Request::clone` would make).
    pub fn handle(&self) -> web_sys::Request {
        Clone::clone(&self.inner)
    }

    /// The body as it streams in, chunk by chunk; `None` when the request has none. The body
    /// can be taken once.
    pub fn body_chunks(&self) -> Option<impl futures_util::Stream<Item = Result<Vec<u8>, ApiError>>> {
        let body = self.inner.body()?;
        let stream = wasm_streams::ReadableStream::from_raw(body.unchecked_into());
        Some(stream.into_stream().map(|chunk| {
            // A body that fails to stream is an upload cut off: its client is gone.
            chunk
                .map(|bytes| Uint8Array::from(bytes).to_vec())
                .map_err(|error| ApiError::Internal(format!("reading the body: {error:?}")))
        }))
    }
}

/// Splits a serialized URL into its path and query. A serialized WHATWG URL of an HTTP(S)
/// request always has a path starting at the first `/` after the host, in which `?` and `#`
/// are percent-encoded.
fn split_url(url: &str) -> (String, String) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = url[after_scheme..].find('/').map_or("/", |i| &url[after_scheme + i..]);
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    match rest.split_once('?') {
        Some((path, query)) => (path.to_owned(), query.to_owned()),
        None => (rest.to_owned(), String::new()),
    }
}

/// A response's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Empty,
    Text(String),
    Bytes(Vec<u8>),
    /// A `ReadableStream` of bytes, sent as it comes.
    Stream(JsStream),
}

/// A JavaScript `ReadableStream` held as a body.
#[derive(Debug, Clone)]
pub struct JsStream(pub JsValue);

impl PartialEq for JsStream {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for JsStream {}

/// An answer being built: status, headers (lower-case names) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Body,
}

impl Response {
    /// A response with `body` of type `content_type`.
    pub fn with_body(status: u16, content_type: impl Into<String>, body: Body) -> Self {
        debug_assert!(!matches!(status, 204 | 304), "a {status} has no body");
        let mut response = Self::empty(status);
        response.body = body;
        response.set_header("content-type", content_type);
        response
    }

    /// A response without a body (204, 304).
    pub fn empty(status: u16) -> Self {
        debug_assert!((200..=599).contains(&status), "status {status} cannot be answered");
        Self { status, headers: Vec::with_capacity(8), body: Body::Empty }
    }

    /// Sets a header, replacing any value it had.
    pub fn set_header(&mut self, name: &'static str, value: impl Into<String>) {
        self.headers.retain(|(n, _)| *n != name);
        self.append_header(name, value);
    }

    /// Adds a value to a header (`Vary: Accept` and `Vary: Origin` make `Vary: Accept, Origin`).
    /// A value with a line break cannot be sent (and would break the one-string hand-over), so
    /// it is dropped: none of ours has one, and a client's text is checked before it becomes a
    /// header.
    pub fn append_header(&mut self, name: &'static str, value: impl Into<String>) {
        let value = value.into();
        debug_assert!(!value.contains(['\r', '\n']), "header {name} with a line break");
        if !value.contains(['\r', '\n']) {
            self.headers.push((name, value));
        }
    }

    /// A header's value (the first, if added several times).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// The JavaScript `Response`, made in one call: headers (and a text body) as one string.
    ///
    /// # Errors
    /// If the runtime refuses the response (a header value it cannot send): the request then
    /// fails as a whole, and the runtime answers 500.
    pub fn into_web(self) -> Result<web_sys::Response, JsValue> {
        let mut text = self.header_lines();
        match &self.body {
            Body::Bytes(bytes) => answer_bytes(self.status, &text, bytes),
            Body::Stream(stream) => answer_stream(self.status, &text, &stream.0),
            Body::Empty | Body::Text(_) => {
                // JavaScript counts a string's length in UTF-16 units.
                let headers_length = text.encode_utf16().count();
                let has_body = matches!(self.body, Body::Text(_));
                if let Body::Text(body) = &self.body {
                    text.push_str(body);
                }
                answer_text(self.status, &text, headers_length, has_body)
            }
        }
    }

    /// `name\nvalue\n...`, a header added several times sent once with its values joined.
    fn header_lines(&self) -> String {
        let mut lines = String::with_capacity(self.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum());
        for (index, (name, value)) in self.headers.iter().enumerate() {
            if self.headers[..index].iter().any(|(earlier, _)| earlier == name) {
                continue;
            }
            if !lines.is_empty() {
                lines.push('\n');
            }
            lines.push_str(name);
            lines.push('\n');
            lines.push_str(value);
            for (_, more) in self.headers[index + 1..].iter().filter(|(later, _)| later == name) {
                lines.push_str(", ");
                lines.push_str(more);
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_raw_path_and_query() {
        let split = |url: &str| split_url(url);
        assert_eq!(split("http://h:8787/v1/health"), ("/v1/health".into(), String::new()));
        assert_eq!(
            split("https://h/v1/counters/a/b%3Fc?ttl=5&x=%23"),
            ("/v1/counters/a/b%3Fc".into(), "ttl=5&x=%23".into())
        );
        assert_eq!(split("http://h"), ("/".into(), String::new()));
        assert_eq!(split("http://h/p?"), ("/p".into(), String::new()));
        assert_eq!(split("http://h/p?q#frag"), ("/p".into(), "q".into()));
    }

    #[test]
    fn each_header_is_found_at_its_own_place() {
        for (place, header) in Header::ALL.iter().enumerate() {
            assert_eq!(*header as usize, place, "{header:?}");
        }
    }

    #[test]
    fn set_header_replaces_and_append_adds() {
        let mut response = Response::with_body(200, "text/plain", Body::Text("x".into()));
        response.set_header("content-type", "application/json");
        response.append_header("vary", "Accept");
        response.append_header("vary", "Origin");
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.headers.iter().filter(|(n, _)| *n == "vary").count(), 2);
        assert_eq!(response.headers.iter().filter(|(n, _)| *n == "content-type").count(), 1);
        assert_eq!(response.header_lines(), "content-type\napplication/json\nvary\nAccept, Origin");
    }
}
