//! A shard's part in a change of the shard count (see [`edgecount_core::shard::migration`] for
//! the steps and why they are safe to repeat):
//!
//! - **Taking over.** Before running a request that writes a key that moves here, the shard
//!   asks the key's old home for its parcel and stores it with the key's arrival mark; ops on
//!   other keys, or on keys already arrived, run at once.
//! - **Reading where held.** A request that only reads is read at the old homes of its keys
//!   that have not arrived, which hold them unchanged until they are handed over: a call, and
//!   no write, where a take-over would cost both.
//! - **Forwarding.** A request from an isolate still placing keys under another count is split
//!   by the keys' homes under this deployment's count: the part that is this shard's runs here,
//!   the rest goes to the other homes, and the answers are put back in order. A forwarded op is
//!   applied only at the key's home, never here, which is what keeps a handed-over copy from
//!   changing. A receipted request (a one-way flush) that this shard applied before the change
//!   is forwarded only for the ops it did not apply.
//! - **Handing over.** While keys that no longer belong here remain, the shard's alarm sweeps
//!   its names in pages and hands each leaving key to its new home, deleting its own copy only
//!   after the new home has answered that it holds the key. A sweep that ends with nothing left
//!   is kept as done.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use edgecount_core::hashing::{key_set, KeySet};
use edgecount_core::partition::shard_for;
use edgecount_core::shard::migration::{self, Migration, Parcel, RecordsAfter, MAX_PARCELS_PER_CALL};
use edgecount_core::shard::protocol::{Placed, ShardCall, ShardRequest, ShardResponse};
use edgecount_core::shard::receipt;
use edgecount_core::shard::Atomic;
use edgecount_core::{CoreError, Key, Namespace, OpResult, ShardId};
use wasm_bindgen::prelude::JsValue;
use worker::console_error;

use crate::shard::object::ShardObject;
use crate::shard::resharding::error::ReshardingError;
use crate::shard::resharding::state::SWEEP_PAGE;
use crate::shard::resharding::store::Adopted;
use crate::shared::clock::now_ms;
use crate::shared::{drills, shard_client};

/// Pages one alarm sweeps before it lets the shard's other work in (it sets itself again).
const PAGES_PER_ALARM: usize = 4;
/// How many times as long as a sweep took the shard pauses before the next: it keeps 32/33 of
/// its time for its own requests while keys move. Shards that share a machine (every shard of
/// a local run shares one thread) hand keys over at once, so a larger share would leave their
/// requests little; a change of count is rare, and may take minutes.
const PAUSE_PER_SWEEP: u64 = 32;
/// The longest pause between two sweeps. A sweep's time is wall time, waits for the new homes
/// included (the clock moves only at I/O on Workers), so a sweep of large cache entries that
/// waits long on its calls would otherwise pause for minutes.
const MAX_PAUSE_MS: u64 = 5_000;
/// The shortest pause between two alarms that hand keys over.
const MIN_PAUSE_MS: u64 = 5;
/// How long the alarm waits before trying again after a hand-over failed.
const RETRY_AFTER_MS: u64 = 1_000;
/// Whether a request can run at once.
pub enum Route {
    Here,
    /// Once storage has said which of its moving keys have arrived and the rest are taken
    /// over (read at their old homes, for a request that only reads), or once forwarded.
    AfterHandOvers,
    /// Not at all: the shard is in the middle of a change this deployment no longer declares
    /// (it declares none, or another), where a key not yet moved would read 0 at its new home
    /// and its writes be lost, or a stale copy be taken for it.
    Refused(CoreError),
}

/// Whether `object` has handed over every key that left it in `change` (a shard that had none
/// to hand over too, once its sweep found none).
///
/// # Errors
/// A storage failure.
pub fn handed_over(object: &ShardObject, change: Migration) -> Result<bool, ReshardingError> {
    Ok(object.store.hand_overs()?.done == Some(change))
}

/// How many shards of either count in `change` have not (or cannot say they have) handed over
/// every key that left them.
pub async fn shards_unfinished(object: &ShardObject, change: Migration) -> u32 {
    let asks = (0..change.from.max(change.to))
        .map(|shard| shard_client::handed_over(&object.env, ShardId(shard), change));
    futures_util::future::join_all(asks).await.into_iter().filter(|done| !matches!(done, Ok(true))).count()
        as u32
}

