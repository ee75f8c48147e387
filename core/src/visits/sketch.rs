//! How many distinct visitors a key had in a day: a HyperLogLog sketch that is exact while a
//! day has few visitors.
//!
//! - **Exact** while at most [`EXACT_MOST`] visitors: the sorted list of their 64-bit ids,
//!   8 bytes each (a day of 100 visitors keeps 800 bytes). Two ids of 64 random bits collide
//!   with odds of about n²/2⁶⁵, below 10⁻¹³ at the largest list, so the count is the list's
//!   length.
//! - **Dense** past that: 2¹⁴ registers of 6 bits (12,288 bytes stored), as Redis keeps its
//!   HyperLogLogs (`PFADD`): a visitor's id picks a register by its low 14 bits, and the
//!   register keeps the most trailing zeros (plus one) seen in the other 50. The standard error
//!   is 1.04/√2¹⁴ = 0.81%.
//!
//! The estimate from the registers is Ertl's improved estimator (O. Ertl, "New cardinality
//! estimation algorithms for HyperLogLog sketches", 2017, arXiv:1702.01284, algorithm 6),
//! the one Redis uses since 5.0: it needs neither the bias tables of HyperLogLog++ (Heule,
//! Nunkesser, Hall 2013) nor a switch to linear counting at low counts.
//!
//! A union (several days, say) keeps every register's maximum, or the union of the lists.
//! Stored form ([`Sketch::to_bytes`]): the list's ids as little-endian `u64`s, or the packed
//! registers; the length tells which (a list is never 12,288 bytes long).

/// The registers' index bits: 2¹⁴ registers, as Redis.
const P: u32 = 14;
/// How many registers.
const REGISTERS: usize = 1 << P;
/// The id bits left after the index; a register holds 1..=Q+1.
const Q: u32 = 64 - P;
/// The bytes of the dense form: 6 bits a register.
pub const DENSE_BYTES: usize = REGISTERS * 6 / 8;
/// Most visitors kept as an exact list: one fewer than would fill the dense form's bytes.
pub const EXACT_MOST: usize = DENSE_BYTES / 8 - 1;
/// The dense form's relative standard error (1.04 / √2¹⁴).
pub const STANDARD_ERROR: f64 = 0.008_125;

/// A day's (or a union of days') distinct visitors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sketch {
    form: Form,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    /// The distinct ids, ascending.
    Exact(Vec<u64>),
    /// One byte a register in memory; packed to 6 bits when stored.
    Dense(Box<[u8]>),
}

/// Stored bytes that are no sketch: the wrong length, or ids out of order, or a register past
/// its largest value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotASketch;

impl Default for Sketch {
    fn default() -> Self {
        Self::new()
    }
}

impl Sketch {
    /// No visitor yet.
    #[must_use]
    pub fn new() -> Self {
        Self { form: Form::Exact(Vec::new()) }
    }

    /// Counts the visitor `id` (a keyed hash, uniformly random over 64 bits).
    pub fn insert(&mut self, id: u64) {
        match &mut self.form {
            Form::Exact(ids) => {
                if let Err(at) = ids.binary_search(&id) {
                    ids.insert(at, id);
                    if ids.len() > EXACT_MOST {
                        self.form = Form::Dense(dense_of(ids));
                    }
                }
            }
            Form::Dense(registers) => observe(registers, id),
        }
    }

    /// Makes this the union of itself and `other`.
    pub fn merge(&mut self, other: &Sketch) {
        match (&mut self.form, &other.form) {
            (Form::Dense(mine), Form::Dense(theirs)) => {
                for (mine, theirs) in mine.iter_mut().zip(theirs.iter()) {
                    *mine = (*mine).max(*theirs);
                }
            }
            (_, Form::Exact(ids)) => ids.iter().for_each(|&id| self.insert(id)),
            (Form::Exact(ids), Form::Dense(theirs)) => {
                let mut registers = theirs.clone();
                ids.iter().for_each(|&id| observe(&mut registers, id));
                self.form = Form::Dense(registers);
            }
        }
    }

