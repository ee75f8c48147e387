//! Calls that arrive together run together. A shard runs a call at once when it is idle; if
//! the call wrote, the shard then waits for those writes to be durable (`storage.sync()`), and
//! every call that writes and arrives meanwhile joins the next group (a call that only reads
//! runs at once). When the wait ends, the group runs
//! in arrival order in one transaction ([`ShardEngine::run_group`]): the increments of one key
//! are one row written, each call is answered the results of its own ops, and the runtime's
//! output gate holds each answer until the group's writes are durable, as for a call run alone.
//! A group that wrote is waited on in its turn, and so on until a wait ends with nobody queued.
//!
//! Nothing here polls or holds a lease: the object runs on one thread, a queued call is a
//! promise that the group's run resolves, and the waits are the runtime's. A call that would
//! take what waits past [`MAX_QUEUED_OPS`] ops or [`MAX_QUEUED_BYTES`] is refused as
//! `overloaded` before anything is applied (unless nothing waits: a call of any size is taken
//! into an empty group). Calls under a receipt (one-way flushes) run one by one, in their place in the order.
//!
//! [`ShardEngine::run_group`]: edgecount_core::ShardEngine::run_group

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use edgecount_core::shard::protocol::ShardRequest;
use edgecount_core::shard::refusal::Refusal;
use wasm_bindgen::prelude::{Closure, JsValue};
use worker::{js_sys, wasm_bindgen_futures};

use crate::shard::object::{rejected, ShardObject};
use crate::shared::clock::now_ms;
use crate::shared::drills;

/// Most ops that may wait for the next group; a call past it is refused with nothing applied.
/// About a second of one shard's writes: a client waits no longer than that behind a queue.
pub const MAX_QUEUED_OPS: usize = 2_000;
/// Most bytes of calls that may wait for the next group (a cache entry's `PUT` carries up to
/// 1 MiB): well within the object's memory.
pub const MAX_QUEUED_BYTES: usize = 16 << 20;

/// The next group, and whether the writes of the one before it are still being made durable.
#[derive(Default)]
pub struct Groups {
    settling: Cell<bool>,
    next: RefCell<Vec<Queued>>,
    queued_ops: Cell<usize>,
    queued_bytes: Cell<usize>,
    /// Calls that arrived while a group's writes were being made durable, since the shard
    /// started: queued, refused, or (reading only) run at once.
    arrived_while_settling: Cell<usize>,
    /// Calls refused since the shard started (`overloaded` in its statistics).
    refused: Cell<u64>,
    /// What the end of a wait for durability calls, made at the first wait.
    on_durable: RefCell<Option<OnDurable>>,
}

/// The reaction to `storage.sync()`.
type OnDurable = Closure<dyn FnMut(JsValue)>;

/// A call waiting for the next group, and how to answer it.
struct Queued {
    request: ShardRequest,
    resolve: js_sys::Function,
    reject: js_sys::Function,
}

impl Groups {
    /// Calls refused since the shard started, past [`MAX_QUEUED_OPS`] or [`MAX_QUEUED_BYTES`].
    pub fn refused(&self) -> u64 {
        self.refused.get()
    }
}

/// Runs `request`, which arrived on the steady path, now or in the next group: its JSON answer,
/// or a promise of it. A call that only reads runs now whatever is queued: it answers what the
/// shard holds, and the output gate holds that answer, as any, until the writes before it are
/// durable.
pub fn arrive(groups: &Rc<Groups>, object: &Rc<ShardObject>, request: ShardRequest, bytes: usize) -> JsValue {
    let writes = request.ops.iter().any(|call| call.op.is_write());
    if groups.settling.get() {
        groups.arrived_while_settling.set(groups.arrived_while_settling.get() + 1);
    }
    if !writes || !groups.settling.get() {
        let answer = object.answer(&request);
        if writes {
            settle(groups, object);
        }
        return answer;
    }
    // A call is taken whatever its size into an empty group, so a large one (a batch, a
    // one-way flush) past the bounds is refused only while other calls wait.
    let (ops, queued_bytes) =
        (groups.queued_ops.get() + request.ops.len(), groups.queued_bytes.get() + bytes);
    if groups.queued_ops.get() > 0 && (ops > MAX_QUEUED_OPS || queued_bytes > MAX_QUEUED_BYTES) {
        groups.refused.set(groups.refused.get() + 1);
        return rejected(Refusal::Overloaded);
    }
    groups.queued_ops.set(ops);
    groups.queued_bytes.set(queued_bytes);
    let mut answer = None;
    let promise = js_sys::Promise::new(&mut |resolve, reject| answer = Some((resolve, reject)));
    if let Some((resolve, reject)) = answer {
        groups.next.borrow_mut().push(Queued { request, resolve, reject });
    }
    promise.into()
}

