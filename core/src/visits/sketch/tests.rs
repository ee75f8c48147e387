use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::*;

/// The id of synthetic visitor `n` of stream `seed`: 64 well-mixed bits, as a keyed hash gives.
fn visitor(seed: u64, n: u64) -> u64 {
    xxh3_64_with_seed(&n.to_le_bytes(), seed)
}

fn sketch_of(seed: u64, visitors: std::ops::Range<u64>) -> Sketch {
    let mut sketch = Sketch::new();
    visitors.for_each(|n| sketch.insert(visitor(seed, n)));
    sketch
}

fn relative_error(estimate: u64, truth: u64) -> f64 {
    (estimate as f64 - truth as f64).abs() / truth as f64
}

#[test]
fn fifty_visitors_seen_many_times_count_exactly_fifty() {
    let mut sketch = Sketch::new();
    for round in 0..20 {
        for n in 0..50 {
            sketch.insert(visitor(7, (n + round) % 50));
        }
    }
    assert_eq!(sketch.estimate(), 50);
    assert!(sketch.is_exact());
    assert_eq!(sketch.to_bytes().len(), 50 * 8);
}

#[test]
fn every_count_up_to_the_lists_end_is_exact() {
    let mut sketch = Sketch::new();
    for n in 0..EXACT_MOST as u64 {
        sketch.insert(visitor(3, n));
        assert_eq!(sketch.estimate(), n + 1);
    }
    assert!(sketch.is_exact());
    assert!(sketch.to_bytes().len() < DENSE_BYTES);
    sketch.insert(visitor(3, EXACT_MOST as u64));
    assert!(!sketch.is_exact(), "one more visitor than the list holds makes the sketch dense");
    assert_eq!(sketch.to_bytes().len(), DENSE_BYTES);
    assert!(relative_error(sketch.estimate(), EXACT_MOST as u64 + 1) < 3.0 * STANDARD_ERROR);
}

#[test]
fn a_hundred_thousand_visitors_are_estimated_within_three_standard_errors() {
    let sketch = sketch_of(11, 0..100_000);
    let error = relative_error(sketch.estimate(), 100_000);
    assert!(error <= 3.0 * STANDARD_ERROR, "estimate {} is {error:.4} off", sketch.estimate());
    assert_eq!(sketch.to_bytes().len(), 12_288, "at most 12 KB, as Redis");
}

#[test]
fn the_standard_error_over_many_streams_is_at_most_redis_s() {
    // Forty streams at each size: the root mean square of the relative errors estimates the
    // standard error; with forty samples it lies within about 1.3x of the true one.
    for size in [3_000u64, 20_000, 200_000] {
        let streams = 40u64;
        let squares: f64 = (0..streams)
            .map(|seed| relative_error(sketch_of(1_000 + seed, 0..size).estimate(), size).powi(2))
            .sum();
        let rms = (squares / streams as f64).sqrt();
        assert!(rms <= STANDARD_ERROR * 1.3, "{size} visitors: standard error {rms:.5}");
    }
}

#[test]
fn the_union_of_two_days_counts_a_visitor_of_both_once() {
    // Exact: 40 on Monday, 40 on Tuesday, 20 of them on both days.
    let mut monday = sketch_of(5, 0..40);
    let tuesday = sketch_of(5, 20..60);
    monday.merge(&tuesday);
    assert_eq!(monday.estimate(), 60);

    // Dense: 60,000 and 60,000 with 20,000 in common.
    let mut monday = sketch_of(6, 0..60_000);
    let tuesday = sketch_of(6, 40_000..100_000);
    monday.merge(&tuesday);
    assert!(relative_error(monday.estimate(), 100_000) <= 3.0 * STANDARD_ERROR);
    assert_eq!(monday, sketch_of(6, 0..100_000), "a union is the sketch of both days' visitors");
}

#[test]
fn a_union_of_lists_too_long_for_one_becomes_dense_as_inserting_them_would() {
    let mut first = sketch_of(8, 0..1_000);
    let second = sketch_of(8, 1_000..2_000);
    first.merge(&second);
    assert_eq!(first, sketch_of(8, 0..2_000));
    // A list merged into registers, and registers into a list, give the same registers.
    let mut list = sketch_of(9, 0..500);
    let dense = sketch_of(9, 500..5_000);
    list.merge(&dense);
    assert_eq!(list, sketch_of(9, 0..5_000));
}

#[test]
fn the_stored_form_reads_back_the_same_sketch() {
    for size in [0u64, 1, 100, EXACT_MOST as u64, 50_000] {
        let sketch = sketch_of(12, 0..size);
        assert_eq!(Sketch::from_bytes(&sketch.to_bytes()), Ok(sketch));
    }
}

#[test]
fn bytes_that_are_no_sketch_are_refused() {
    assert_eq!(Sketch::from_bytes(&[1, 2, 3]), Err(NotASketch));
    let mut ids = sketch_of(13, 0..3).to_bytes();
    ids.rotate_left(8);
    assert_eq!(Sketch::from_bytes(&ids), Err(NotASketch), "ids out of order");
    let twice = [5u64.to_le_bytes(), 5u64.to_le_bytes()].concat();
    assert_eq!(Sketch::from_bytes(&twice), Err(NotASketch), "one id twice");
    assert_eq!(Sketch::from_bytes(&[0xff; DENSE_BYTES]), Err(NotASketch), "registers past 51");
    assert_eq!(Sketch::from_bytes(&vec![0; (EXACT_MOST + 2) * 8]), Err(NotASketch));
}