/// Has every shard of either count in `change` forget it, declared over; answers how many
/// could not.
pub async fn settle_everywhere(object: &ShardObject, change: Migration) -> u32 {
    let settles = (0..change.from.max(change.to))
        .map(|shard| shard_client::settle_change(&object.env, ShardId(shard), change));
    futures_util::future::join_all(settles).await.into_iter().filter(Result::is_err).count() as u32
}

/// The count the request's sender placed its keys under. A sender that does not say is of a
/// version from before changes of count, so it knows only the count being left.
fn placed_under(object: &ShardObject, request: &ShardRequest) -> u32 {
    let unsaid = object.hand_overs.migration.map_or(object.shards, |migration| migration.from);
    request.placed.map_or(unsaid, |placed| placed.shards)
}

/// Whether `request` can run at once, or needs keys taken over or forwarding first.
///
/// # Errors
/// A storage failure.
pub fn route(object: &ShardObject, request: &ShardRequest) -> Result<Route, ReshardingError> {
    if let Some(Migration { from, to }) = object.hand_overs.interrupted.get() {
        return Ok(Route::Refused(CoreError::ChangeInterrupted { from, to }));
    }
    if let Some(placed) = request.placed {
        object.hand_overs.learn_shard(&object.store, placed.shard)?;
    }
    if placed_under(object, request) != object.shards {
        return Ok(Route::AfterHandOvers);
    }
    match object.hand_overs.migration {
        // Storage is asked which of them have arrived once, on the way that takes them over.
        Some(migration) if !not_known_arrived(object, migration, &request.ops).is_empty() => {
            Ok(Route::AfterHandOvers)
        }
        _ => Ok(Route::Here),
    }
}

/// Runs a request that [`route`] could not run at once, and answers its JSON response.
///
/// # Errors
/// A failure to take a key over or to forward ops: the whole call fails, and its sender treats
/// its writes as of unknown outcome.
pub async fn run_placed(object: &Rc<ShardObject>, request: ShardRequest) -> Result<String, JsValue> {
    if placed_under(object, &request) == object.shards {
        run_owned(object, &request).await
    } else {
        forward(object, &request).await
    }
}

/// Runs a request whose keys are all this shard's: one that writes once the keys that have not
/// arrived are taken over, one that only reads with those keys read where they are.
async fn run_owned(object: &Rc<ShardObject>, request: &ShardRequest) -> Result<String, JsValue> {
    if request.ops.iter().any(|call| call.op.is_write()) {
        take_over_keys_of(object, request).await?;
        return object.run_here(request).await;
    }
    read_where_held(object, request).await
}

/// Runs a request that only reads keys that are all this shard's, reading each key that has not
/// arrived at its old home: the old home holds its copy unchanged until this shard has stored
/// it, and a read changes nothing, so this costs a call and no write where a take-over costs
/// both. A key that arrived while its old home was answering (the old home may have handed it
/// over and deleted its copy meanwhile) is read again here.
async fn read_where_held(object: &Rc<ShardObject>, request: &ShardRequest) -> Result<String, JsValue> {
    let Some(migration) = object.hand_overs.migration else { return object.run_here(request).await };
    let Some(own) = object.hand_overs.shard.get() else {
        // Not told its own index, the shard cannot tell its part from its old homes': it takes
        // the keys over instead, as for a write, rather than read 0 for keys it does not hold.
        take_over_keys_of(object, request).await?;
        return object.run_here(request).await;
    };
    let missing = unarrived(object, migration, &request.ops)?;
    if missing.is_empty() {
        return object.run_here(request).await;
    }
    let missing: KeySet<(Namespace, Key)> = missing.into_iter().collect();
    let groups = migration::grouped(0..request.ops.len(), |&place| {
        let call = &request.ops[place];
        let (ns, key) = call.op.target();
        if missing.contains(&name_of(call)) {
            migration.old_home(ns, key)
        } else {
            ShardId(own)
        }
    });
    let unanswered = vec![None; request.ops.len()];
    gather(object, request, groups, unanswered, |home, part| async move {
        if home.0 != own {
            // Every key of this part had not arrived when it was sent; memory learns of each
            // that arrives meanwhile, unless it forgets what it knew.
            let state = &object.hand_overs;
            let forgotten = state.forgotten.get();
            let results = shard_client::execute_request(&object.env, home, &part).await;
            let arrived_meanwhile = state.forgotten.get() != forgotten
                || part.ops.iter().any(|call| state.arrived.borrow().contains(&name_of(call)));
            if !arrived_meanwhile {
                return results
                    .map_err(|_| ReshardingError::Call("a key's old shard did not answer a read").into());
            }
            take_over_keys_of(object, &part).await?;
        }
        results_of(&object.run_here(&part).await?)
    })
    .await
}

