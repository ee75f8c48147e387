//! The handlers of the compatible routes, one per route and method, each a counter op sent to
//! the key's shard (or, for `/stats`, a sum over the shards).

use edgecount_core::compat::answers::{self, Totals};
use edgecount_core::compat::params::{self, CreateParams};
use edgecount_core::compat::{names, CompatError};
use edgecount_core::edge::access::Right;
use edgecount_core::edge::rate_limit::ClientId;
use edgecount_core::http::badge::render_with_text_color;
use edgecount_core::shard::protocol::GuardedChange;
use edgecount_core::shard::settings::{AdminKeyHash, CounterSettings, Guard};
use edgecount_core::{Namespace, OpResult, ShardCall, ShardOp};
use serde_json::json;
use wasm_bindgen::JsCast;
use worker::{js_sys, Method};

use super::call::{from_api, resolve_names, Call, Reply, Route};
use super::stream;
use crate::http::counters;
use crate::http::message::Header;
use crate::http::target::Target;
use crate::isolate::{shard_stats, visitors};
use crate::shared::clock::{self, now_ms};
use crate::shared::shard_client;

/// Runs the handler of `route`; `x_path` is set for routes that pick their names themselves.
pub(super) async fn run(
    route: Route,
    call: &Call<'_>,
    x_path: &mut Option<String>,
) -> Result<Reply, CompatError> {
    let posted = call.method == Method::Post;
    match route {
        Route::Hit => hit(call).await.map(|value| Reply::ok(json!({ "value": value }))),
        Route::Get => get(call).await,
        Route::HitShield | Route::GetShield => shield(call, route == Route::HitShield).await,
        Route::Set if posted => admin_change(call, AdminChange::Set).await,
        Route::Set => countapi_set(call).await,
        Route::Update if posted => admin_change(call, AdminChange::Update).await,
        Route::Update => countapi_update(call).await,
        Route::Reset => admin_change(call, AdminChange::Reset).await,
        Route::Delete => admin_change(call, AdminChange::Delete).await,
        Route::Create => countapi_create(call, x_path).await,
        Route::CreateWithAdminKey => abacus_create(call, x_path).await,
        Route::Info => info(call).await,
        Route::Stats => stats(call).await,
        // Says only that this isolate answers, and for how long it has: open to all, as Abacus's.
        Route::Healthcheck => Ok(Reply::ok(answers::healthcheck(clock::uptime_ms()))),
        Route::Stream => {
            let target = call.target()?;
            authorize(call, Right::Read, Some(&target.ns))?;
            let client = ClientId::address(&call.req.header(Header::ClientAddress).unwrap_or_default());
            stream::open(call.cx.env, call.cx.config, target, client).await.map(Reply::Events)
        }
    }
}

/// Checks the configured token's right for the call's counter (or for no namespace).
fn authorize(call: &Call<'_>, need: Right, ns: Option<&Namespace>) -> Result<(), CompatError> {
    call.cx.config.access.check(call.token.as_deref(), need, ns).map_err(|denial| from_api(&denial.into()))
}

/// Sends one write to the counter's shard, as API v1 writes are sent (coalesced, with the
/// request's `Idempotency-Key`, and refreshing a hot key's kept read).
async fn write(call: &Call<'_>, target: &Target, op: ShardOp) -> Result<OpResult, CompatError> {
    let idempotency_key = counters::idempotency_key(call.req).map_err(|e| from_api(&e))?;
    // An operator's token binds no owner key, on these routes as on API v1's (`shard::owner`).
    let operator = call.cx.config.access.is_operator(call.token.as_deref(), &target.ns);
    let shard_call = ShardCall { op, idempotency_key, operator, visit: None, count_visitor: false };
    let (result, _replayed) =
        counters::apply_write(call.cx, target, shard_call).await.map_err(|e| from_api(&e))?;
    match result {
        OpResult::Failed { error } => Err(CompatError::from_core(&error)),
        other => Ok(other),
    }
}

fn unexpected() -> CompatError {
    CompatError::new(500, "The shard answered with something unexpected.")
}

