//! The fixed documents the worker serves: the demo page at `/` (and its script), the dashboard
//! at `/dashboard` (and its script), the browser client at
//! `/v1/client.js`, the one-tag counting script at `/v1/count.js` and the OpenAPI description at
//! `/v1/openapi.json`. They are compiled into
//! the Wasm module, so a deployment always serves the ones built with it.

use edgecount_core::http::etag::{content_etag, if_none_match};

use crate::http::message::{Body, Header, Request, Response};

/// A document and how it is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Document {
    DemoPage,
    DemoScript,
    Dashboard,
    DashboardScript,
    Client,
    /// The client's TypeScript declarations, beside it.
    ClientTypes,
    CountScript,
    OpenApi,
}

impl Document {
    fn body(self) -> &'static str {
        match self {
            Self::DemoPage => include_str!("../../static/index.html"),
            Self::DemoScript => include_str!("../../static/demo.js"),
            Self::Dashboard => include_str!("../../static/dashboard.html"),
            Self::DashboardScript => include_str!("../../static/dashboard.js"),
            Self::Client => include_str!("../../../client/dist/edgecount.js"),
            Self::ClientTypes => include_str!("../../../client/dist/edgecount.d.ts"),
            Self::CountScript => include_str!("../../static/count.js"),
            Self::OpenApi => include_str!("../../static/openapi.json"),
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::DemoPage | Self::Dashboard => "text/html; charset=utf-8",
            Self::Client | Self::CountScript | Self::DemoScript | Self::DashboardScript => {
                "text/javascript; charset=utf-8"
            }
            Self::OpenApi => "application/json; charset=utf-8",
            Self::ClientTypes => "application/typescript; charset=utf-8",
        }
    }

    /// The client is cached for a week: it keeps its API within v1, and its `ETag` lets a
    /// stale copy revalidate cheaply. The page and the spec change with deployments, so they
    /// are cached briefly.
    fn cache_control(self) -> &'static str {
        match self {
            Self::Client | Self::ClientTypes => "public, max-age=604800, stale-while-revalidate=86400",
            // Loaded by every view of the pages that use it: kept a day, revalidated by `ETag`.
            Self::CountScript => "public, max-age=86400, stale-while-revalidate=86400",
            Self::DemoPage | Self::DemoScript | Self::Dashboard | Self::DashboardScript | Self::OpenApi => {
                "public, max-age=300"
            }
        }
    }
}

/// Serves `document`, or 304 when the request already holds it.
pub fn serve(req: &Request, document: Document) -> Response {
    let body = document.body();
    let tag = content_etag(body.as_bytes());
    let cached = req.header(Header::IfNoneMatch).is_some_and(|h| if_none_match(&h, &tag));
    let mut response = if cached {
        Response::empty(304)
    } else {
        Response::with_body(200, document.content_type(), Body::Text(body.to_owned()))
    };
    response.set_header("etag", tag);
    if document == Document::Client {
        // Where Deno and editors that follow the header find the client's types.
        response.set_header("x-typescript-types", "/v1/client.d.ts");
    }
    response.set_header("cache-control", document.cache_control());
    if matches!(document, Document::DemoPage | Document::Dashboard) {
        // The page runs only its own scripts and talks only to this origin.
        response.set_header(
            "content-security-policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
        );
    }
    response
}