/// Takes over the keys of `request` (all this shard's) that move here and have not arrived.
///
/// # Errors
/// A storage failure, or an old home that does not hand a key over.
pub async fn take_over_keys_of(object: &Rc<ShardObject>, request: &ShardRequest) -> Result<(), JsValue> {
    let Some(migration) = object.hand_overs.migration else { return Ok(()) };
    let missing = unarrived(object, migration, &request.ops)?;
    if missing.is_empty() {
        return Ok(());
    }
    Ok(take_over(object, migration, missing).await?)
}

/// The keys of `ops` that move here in `migration` and have not arrived, each once.
fn unarrived(
    object: &ShardObject,
    migration: Migration,
    ops: &[ShardCall],
) -> Result<Vec<(Namespace, Key)>, ReshardingError> {
    let candidates = not_known_arrived(object, migration, ops);
    if candidates.is_empty() {
        return Ok(candidates);
    }
    let names: Vec<(&Namespace, &Key)> = candidates.iter().map(|(ns, key)| (ns, key)).collect();
    let arrived_at = object.store.arrived(&names, migration)?;
    let (arrived, missing): (Vec<_>, Vec<_>) =
        candidates.into_iter().zip(arrived_at).partition(|(_, arrived)| *arrived);
    object.hand_overs.remember_arrived(arrived.iter().map(|((ns, key), _)| (ns, key)));
    Ok(missing.into_iter().map(|(name, _)| name).collect())
}

/// The keys of `ops` that move here in `migration` and are not known in memory to have
/// arrived, each once: those storage has to be asked about.
fn not_known_arrived(object: &ShardObject, migration: Migration, ops: &[ShardCall]) -> Vec<(Namespace, Key)> {
    let arrived = object.hand_overs.arrived.borrow();
    let own = object.hand_overs.shard.get();
    let mut seen = key_set();
    let mut candidates = Vec::new();
    for call in ops {
        let (ns, key) = call.op.target();
        let name = (ns.clone(), key.clone());
        // A key's old home never takes it over from itself (an isolate of the previous
        // deployment may still ask it for a stream of a key leaving it).
        let moves_here = migration.moves(ns, key) && Some(migration.old_home(ns, key).0) != own;
        if moves_here && !arrived.contains(&name) && seen.insert(name.clone()) {
            candidates.push(name);
        }
    }
    candidates
}

/// Takes `keys` over from their old homes.
async fn take_over(
    object: &Rc<ShardObject>,
    migration: Migration,
    keys: Vec<(Namespace, Key)>,
) -> Result<(), ReshardingError> {
    let by_old_home = migration::grouped(keys, |(ns, key)| migration.old_home(ns, key));
    // Memory knows every key that arrived while the object runs (unless it had to forget them
    // at its bound: a key then goes on arriving, to no effect).
    let known_arrived = |name: &(Namespace, Key)| object.hand_overs.arrived.borrow().contains(name);
    let stored_through = |name: &(Namespace, Key)| object.hand_overs.stored_through(name);
    let takes = by_old_home.iter().map(|(old, names)| {
        carry(names, known_arrived, stored_through, move |rest, after| async move {
            let parcels = shard_client::hand_over(&object.env, *old, rest, after.as_ref(), migration)
                .await
                .map_err(|error| ReshardingError::NotHandedOver {
                old_home: *old,
                detail: error.as_string().unwrap_or_default(),
            })?;
            let (lapses_at, _) = adopt_parcels(object, &parcels, migration)?;
            object.reclaim_by(lapses_at).await.map_err(|_| ReshardingError::AlarmUnset)?;
            Ok(parcels)
        })
    });
    futures_util::future::join_all(takes).await.into_iter().collect()
}