async fn hit(call: &Call<'_>) -> Result<i64, CompatError> {
    let target = call.target()?;
    authorize(call, Right::Count, Some(&target.ns))?;
    if visitors::leaves_uncounted(
        call.req.header(Header::UserAgent).as_deref(),
        call.cx.config,
        call.token.as_deref(),
        &target.ns,
    ) {
        return Ok(current(call).await?.unwrap_or(0));
    }
    // CountAPI's TTL comes with a write; a count alone (a public page's visitor) keeps the
    // counter's own, so that it cannot give a counter that never expires a lifetime.
    let writes = call.cx.config.access.check(call.token.as_deref(), Right::Write, Some(&target.ns)).is_ok();
    let op = ShardOp::Incr {
        ns: target.ns.clone(),
        key: target.key.clone(),
        by: 1,
        ttl: writes.then_some(call.cx.config.compat_ttl_seconds),
    };
    match write(call, target, op).await? {
        OpResult::Value { value, .. } => Ok(value),
        _ => Err(unexpected()),
    }
}

/// The live value, or `None` when the counter does not exist.
async fn current(call: &Call<'_>) -> Result<Option<i64>, CompatError> {
    let target = call.target()?;
    authorize(call, Right::Read, Some(&target.ns))?;
    let now = now_ms();
    let current = counters::current(call.req, call.cx, target, false, now).await.map_err(|e| from_api(&e))?;
    Ok(current.read.exists.then_some(current.read.value))
}

async fn get(call: &Call<'_>) -> Result<Reply, CompatError> {
    Ok(match current(call).await? {
        Some(value) => Reply::ok(json!({ "value": value })),
        None => Reply::Json(404, answers::missing_value(call.cx.config.compat_mode)),
    })
}

/// Abacus's badges: `text` is the label, `bgcolor` and `textcolor` the value's colours.
async fn shield(call: &Call<'_>, counting: bool) -> Result<Reply, CompatError> {
    let badge = params::Shield::parse(call.req.query())?;
    let value = if counting {
        hit(call).await?
    } else {
        current(call).await?.ok_or_else(|| CompatError::new(404, "Key not found"))?
    };
    Ok(Reply::Svg(render_with_text_color(&badge.text, value, &badge.bgcolor, &badge.textcolor)))
}

/// A guarded change of the call's counter.
async fn guarded(call: &Call<'_>, change: GuardedChange, guard: Guard) -> Result<OpResult, CompatError> {
    let target = call.target()?;
    let op = ShardOp::Guarded {
        ns: target.ns.clone(),
        key: target.key.clone(),
        change,
        guard,
        ttl: Some(call.cx.config.compat_ttl_seconds),
    };
    write(call, target, op).await
}

/// CountAPI's `GET /set/:ns/:key?value=N`, allowed by the counter's `enable_reset`.
async fn countapi_set(call: &Call<'_>) -> Result<Reply, CompatError> {
    let value = params::number(call.req.query(), "value", None)?;
    authorize(call, Right::Write, Some(&call.target()?.ns))?;
    match guarded(call, GuardedChange::Set(value), Guard::Reset).await? {
        OpResult::Changed { old_value, value, .. } => {
            Ok(Reply::ok(json!({ "old_value": old_value, "value": value })))
        }
        _ => Err(unexpected()),
    }
}

/// CountAPI's `GET /update/:ns/:key?amount=N`, within the counter's update bounds.
async fn countapi_update(call: &Call<'_>) -> Result<Reply, CompatError> {
    let amount = params::number(call.req.query(), "amount", None)?;
    authorize(call, Right::Write, Some(&call.target()?.ns))?;
    match guarded(call, GuardedChange::Add(amount), Guard::Bounds).await? {
        OpResult::Changed { value, .. } => Ok(Reply::ok(json!({ "value": value }))),
        _ => Err(unexpected()),
    }
}

/// Abacus's token routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AdminChange {
    Set,
    Reset,
    Update,
    Delete,
}