    /// The number of distinct visitors: exact in the list form, else Ertl's estimate.
    #[must_use]
    pub fn estimate(&self) -> u64 {
        match &self.form {
            Form::Exact(ids) => ids.len() as u64,
            Form::Dense(registers) => estimate_of(registers),
        }
    }

    /// Whether the count is exact (the list form).
    #[must_use]
    pub fn is_exact(&self) -> bool {
        matches!(self.form, Form::Exact(_))
    }

    /// The stored form: 8 bytes a visitor while exact, else [`DENSE_BYTES`].
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        match &self.form {
            Form::Exact(ids) => ids.iter().flat_map(|id| id.to_le_bytes()).collect(),
            Form::Dense(registers) => {
                let mut packed = vec![0u8; DENSE_BYTES];
                for (at, &register) in registers.iter().enumerate() {
                    let bit = at * 6;
                    let pair = u16::from(register) << (bit % 8);
                    packed[bit / 8] |= pair as u8;
                    if let Some(next) = packed.get_mut(bit / 8 + 1) {
                        *next |= (pair >> 8) as u8;
                    }
                }
                packed
            }
        }
    }

    /// Reads a stored form back.
    ///
    /// # Errors
    ///
    /// [`NotASketch`] when the bytes are no sketch's.
    pub fn from_bytes(bytes: &[u8]) -> Result<Sketch, NotASketch> {
        if bytes.len() == DENSE_BYTES {
            let registers: Box<[u8]> = (0..REGISTERS)
                .map(|at| {
                    let bit = at * 6;
                    let low = u16::from(bytes[bit / 8]);
                    let high = u16::from(bytes.get(bit / 8 + 1).copied().unwrap_or(0));
                    (((high << 8 | low) >> (bit % 8)) & 0x3f) as u8
                })
                .collect();
            if registers.iter().any(|&r| u32::from(r) > Q + 1) {
                return Err(NotASketch);
            }
            return Ok(Sketch { form: Form::Dense(registers) });
        }
        if !bytes.len().is_multiple_of(8) || bytes.len() / 8 > EXACT_MOST {
            return Err(NotASketch);
        }
        let ids: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|chunk| u64::from_le_bytes(chunk.try_into().expect("chunks of 8")))
            .collect();
        if ids.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err(NotASketch);
        }
        Ok(Sketch { form: Form::Exact(ids) })
    }
}

fn dense_of(ids: &[u64]) -> Box<[u8]> {
    let mut registers = vec![0u8; REGISTERS].into_boxed_slice();
    ids.iter().for_each(|&id| observe(&mut registers, id));
    registers
}

/// The register `id` picks keeps the larger of its value and the run of zeros `id` starts.
fn observe(registers: &mut [u8], id: u64) {
    let index = (id & (REGISTERS as u64 - 1)) as usize;
    // A set bit past the Q remaining ones bounds the run: 1..=Q+1.
    let run = ((id >> P) | (1 << Q)).trailing_zeros() + 1;
    let run = run as u8;
    if registers[index] < run {
        registers[index] = run;
    }
}

/// Ertl's improved raw estimator over the registers' histogram.
fn estimate_of(registers: &[u8]) -> u64 {
    let m = REGISTERS as f64;
    let mut histogram = [0u32; (Q + 2) as usize];
    for &register in registers {
        histogram[usize::from(register)] += 1;
    }
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(histogram[q + 1])) / m);
    for k in (1..=q).rev() {
        z += f64::from(histogram[k]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histogram[0]) / m);
    let alpha_infinity = 1.0 / (2.0 * std::f64::consts::LN_2);
    (alpha_infinity * m * m / z).round() as u64
}

/// σ(x) = x + Σ x^(2^k) 2^(k-1), k ≥ 1 (Ertl, eq. 41): the correction for empty registers.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// τ(x) = (1 - x - Σ (1 - x^(2^-k))² 2^-k) / 3, k ≥ 1 (Ertl, eq. 44): the correction for
/// registers at their largest value.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

#[cfg(test)]
mod tests;