/// Waits for what was written so far to be durable (`storage.sync()`), then runs the calls
/// that queued meanwhile as the next group ([`durable`]). The wait's reaction is one function
/// made once per object, so a wait costs a call into JavaScript and no allocation.
fn settle(groups: &Rc<Groups>, object: &Rc<ShardObject>) {
    groups.settling.set(true);
    let mut on_durable = groups.on_durable.borrow_mut();
    let on_durable = on_durable.get_or_insert_with(|| {
        // Weak: the closure lives in the groups, and must not keep them, nor the object,
        // alive once the runtime lets the object go.
        let (groups, object) = (Rc::downgrade(groups), Rc::downgrade(object));
        Closure::new(move |_: JsValue| {
            if let (Some(groups), Some(object)) = (groups.upgrade(), object.upgrade()) {
                durable(&groups, &object);
            }
        })
    });
    match object.storage().as_raw().sync() {
        // A failed wait changes nothing here: the next group runs, and its own writes succeed
        // or fail on their own.
        Ok(synced) => {
            let _ = synced.then2(on_durable, on_durable);
        }
        Err(_) => {
            let _ = js_sys::Promise::resolve(&JsValue::UNDEFINED).then(on_durable);
        }
    }
}

/// The writes before are durable: runs the calls queued meanwhile as one group, and waits
/// again if it wrote.
fn durable(groups: &Rc<Groups>, object: &Rc<ShardObject>) {
    if drills::holds_group(&object.env) {
        let (groups, object) = (Rc::clone(groups), Rc::clone(object));
        wasm_bindgen_futures::spawn_local(async move {
            let arrived = || groups.arrived_while_settling.get();
            drills::wait_for_arrivals(&object.env, arrived).await;
            run_next(&groups, &object);
        });
        return;
    }
    run_next(groups, object);
}

fn run_next(groups: &Rc<Groups>, object: &Rc<ShardObject>) {
    let group = std::mem::take(&mut *groups.next.borrow_mut());
    groups.queued_ops.set(0);
    groups.queued_bytes.set(0);
    if group.is_empty() {
        groups.settling.set(false);
        return;
    }
    run(object, group);
    // Every queued call writes: the group wrote, and the next one waits for it.
    settle(groups, object);
}

/// Runs a group in order: the calls under no receipt together, each receipted one alone; a
/// call that no longer finds the shard steady (a change of count declared meanwhile) goes the
/// way such calls go. Answers every call once the alarm is set for what the group wrote.
fn run(object: &Rc<ShardObject>, group: Vec<Queued>) {
    let now = now_ms();
    let mut answers: Vec<Answer> = Vec::with_capacity(group.len());
    let mut reclaim_by: Option<u64> = None;
    let mut together: Vec<Queued> = Vec::new();
    let mut run_together = |together: &mut Vec<Queued>, answers: &mut Vec<Answer>| {
        if together.is_empty() {
            return;
        }
        let requests: Vec<&ShardRequest> = together.iter().map(|q| &q.request).collect();
        let ran = object.run_group_now(&requests, now);
        reclaim_by = ran.reclaim_by.into_iter().chain(reclaim_by).min();
        for (queued, answer) in together.drain(..).zip(ran.answers) {
            let wrote = queued.request.ops.iter().any(|call| call.op.is_write());
            answers.push(Answer { queued, answer, wrote });
        }
    };
    for queued in group {
        if queued.request.receipt.is_none() && object.is_steady_for(&queued.request) {
            together.push(queued);
            continue;
        }
        run_together(&mut together, &mut answers);
        // Either one sets the alarm for its own writes before it answers.
        let answer = if object.is_steady_for(&queued.request) {
            object.answer(&queued.request)
        } else {
            crate::shard::resharding::run(object, queued.request.clone())
        };
        answers.push(Answer { queued, answer, wrote: false });
    }
    run_together(&mut together, &mut answers);
    if object.alarm_due_by(reclaim_by) {
        answer_all(answers, None);
        return;
    }
    let object = Rc::clone(object);
    wasm_bindgen_futures::spawn_local(async move {
        let alarm = object.reclaim_by(reclaim_by).await.err();
        answer_all(answers, alarm);
    });
}

/// A queued call's answer: its JSON response, or a promise of it (which resolving adopts).
struct Answer {
    queued: Queued,
    answer: JsValue,
    /// The call wrote in the group, so it waits for the group's alarm.
    wrote: bool,
}

/// Hands each call its answer; a call that wrote gets the alarm's failure instead when the
/// group's alarm could not be set (its writes are stored: [`Refusal::StoredWithoutAlarm`]).
fn answer_all(answers: Vec<Answer>, alarm: Option<JsValue>) {
    for Answer { queued, answer, wrote } in answers {
        // Resolving and rejecting cannot fail; an answer nobody waits for any more is dropped.
        let _ = match &alarm {
            Some(failure) if wrote => queued.reject.call1(&JsValue::UNDEFINED, failure),
            _ => queued.resolve.call1(&JsValue::UNDEFINED, &answer),
        };
    }
}
