//! [`JsTurns`], the runtime the worker's executor runs on. Only the name: its workings, which
//! reach the executor kept in the isolate's state (`isolate::state`), are the parent module's,
//! so that the state can name it without using that module, which uses the state.

/// The runtime's promises and timers.
pub struct JsTurns;