/// Moves `keys`, all of one old home and one new, in as many calls as they take: `call` moves
/// the parcels of the keys it is given (at most [`MAX_PARCELS_PER_CALL`], the first one's
/// records continuing after the cursor, if any) and answers them. A key that `arrived` says is
/// at its new home already is asked for no further, however many of its pages are still to
/// come: another take-over, or its old home's alarm, brought it in meanwhile, and the new home
/// ignores any later copy of it. A key whose records `stored_through` says are stored further
/// than this take-over has carried them goes on after that page.
async fn carry<'k, Moved>(
    keys: &'k [(Namespace, Key)],
    arrived: impl Fn(&(Namespace, Key)) -> bool,
    stored_through: impl Fn(&(Namespace, Key)) -> Option<RecordsAfter>,
    mut call: impl FnMut(&'k [(Namespace, Key)], Option<RecordsAfter>) -> Moved,
) -> Result<(), ReshardingError>
where
    Moved: Future<Output = Result<Vec<Parcel>, ReshardingError>>,
{
    let (mut rest, mut after) = (keys, None);
    loop {
        while rest.first().is_some_and(&arrived) {
            rest = &rest[1..];
            after = None;
        }
        let Some(first) = rest.first() else { return Ok(()) };
        if let Some(stored) = stored_through(first).filter(|stored| after.as_ref() < Some(stored)) {
            after = Some(stored);
        }
        let asked = &rest[..rest.len().min(MAX_PARCELS_PER_CALL)];
        let parcels = call(asked, after.clone()).await?;
        let (came, next) = migration::progress(asked, after.as_ref(), &parcels)?;
        rest = &rest[came..];
        after = next;
    }
}

/// Stores what `parcels` carry of keys that have not arrived, and forgets what memory held of
/// those that arrive; answers when the first thing they hold lapses, which the alarm must
/// reclaim by then, and the keys whose parcels were ignored as they had arrived before.
fn adopt_parcels(
    object: &ShardObject,
    parcels: &[Parcel],
    migration: Migration,
) -> Result<Adoption, ReshardingError> {
    // Wholly or not at all: a failure leaves the sender to send the parcels again.
    let Adopted { arrived, there_before } =
        object.store.atomically(|| object.store.adopt(parcels, migration))?;
    // The cache index learns of entries that arrived by being built again (before the next
    // cache write); keys without one leave it as it is.
    let entries_arrived = parcels.iter().any(|p| p.cache.is_some());
    object.engine.borrow_mut().forget_keys(arrived.iter().map(|(ns, key)| (ns, key)), entries_arrived);
    object.hand_overs.remember_arrived(parcels.iter().filter(|p| !p.records_follow).map(|p| (&p.ns, &p.key)));
    for page in parcels.iter().filter(|p| p.records_follow) {
        if let Some(last) = page.records.last() {
            object.hand_overs.remember_page(&(page.ns.clone(), page.key.clone()), RecordsAfter::past(last));
        }
    }
    Ok((parcels.iter().filter_map(Parcel::lapses_at).min(), there_before))
}

/// When the first thing adopted parcels hold lapses, and the keys among them that had arrived
/// before (see [`Adopted::there_before`]).
type Adoption = (Option<u64>, Vec<(Namespace, Key)>);

/// The `handOverPaged` call: what the next call carries of the JSON `[[ns, key], ...]` (see
/// [`crate::shard::sql_store::SqlShardStore::parcels`]), the first key's records continuing
/// after the JSON `after` (`null` for from the start), as JSON.
///
/// # Errors
/// A malformed or too long list, or a storage failure.
pub fn hand_over(
    object: &ShardObject,
    keys: &str,
    after: &str,
    change: Migration,
) -> Result<String, ReshardingError> {
    same_change(object, change)?;
    let keys: Vec<(Namespace, Key)> = parse("keys", keys)?;
    let after: Option<RecordsAfter> = parse("cursor", after)?;
    if keys.len() > MAX_PARCELS_PER_CALL {
        return Err(ReshardingError::TooManyKeys(keys.len()));
    }
    let parcels = object.store.parcels(&keys, after.as_ref(), now_ms())?;
    serde_json::to_string(&parcels)
        .map_err(|e| ReshardingError::Malformed { what: "parcels to send", detail: e.to_string() })
}

/// `text` read as the JSON of `what` a call between shards carries.
fn parse<T: serde::de::DeserializeOwned>(what: &'static str, text: &str) -> Result<T, ReshardingError> {
    serde_json::from_str(text).map_err(|e| ReshardingError::Malformed { what, detail: e.to_string() })
}

