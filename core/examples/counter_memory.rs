//! How much memory a shard keeps per counter: fills a [`ShardEngine`] with 1,000,000 counters
//! (or the count given as the first argument) through the op a shard runs for every
//! increment, and reports the heap in use before and after, its peak, and bytes per counter.
//!
//! A shard keeps the counters it used most recently in its [`CounterTable`], up to
//! `DEFAULT_CACHED_COUNTERS`; the rest are only in storage. So a shard's memory is bounded by
//! that cap, not by how many counters it owns: this example shows both. The heap is
//! measured by a counting global allocator: bytes requested and not yet freed. The allocator's
//! own overhead is not in that figure, so the process's resident set (natively) or the Wasm
//! linear memory (on wasm32) is reported next to it.
//!
//! Storage here keeps nothing: a shard's storage is SQLite, outside its heap, so what is
//! measured is what the engine itself holds.
//!
//! Names are short by default (`pages` / `page/10000`). With `--longest-names` every counter
//! has the longest names the API allows, a 64-byte namespace and a 256-byte key, so the figure
//! bounds what a shard can be made to hold by clients choosing their names.
//!
//! Runs natively (`cargo run --release -p edgecount-core --example counter_memory -- [COUNT]
//! [--longest-names]`) and for `wasm32-wasip1` (`scripts/bench-core.mjs` runs both shapes on
//! both), where pointers and `String`s are half the size, as they are in the worker.
//!
//! [`CounterTable`]: edgecount_core::CounterTable

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use edgecount_core::names::{MAX_KEY_LEN, MAX_NAMESPACE_LEN};
use edgecount_core::shard::cache_table::{CacheStore, EntryValue, StoredEntry};
use edgecount_core::shard::counter::DayCount;
use edgecount_core::shard::counter_table::DEFAULT_CACHED_COUNTERS;
use edgecount_core::shard::idempotency::{IdempotencyRecord, IdempotencyStore, RecordScope};
use edgecount_core::shard::visit_table::{EachSketch, VisitStore};
use edgecount_core::shard::Atomic;
use edgecount_core::visits::day::Day;
use edgecount_core::visits::visitor::Salt;
use edgecount_core::{
    CacheBounds, Counter, CounterStore, Key, Namespace, OpResult, ShardEngine, ShardOp, ShardRequest,
    StoreResult,
};

/// What a shard holding 1M counters may use.
const TARGET_BYTES: usize = 200 * 1_000_000;
/// What a Workers isolate, and so a Durable Object, may use in all (the platform's limit).
const ISOLATE_LIMIT_BYTES: usize = 128 * 1_000_000;
/// A handful of namespaces, each with its own key shape, as a site's counters look.
const NAMESPACES: [(&str, &str); 5] =
    [("pages", "page"), ("posts", "post"), ("downloads", "file"), ("clicks", "button"), ("signups", "form")];

/// The system allocator, counting the bytes currently allocated and the most ever allocated.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

impl Counting {
    fn grew(by: usize) {
        let now = IN_USE.fetch_add(by, Ordering::Relaxed) + by;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to `System` unchanged; only the counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            Self::grew(layout.size());
        }
        ptr
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            Self::grew(layout.size());
        }
        ptr
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
            Self::grew(new_size);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Storage that keeps nothing: loads find nothing and saves succeed.
struct Discard;

/// Discard keeps nothing, so a failed call has nothing to undo.
impl Atomic for Discard {
    fn atomically<T>(&self, writes: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        writes()
    }
}

impl CounterStore for Discard {
    fn load(&self, _: &Namespace, _: &Key) -> StoreResult<Option<Counter>> {
        Ok(None)
    }
    fn save(&self, _: &Namespace, _: &Key, _: &Counter) -> StoreResult<()> {
        Ok(())
    }
    fn finish_day(&self, _: &Namespace, _: &Key, _: DayCount) -> StoreResult<()> {
        Ok(())
    }
    fn remove(&self, _: &Namespace, _: &Key) -> StoreResult<()> {
        Ok(())
    }
    fn remove_expired_counters(&self, _: u64, _: u64) -> StoreResult<u64> {
        Ok(0)
    }
    fn next_counter_expiry(&self) -> StoreResult<Option<u64>> {
        Ok(None)
    }
    fn count_counters(&self, _: u64) -> StoreResult<(u64, u64)> {
        Ok((0, 0))
    }
}