/// `POST /set|reset|update|delete/:ns/:key` with the counter's admin key (or a write token the
/// operator configured for its namespace).
async fn admin_change(call: &Call<'_>, kind: AdminChange) -> Result<Reply, CompatError> {
    let target = call.target()?;
    let query = call.req.query();
    let change = match kind {
        AdminChange::Set => GuardedChange::Set(params::number(query, "value", None)?),
        AdminChange::Reset => GuardedChange::Set(0),
        AdminChange::Update => match params::number(query, "value", None)? {
            0 => {
                return Err(CompatError::new(
                    400,
                    "changing value by 0 does nothing, please provide a non-zero value in the fmt of ?value=NEW_VALUE",
                ))
            }
            by => GuardedChange::Add(by),
        },
        AdminChange::Delete => GuardedChange::Delete,
    };
    let Some(token) = call.token.as_deref() else {
        return Err(CompatError::new(
            400,
            "Token is required, please provide a token in the format of a Bearer token header or ?token=ADMIN_TOKEN",
        ));
    };
    let operator = call.cx.config.access.is_operator(Some(token), &target.ns);
    let guard = if operator { Guard::Operator } else { Guard::AdminKey { hash: AdminKeyHash::of(token) } };
    let path = format!("{}/{}", target.ns, target.key);
    match (kind, guarded(call, change, guard).await?) {
        (AdminChange::Delete, OpResult::Deleted { .. }) => Ok(Reply::ok(json!({
            "status": "ok",
            "message": format!("Deleted key: {path}"),
        }))),
        (_, OpResult::Changed { value, .. }) => Ok(Reply::ok(json!({
            "status": "ok",
            "message": format!("{path} is now {value}"),
            "value": value,
        }))),
        _ => Err(unexpected()),
    }
}

fn random_failed() -> CompatError {
    CompatError::new(500, "Failed to generate random string. Try again later.")
}

/// A random UUID (version 4) from the runtime's cryptographic generator.
fn random_uuid() -> Result<String, CompatError> {
    let crypto = js_sys::Reflect::get(&js_sys::global(), &"crypto".into()).map_err(|_| random_failed())?;
    let make: js_sys::Function = js_sys::Reflect::get(&crypto, &"randomUUID".into())
        .ok()
        .and_then(|make| make.dyn_into().ok())
        .ok_or_else(random_failed)?;
    make.call0(&crypto).ok().and_then(|uuid| uuid.as_string()).ok_or_else(random_failed)
}

/// Creates the counter `target` names, owned by `admin_key` if one is given; answers the
/// shard's result (for an owned counter, the key it was created with: a keyed retry's is the
/// first try's).
async fn create(
    call: &Call<'_>,
    target: &Target,
    value: i64,
    settings: CounterSettings,
    admin_key: Option<String>,
) -> Result<OpResult, CompatError> {
    authorize(call, Right::Write, Some(&target.ns))?;
    let op = ShardOp::Create {
        ns: target.ns.clone(),
        key: target.key.clone(),
        value,
        settings,
        admin_key,
        ttl: Some(call.cx.config.compat_ttl_seconds),
    };
    match write(call, target, op).await? {
        created @ (OpResult::Value { .. } | OpResult::Created { .. }) => Ok(created),
        _ => Err(unexpected()),
    }
}

/// CountAPI's `GET /create?namespace=&key=&value=&enable_reset=&update_lowerbound=&update_upperbound=`.
async fn countapi_create(call: &Call<'_>, x_path: &mut Option<String>) -> Result<Reply, CompatError> {
    let params = CreateParams::parse(call.req.query())?;
    let key = match params.key {
        Some(key) => key,
        None => random_uuid()?,
    };
    let ns = params.namespace.as_deref().map(percent_free);
    let (ns, key) = resolve_names(call.req, ns.as_deref(), &percent_free(&key))?;
    *x_path = Some(format!("{ns}/{key}"));
    let settings = CounterSettings {
        enable_reset: params.enable_reset,
        update_lowerbound: params.update_lowerbound,
        update_upperbound: params.update_upperbound,
        admin_key_hash: None,
    };
    let target = Target::new(call.cx.config, ns, key);
    create(call, &target, params.value, settings, None).await?;
    Ok(Reply::ok(
        json!({ "namespace": target.ns.as_str(), "key": target.key.as_str(), "value": params.value }),
    ))
}

/// Query values arrive decoded; the name rule then reads them as they are. A `%` breaks the rule
/// either way, so escaping it keeps `resolve` from decoding a second time.
fn percent_free(text: &str) -> String {
    text.replace('%', "%25")
}