/// The `adoptPaged` call: stores the JSON parcels; answers when the first thing they hold
/// lapses, and the keys among them that had arrived before.
///
/// # Errors
/// Malformed or too many parcels, no change under way, or a storage failure.
pub fn adopt(object: &ShardObject, parcels: &str, change: Migration) -> Result<Adoption, ReshardingError> {
    same_change(object, change)?;
    let parcels: Vec<Parcel> = parse("parcels", parcels)?;
    migration::within_one_call(&parcels)?;
    adopt_parcels(object, &parcels, change)
}

/// Refuses a hand-over between shards that are not under the same change: a shard still on
/// the previous configuration would go on applying ops to a key it handed over. A shard that
/// another change interrupted takes part in none (see [`Route::Refused`]).
fn same_change(object: &ShardObject, change: Migration) -> Result<(), ReshardingError> {
    let state = &object.hand_overs;
    if state.migration == Some(change) && state.interrupted.get().is_none() {
        Ok(())
    } else {
        Err(ReshardingError::NotUnderChange(change))
    }
}

/// Sends each op of a request placed under another count to its home under this one (running
/// this shard's own part here), and answers the results in the request's order.
async fn forward(object: &Rc<ShardObject>, request: &ShardRequest) -> Result<String, JsValue> {
    // A receipted request this shard applied (in part) before its keys moved is sent on only
    // for the ops it did not apply; those it did are answered as replayed, with no value.
    let applied = match &request.receipt {
        Some(receipt) => receipt::applied_earlier(&object.store, receipt, &request.ops, now_ms())
            .map_err(|error| JsValue::from_str(&error.to_string()))?,
        None => Vec::new(),
    };
    let was_applied = |place: usize| applied.get(place).copied().unwrap_or(false);
    let homes = migration::grouped(0..request.ops.len(), |&place| {
        let (ns, key) = request.ops[place].op.target();
        shard_for(ns, key, object.shards)
    });
    let groups: Vec<(ShardId, Vec<usize>)> = homes
        .into_iter()
        .map(|(home, places)| (home, places.into_iter().filter(|&place| !was_applied(place)).collect()))
        .filter(|(_, places): &(ShardId, Vec<usize>)| !places.is_empty())
        .collect();
    let answered: Vec<Option<OpResult>> = (0..request.ops.len())
        .map(|place| was_applied(place).then(|| OpResult::Replayed { first: Box::new(OpResult::Stored) }))
        .collect();
    let own = object.hand_overs.shard.get();
    gather(object, request, groups, answered, |home, part| async move {
        if own == Some(home.0) {
            results_of(&run_owned(object, &part).await?)
        } else {
            shard_client::execute_request(&object.env, home, &part)
                .await
                .map_err(|_| JsValue::from_str("the key's new shard did not answer a forwarded call"))
        }
    })
    .await
}

/// Runs each group of `request`'s ops (its places, and the shard they go to) through `run`, all
/// at once, each with its share of the answer budget and placed under this deployment's count,
/// and answers the results in the request's order over `answered`, which holds those answered
/// already.
async fn gather<Ran>(
    object: &ShardObject,
    request: &ShardRequest,
    groups: Vec<(ShardId, Vec<usize>)>,
    mut answered: Vec<Option<OpResult>>,
    run: impl Fn(ShardId, ShardRequest) -> Ran,
) -> Result<String, JsValue>
where
    Ran: Future<Output = Result<Vec<OpResult>, JsValue>>,
{
    let share = request.answer_budget.map(|budget| budget / groups.len().max(1) as u64);
    let runs = groups.iter().map(|(home, places)| {
        run(
            *home,
            ShardRequest {
                ops: places.iter().map(|&place| request.ops[place].clone()).collect(),
                answer_budget: share,
                receipt: request.receipt.as_ref().map(|whole| receipt::forwarded(whole, *home)),
                placed: Some(Placed { shards: object.shards, shard: home.0 }),
            },
        )
    });
    let answers: Vec<Result<Vec<OpResult>, JsValue>> = futures_util::future::join_all(runs).await;
    for ((_, places), answer) in groups.iter().zip(answers) {
        for (&place, result) in places.iter().zip(answer?) {
            answered[place] = Some(result);
        }
    }
    let results: Option<Vec<OpResult>> = answered.into_iter().collect();
    let results = results.ok_or_else(|| JsValue::from_str("a forwarded call answered too few results"))?;
    serde_json::to_string(&ShardResponse { results }).map_err(|e| JsValue::from_str(&e.to_string()))
}