impl CacheStore for Discard {
    fn load_entry(&self, _: &Namespace, _: &Key) -> StoreResult<Option<EntryValue>> {
        Ok(None)
    }
    fn save_entry(
        &self,
        _: &Namespace,
        _: &Key,
        _: &[u8],
        _: &str,
        _: Option<u64>,
        _: u64,
    ) -> StoreResult<()> {
        Ok(())
    }
    fn remove_entry(&self, _: &Namespace, _: &Key) -> StoreResult<()> {
        Ok(())
    }
    fn scan_newest_entries(&self, _: u64, _: &mut dyn FnMut(StoredEntry) -> bool) -> StoreResult<()> {
        Ok(())
    }
    fn remove_entries_from(&self, _: &StoredEntry) -> StoreResult<u64> {
        Ok(0)
    }
    fn stored_entries(&self) -> StoreResult<(u64, u64)> {
        Ok((0, 0))
    }
}

impl VisitStore for Discard {
    fn day_salt(&self, _: Day) -> StoreResult<Salt> {
        Ok([0; 32])
    }
    fn forget_salts_before(&self, _: Day) -> StoreResult<Option<Day>> {
        Ok(None)
    }
    fn load_sketch(&self, _: &Namespace, _: &Key, _: Day) -> StoreResult<Option<Vec<u8>>> {
        Ok(None)
    }
    fn save_sketch(&self, _: &Namespace, _: &Key, _: Day, _: &[u8]) -> StoreResult<()> {
        Ok(())
    }
    fn stored_days(&self, _: &Namespace, _: &Key, _: Day, _: Day) -> StoreResult<Vec<DayCount>> {
        Ok(Vec::new())
    }
    fn each_sketch(&self, _: &Namespace, _: &Key, _: (Day, Day), _: &mut EachSketch<'_>) -> StoreResult<()> {
        Ok(())
    }
    fn load_union(&self, _: &Namespace, _: &Key, _: (Day, Day)) -> StoreResult<Option<Vec<u8>>> {
        Ok(None)
    }
    fn save_union(&self, _: &Namespace, _: &Key, _: (Day, Day), _: &[u8]) -> StoreResult<()> {
        Ok(())
    }
}

impl IdempotencyStore for Discard {
    fn load_record(&self, _: &RecordScope) -> StoreResult<Option<IdempotencyRecord>> {
        Ok(None)
    }
    fn save_record(&self, _: &RecordScope, _: &IdempotencyRecord) -> StoreResult<()> {
        Ok(())
    }
    fn records_generation(&self) -> StoreResult<Option<u64>> {
        Ok(None)
    }
    fn start_records_generation(&self, _: u64) -> StoreResult<()> {
        Ok(())
    }
}

/// Memory the process holds as the operating system sees it, with a name for it.
#[cfg(target_arch = "wasm32")]
fn footprint() -> (&'static str, usize) {
    // Linear memory only grows, so this is also the peak the isolate has to hold.
    ("Wasm linear memory", core::arch::wasm32::memory_size(0) * 65_536)
}

#[cfg(target_os = "linux")]
fn footprint() -> (&'static str, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let rss_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .unwrap_or(0);
    ("resident set", rss_kib * 1024)
}

#[cfg(not(any(target_arch = "wasm32", target_os = "linux")))]
fn footprint() -> (&'static str, usize) {
    ("resident set (not measured on this system)", 0)
}

/// The names of the `i`th counter: short ones as a site's look, or the longest allowed.
fn names(i: usize, longest: bool) -> (Namespace, Key) {
    let (ns, prefix) = NAMESPACES[i % NAMESPACES.len()];
    let (ns, key) = if longest {
        // Padded to the limits; the counter's number stays at the end so keys are distinct.
        let number = format!("/{}", 10_000 + i);
        let ns = format!("{ns:-<MAX_NAMESPACE_LEN$}");
        let key = format!("{prefix:-<width$}{number}", width = MAX_KEY_LEN - number.len());
        (ns, key)
    } else {
        (ns.to_owned(), format!("{prefix}/{}", 10_000 + i))
    };
    (Namespace::new(&ns).expect("a valid namespace"), Key::new(&key).expect("a valid key"))
}

