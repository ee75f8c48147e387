//! The HTTP side of the worker: the router resolves a request's route, method, names and shard
//! once, charges and authorizes it, and hands the validated target to a thin handler per
//! route; [`message`] holds the request and the answer as plain Rust values, [`respond`] and
//! [`api_error`](crate::shared::api_error) shape every answer.

pub mod badge;
pub mod batch;
pub mod cache;
pub mod cancellation;
pub mod compat;
pub mod counters;
pub mod days;
pub mod documents;
pub mod message;
pub mod namespaces;
pub mod operations;
pub mod request_context;
pub mod respond;
pub mod routes;
pub mod target;
pub mod transfer;