/// The name an op is about.
fn name_of(call: &ShardCall) -> (Namespace, Key) {
    let (ns, key) = call.op.target();
    (ns.clone(), key.clone())
}

/// The results of a JSON [`ShardResponse`] this shard answered.
fn results_of(answer: &str) -> Result<Vec<OpResult>, JsValue> {
    let answer: ShardResponse =
        serde_json::from_str(answer).map_err(|e| JsValue::from_str(&e.to_string()))?;
    Ok(answer.results)
}

/// The alarm's part: hands over a few pages of leaving keys, and answers when the alarm should
/// fire again (after a pause [`PAUSE_PER_SWEEP`] times as long as this sweep took, at most
/// [`MAX_PAUSE_MS`], while keys remain; a second later after a failure), or `None` when
/// nothing is left or no change is under way.
pub async fn push(object: &Rc<ShardObject>) -> Option<u64> {
    let state = &object.hand_overs;
    let (Some(migration), Some(shard)) = (state.migration, state.shard.get()) else { return None };
    if !state.pending() || drills::holds_hand_overs(&object.env) {
        return None;
    }
    let started = now_ms();
    match sweep(object, migration, ShardId(shard)).await {
        Ok(true) => {
            let now = now_ms();
            let pause = PAUSE_PER_SWEEP * now.saturating_sub(started);
            Some(now + pause.clamp(MIN_PAUSE_MS, MAX_PAUSE_MS))
        }
        Ok(false) => None,
        Err(detail) => {
            console_error!("handing keys over failed; trying again in a second: {detail}");
            Some(now_ms() + RETRY_AFTER_MS)
        }
    }
}

/// Sweeps up to [`PAGES_PER_ALARM`] pages of names, handing over at most the configured number
/// of keys; answers whether names remain.
async fn sweep(
    object: &Rc<ShardObject>,
    migration: Migration,
    shard: ShardId,
) -> Result<bool, ReshardingError> {
    let state = &object.hand_overs;
    let mut allowance = state.keys_per_alarm;
    for _ in 0..PAGES_PER_ALARM {
        let after = state.cursor.borrow().clone();
        let page = object.store.names_after(after.as_ref(), SWEEP_PAGE)?;
        let (mut leaving, mut passed) = (Vec::new(), 0);
        for (ns, key) in &page.names {
            if leaving.len() == allowance {
                break;
            }
            passed += 1;
            if migration.leaves(shard, ns, key) {
                leaving.push((ns.clone(), key.clone()));
            }
        }
        allowance -= leaving.len();
        send_away(object, migration, leaving).await?;
        let whole_page = passed == page.names.len();
        if whole_page && !page.full {
            object.store.finish_hand_overs(migration)?;
            state.done.set(true);
            state.cursor.replace(None);
            return Ok(false);
        }
        let reached = if whole_page {
            page.last
        } else {
            page.names
                .get(passed.saturating_sub(1))
                .map(|(ns, key)| (ns.as_str().to_owned(), key.as_str().to_owned()))
        };
        state.cursor.replace(reached.or(after));
        if allowance == 0 {
            break;
        }
    }
    Ok(true)
}