fn mb(bytes: usize) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let longest = args.iter().any(|arg| arg == "--longest-names");
    let counters: usize = match args.iter().find(|arg| !arg.starts_with("--")) {
        Some(arg) => arg.parse().expect("the first argument is the number of counters"),
        None => 1_000_000,
    };
    let arch = if cfg!(target_arch = "wasm32") { "wasm32" } else { std::env::consts::ARCH };
    let shape = if longest {
        format!("longest names ({MAX_NAMESPACE_LEN}-byte namespaces, {MAX_KEY_LEN}-byte keys)")
    } else {
        "short names".to_owned()
    };
    println!(
        "{counters} counters in {} namespaces, {shape}, {arch} ({}-bit pointers)",
        NAMESPACES.len(),
        usize::BITS
    );

    // The names are built per op, as a shard decodes them from each request, and the engine
    // keeps its own copies: nothing is shared between counters.
    let mut engine = ShardEngine::new(CacheBounds { bytes: 64 * 1024 * 1024, entries: 50_000 });
    let (heap_before, (footprint_name, footprint_before)) = (IN_USE.load(Ordering::Relaxed), footprint());
    PEAK.store(heap_before, Ordering::Relaxed);
    let step = (counters / 10).max(1);
    println!("{:>10}  {:>12}  {:>13}  {footprint_name}", "counters", "heap in use", "bytes/counter");
    for i in 0..counters {
        let (ns, key) = names(i, longest);
        let op = ShardOp::Incr { ns, key, by: 1, ttl: None };
        let request = ShardRequest { ops: vec![op.into()], answer_budget: None, receipt: None, placed: None };
        let results = engine.run(&Discard, &request, 1_700_000_000_000).response.results;
        assert!(matches!(results[..], [OpResult::Value { exists: true, .. }]), "{results:?}");
        if (i + 1) % step == 0 {
            let heap = IN_USE.load(Ordering::Relaxed) - heap_before;
            let per_counter = heap as f64 / (i + 1) as f64;
            println!("{:>10}  {:>12}  {per_counter:>13.1}  {}", i + 1, mb(heap), mb(footprint().1));
        }
    }

    let (heap_after, peak, (_, footprint_after)) =
        (IN_USE.load(Ordering::Relaxed), PEAK.load(Ordering::Relaxed), footprint());
    let held = heap_after - heap_before;
    let per_counter = held as f64 / counters.max(1) as f64;
    println!("heap in use before: {heap_before} bytes, after: {heap_after} bytes");
    println!("held by {counters} counters: {} ({per_counter:.1} bytes per counter)", mb(held));
    let cached = engine.cached_counters();
    println!(
        "of which in memory: {cached} counters (cap {DEFAULT_CACHED_COUNTERS}), {:.1} bytes each; the rest \
         are only in storage",
        held as f64 / cached.max(1) as f64
    );
    println!(
        "heap peak while filling: {} (the map holds its old and new buckets while it grows)",
        mb(peak - heap_before)
    );
    println!(
        "{footprint_name}: {} before, {} after (allocator overhead included)",
        mb(footprint_before),
        mb(footprint_after)
    );
    let projected = (per_counter * 1e6) as usize;
    let verdict = |bytes: usize| if bytes <= TARGET_BYTES { "within" } else { "over" };
    println!(
        "1M counters at this rate: {} of heap, {} the 200 MB target (peak: {})",
        mb(projected),
        verdict(projected),
        verdict(peak - heap_before)
    );
    if cfg!(target_arch = "wasm32") {
        // Linear memory never shrinks, so its size after the fill is what the isolate keeps.
        let fits = if footprint_after <= ISOLATE_LIMIT_BYTES { "within" } else { "over" };
        println!("{footprint_name} {fits} the 128 MB a Workers isolate may use");
    }
}