/// Abacus's `/create/:ns/:key` (or `/create/` for random names) `?initializer=N`: 201 with the
/// admin key. The counter keeps only its hash; the key itself is shown this once, or again to
/// a retry with the same `Idempotency-Key` within the record's 24 hours (the record holds it).
async fn abacus_create(call: &Call<'_>, x_path: &mut Option<String>) -> Result<Reply, CompatError> {
    let value = params::number(call.req.query(), "initializer", Some(0))?;
    let target = match &call.target {
        Some(target) => target.clone(),
        None => {
            let random = |n| random_uuid().map(|u| u.replace('-', "").chars().take(n).collect::<String>());
            let (ns, key) = names::resolve(Some(&random(16)?), &random(16)?, &names::Page::default())
                .ok_or_else(random_failed)?;
            *x_path = Some(format!("{ns}/{key}"));
            Target::new(call.cx.config, ns, key)
        }
    };
    // Who may not create learns that first, whatever else is wrong with the request.
    authorize(call, Right::Write, Some(&target.ns))?;
    // A replay answers the admin key, so the Idempotency-Key that asks for one must be as hard
    // to guess as a key.
    if counters::idempotency_key(call.req)
        .map_err(|e| from_api(&e))?
        .is_some_and(|key| key.as_str().len() < MIN_CREATE_IDEMPOTENCY_KEY)
    {
        return Err(CompatError::new(
            400,
            "An Idempotency-Key on /create must have at least 16 characters (a UUID, say): a retry is answered the admin key.",
        ));
    }
    let drawn = random_uuid()?;
    match create(call, &target, value, CounterSettings::default(), Some(drawn)).await? {
        OpResult::Created { value, admin_key, .. } => Ok(Reply::Json(
            201,
            json!({ "key": target.key.as_str(), "namespace": target.ns.as_str(), "admin_key": admin_key, "value": value }),
        )),
        _ => Err(unexpected()),
    }
}

/// The shortest Idempotency-Key `/create/:ns/:key` takes (see [`abacus_create`]).
const MIN_CREATE_IDEMPOTENCY_KEY: usize = 16;

async fn info(call: &Call<'_>) -> Result<Reply, CompatError> {
    let target = call.target()?;
    authorize(call, Right::Read, Some(&target.ns))?;
    let op = ShardOp::Info { ns: target.ns.clone(), key: target.key.clone() };
    let mode = call.cx.config.compat_mode;
    let now = now_ms();
    // Straight to the shard, as a counter's days are read (see `http::days`).
    let answer = shard_client::execute_one(call.cx.env, target.shard, op.into()).await;
    match answer.map_err(|e| from_api(&e))? {
        OpResult::Info(info) => Ok(Reply::ok(answers::info(mode, &target.ns, &target.key, &info, now))),
        OpResult::Failed { error: edgecount_core::CoreError::NotFound } => {
            let (status, body) = answers::missing_info(mode, &target.ns, &target.key);
            Ok(Reply::Json(status, body))
        }
        OpResult::Failed { error } => Err(CompatError::from_core(&error)),
        _ => Err(unexpected()),
    }
}

/// `/stats`: the shards' totals, asked once at a time and reused (`isolate::shard_stats`).
/// Public only while the service is open, as Abacus has it; otherwise for admin tokens.
async fn stats(call: &Call<'_>) -> Result<Reply, CompatError> {
    authorize(call, Right::Admin, None)?;
    let per_shard = shard_stats::shard_stats(call.cx.env, call.cx.config).await.map_err(|e| from_api(&e))?;
    let totals = per_shard.iter().fold(Totals::default(), |sum, shard| Totals {
        keys: sum.keys + shard.keys,
        ops: sum.ops + shard.ops,
        calls: sum.calls + shard.calls,
        reclaimed: sum.reclaimed + shard.reclaimed,
        commands: sum.commands.plus(shard.commands),
    });
    let version = concat!("edgecount ", env!("CARGO_PKG_VERSION"));
    Ok(Reply::ok(answers::stats(call.cx.config.compat_mode, &totals, version, clock::uptime_ms())))
}