/// Hands `keys` to their new homes, deleting each copy here once its new home holds it.
async fn send_away(
    object: &Rc<ShardObject>,
    migration: Migration,
    keys: Vec<(Namespace, Key)>,
) -> Result<(), ReshardingError> {
    let by_home = migration::grouped(keys, |(ns, key)| shard_for(ns, key, migration.to));
    // Only the new home knows which keys arrived (taken over by a request): it ignores their
    // parcels and says so, and a key it names is sent no further page of its records.
    let there_before: RefCell<KeySet<(Namespace, Key)>> = RefCell::new(key_set());
    for (home, names) in &by_home {
        let there_before = &there_before;
        carry(
            names,
            |name| there_before.borrow().contains(name),
            |_| None,
            |rest, after| async move {
                let parcels = object.store.parcels(rest, after.as_ref(), now_ms())?;
                let held = shard_client::adopt(&object.env, *home, &parcels, migration)
                    .await
                    .map_err(|_| ReshardingError::NotTaken { new_home: *home, keys: parcels.len() })?;
                there_before.borrow_mut().extend(held);
                // Every key that arrived with this call, and every one the new home had already.
                let sent: Vec<(Namespace, Key)> = parcels
                    .iter()
                    .map(|p| ((p.ns.clone(), p.key.clone()), p.records_follow))
                    .filter(|(name, paged)| !paged || there_before.borrow().contains(name))
                    .map(|(name, _)| name)
                    .collect();
                object.store.atomically(|| object.store.release(&sent))?;
                let counted = &object.hand_overs.leaving_left;
                counted.set(counted.get().map(|count| count.saturating_sub(sent.len() as u64)));
                // Their rows are gone: memory drops them, and the cache index keeps the rest.
                object.engine.borrow_mut().forget_released(sent.iter().map(|(ns, key)| (ns, key)));
                object.end_streams(&sent);
                Ok(parcels)
            },
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use edgecount_core::shard::migration::ParcelRecord;

    use super::*;

    fn name(i: usize) -> (Namespace, Key) {
        (Namespace::new("moving").unwrap(), Key::new(&format!("key-{i}")).unwrap())
    }

    fn whole(i: usize) -> Parcel {
        let (ns, key) = name(i);
        Parcel::empty(ns, key)
    }

    /// A page of key `i`'s records, its last one `ends_at`.
    fn page(i: usize, ends_at: usize) -> Parcel {
        let record = ParcelRecord {
            kind: "counter".into(),
            idempotency_key: format!("{ends_at:08}"),
            request_digest: "0".repeat(32),
            result: "{}".into(),
            created_at_ms: 1,
        };
        Parcel { records: vec![record], records_follow: true, ..whole(i) }
    }

    /// Runs a carry whose calls answer at once to its end.
    fn run(carried: impl Future<Output = Result<(), ReshardingError>>) -> Result<(), ReshardingError> {
        match pin!(carried).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(done) => done,
            Poll::Pending => panic!("calls that answer at once left the carry waiting"),
        }
    }

    #[test]
    fn a_take_over_asks_for_no_more_pages_of_a_key_that_arrived_meanwhile() {
        let keys = vec![name(0), name(1)];
        let arrived = RefCell::new(Vec::new());
        let calls = RefCell::new(Vec::new());
        let carried = carry(
            &keys,
            |key| arrived.borrow().contains(key),
            |_| None,
            |asked, after| {
                calls.borrow_mut().push((asked.to_vec(), after));
                let answer = if calls.borrow().len() == 1 {
                    // A page of key 0; meanwhile another take-over brings key 0 in whole.
                    arrived.borrow_mut().push(name(0));
                    vec![page(0, 1)]
                } else {
                    vec![whole(1)]
                };
                async move { Ok::<_, ReshardingError>(answer) }
            },
        );
        assert_eq!(run(carried), Ok(()));
        let calls = calls.into_inner();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[1], (vec![name(1)], None), "key 0's next page was not asked for");
    }

    #[test]
    fn a_carry_pages_a_key_that_has_not_arrived_to_its_end() {
        let keys = vec![name(0)];
        let calls = RefCell::new(0);
        let carried = carry(
            &keys,
            |_| false,
            |_| None,
            |_, _| {
                *calls.borrow_mut() += 1;
                let answer = match *calls.borrow() {
                    n @ 1..=2 => vec![page(0, n)],
                    _ => vec![whole(0)],
                };
                async move { Ok::<_, ReshardingError>(answer) }
            },
        );
        assert_eq!(run(carried), Ok(()));
        assert_eq!(calls.into_inner(), 3);
    }

    #[test]
    fn a_take_over_goes_on_after_the_furthest_page_another_stored() {
        let keys = vec![name(0)];
        let through = |n: usize| RecordsAfter { kind: "counter".into(), idempotency_key: format!("{n:08}") };
        let stored = RefCell::new(None);
        let calls = RefCell::new(Vec::new());
        let carried = carry(
            &keys,
            |_| false,
            |_| stored.borrow().clone(),
            |_, after| {
                calls.borrow_mut().push(after.clone());
                let answer = match calls.borrow().len() {
                    // Page 1; meanwhile other take-overs store pages 2 to 5.
                    1 => {
                        *stored.borrow_mut() = Some(through(5));
                        vec![page(0, 1)]
                    }
                    2 => vec![page(0, 6)],
                    _ => vec![whole(0)],
                };
                async move { Ok::<_, ReshardingError>(answer) }
            },
        );
        assert_eq!(run(carried), Ok(()));
        assert_eq!(calls.into_inner(), vec![None, Some(through(5)), Some(through(6))]);
    }
}
