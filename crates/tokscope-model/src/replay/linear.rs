//! Dense projections `y = x W^T + b`, the forward pass's dominant cost.
//! Weights stay in the checkpoint's `[out, in]` row-major layout so every
//! output is one contiguous dot product; rows are split across rayon threads.
//! Decoding one token is memory-bound (each weight is read once per token),
//! prefill reuses a block of weight rows for all prompt positions while it is
//! still in cache.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::Result;

/// Weight rows handed to one rayon task: enough to amortise scheduling, few
/// enough that a block (rows x in_features) stays in L2 across prompt positions.
const ROWS_PER_TASK: usize = 16;

/// Below this many multiply-adds a projection runs on the calling thread:
/// rayon's hand-off costs more than the work.
const PARALLEL_MIN_MACS: usize = 1 << 16;

/// The precision a weight matrix is stored in. Arithmetic is always f32; f16/bf16 are widened eight at a time inside the kernel, so a
/// half-precision checkpoint streams half the bytes per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightDtype {
    /// IEEE single precision.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16 (the top 16 bits of an f32).
    BF16,
}

impl WeightDtype {
    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            WeightDtype::F32 => 4,
            WeightDtype::F16 | WeightDtype::BF16 => 2,
        }
    }

    /// Decodes one native-order value (little-endian on every host that maps checkpoints).
    fn decode(self, b: &[u8]) -> f32 {
        match self {
            WeightDtype::F32 => f32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            WeightDtype::F16 => half::f16::from_bits(u16::from_ne_bytes([b[0], b[1]])).to_f32(),
            WeightDtype::BF16 => half::bf16::from_bits(u16::from_ne_bytes([b[0], b[1]])).to_f32(),
        }
    }
}

/// Bytes owned elsewhere and shared by many matrices: a memory-mapped checkpoint.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Where a matrix's values live.
#[derive(Clone)]
enum Storage {
    /// f32 values made in memory (tests, perturbations, synthetic models).
    Owned(Vec<f32>),
    /// `out * in` values of `dtype` starting at `offset` in `source`, never copied.
    Shared { source: SharedBytes, offset: usize, dtype: WeightDtype },
}

/// A weight matrix `[out_features, in_features]` with an optional bias.
#[derive(Clone)]
pub struct Linear {
    weight: Storage,
    bias: Option<Vec<f32>>,
    out_features: usize,
    in_features: usize,
}

impl fmt::Debug for Linear {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Linear")
            .field("out_features", &self.out_features)
            .field("in_features", &self.in_features)
            .field("dtype", &self.dtype())
            .field("bias", &self.bias.is_some())
            .finish()
    }
}

/// A block of weight rows as raw bytes of one dtype (what the kernels read).
#[derive(Clone, Copy)]
struct WeightRows<'a> {
    bytes: &'a [u8],
    dtype: WeightDtype,
}

impl Linear {
    /// Wraps a row-major `[out_features, in_features]` matrix, checking its length.
    pub fn new(weight: Vec<f32>, bias: Option<Vec<f32>>, out_features: usize, in_features: usize) -> Result<Self> {
        if weight.len() != out_features * in_features {
            return Err(model_err!("weight has {} values, expected {out_features} x {in_features}", weight.len()));
        }
        Self::with_storage(Storage::Owned(weight), bias, out_features, in_features)
    }

    /// A row-major `[out_features, in_features]` matrix of `dtype` values kept
    /// where they are: `source[offset..]`, in the host's byte order (a
    /// little-endian checkpoint mapped on a little-endian host). Nothing is
    /// copied or converted; the kernels widen each value to f32 as they read it.
    pub fn shared(
        source: SharedBytes,
        offset: usize,
        dtype: WeightDtype,
        bias: Option<Vec<f32>>,
        out_features: usize,
        in_features: usize,
    ) -> Result<Self> {
        let len = out_features * in_features * dtype.size();
        if offset.checked_add(len).is_none_or(|end| end > (*source).as_ref().len()) {
            return Err(model_err!(
                "{out_features} x {in_features} {dtype:?} matrix at byte {offset} runs past its file"
            ));
        }
        Self::with_storage(Storage::Shared { source, offset, dtype }, bias, out_features, in_features)
    }

    fn with_storage(weight: Storage, bias: Option<Vec<f32>>, out_features: usize, in_features: usize) -> Result<Self> {
        if bias.as_ref().is_some_and(|b| b.len() != out_features) {
            return Err(model_err!("bias length differs from out_features {out_features}"));
        }
        Ok(Linear { weight, bias, out_features, in_features })
    }

    /// Number of outputs (rows).
    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// Number of inputs (columns).
    pub fn in_features(&self) -> usize {
        self.in_features
    }

    /// The precision the weights are stored (and streamed) in.
    pub fn dtype(&self) -> WeightDtype {
        match &self.weight {
            Storage::Owned(_) => WeightDtype::F32,
            Storage::Shared { dtype, .. } => *dtype,
        }
    }

    /// Bytes of weight values read by one pass over the matrix.
    pub fn weight_bytes(&self) -> usize {
        self.out_features * self.in_features * self.dtype().size()
    }

    /// The whole matrix widened to f32, row-major `[out_features, in_features]`
    /// (a copy unless the matrix is already owned f32), e.g. to upload it.
    pub fn to_f32(&self) -> Cow<'_, [f32]> {
        match &self.weight {
            Storage::Owned(values) => Cow::Borrowed(values),
            Storage::Shared { .. } => {
                let mut out = Vec::with_capacity(self.out_features * self.in_features);
                for r in 0..self.out_features {
                    self.extend_row(r, &mut out);
                }
                Cow::Owned(out)
            }
        }
    }

    /// The bias, when the checkpoint has one.
    pub fn bias(&self) -> Option<&[f32]> {
        self.bias.as_deref()
    }

    /// Appends row `r` widened to f32 to `out`; for an embedding matrix, the vector of token `r`.
    pub fn extend_row(&self, r: usize, out: &mut Vec<f32>) {
        match &self.weight {
            Storage::Owned(values) => out.extend_from_slice(&values[r * self.in_features..(r + 1) * self.in_features]),
            Storage::Shared { .. } => {
                let rows = self.rows(r, 1);
                out.extend(rows.bytes.chunks_exact(rows.dtype.size()).map(|b| rows.dtype.decode(b)));
            }
        }
    }

    /// Row `r` widened to f32.
    pub fn row_f32(&self, r: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.in_features);
        self.extend_row(r, &mut out);
        out
    }

    /// Rows `first..first + count` as the kernels read them.
    fn rows(&self, first: usize, count: usize) -> WeightRows<'_> {
        let inp = self.in_features;
        match &self.weight {
            Storage::Owned(values) => {
                let values = &values[first * inp..(first + count) * inp];
                // SAFETY: any initialised f32 slice is also a valid byte slice of 4x its length.
                let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), values.len() * 4) };
                WeightRows { bytes, dtype: WeightDtype::F32 }
            }
            Storage::Shared { source, offset, dtype } => {
                let size = dtype.size();
                let start = offset + first * inp * size;
                WeightRows { bytes: &(**source).as_ref()[start..start + count * inp * size], dtype: *dtype }
            }
        }
    }

    /// Applies the projection to `n` inputs stored row-major in `x` (`[n, in]`),
    /// returning `[n, out]`.
    pub fn forward(&self, x: &[f32], n: usize) -> Vec<f32> {
        debug_assert_eq!(x.len(), n * self.in_features);
        let (out, inp) = (self.out_features, self.in_features);
        // Computed transposed, `[out, n]`: each task owns a contiguous block of
        // output rows, and a weight row is read once for all n inputs.
        let mut out_t = vec![0.0f32; out * n];
        // Decoding (few positions) streams each weight once and computes little:
        // a few large contiguous tasks per thread beat many small ones (less
        // scheduling, longer sequential reads). Prefill keeps small blocks that
        // stay in cache across positions.
        let rows_per_task = if n <= 4 {
            let tasks = rayon::current_num_threads() * 4;
            out.div_ceil(tasks).next_multiple_of(ROWS_PER_TASK)
        } else {
            ROWS_PER_TASK
        };
        let block = |(b, chunk): (usize, &mut [f32])| {
            let first_row = b * rows_per_task;
            let rows = chunk.len() / n;
            rows_block(self.rows(first_row, rows), x, inp, n, chunk);
            if let Some(bias) = &self.bias {
                for (k, dst) in chunk.chunks_exact_mut(n).enumerate() {
                    dst.iter_mut().for_each(|y| *y += bias[first_row + k]);
                }
            }
        };
        if out * inp * n < PARALLEL_MIN_MACS {
            out_t.chunks_mut(rows_per_task * n).enumerate().for_each(block);
        } else {
            out_t.par_chunks_mut(rows_per_task * n).enumerate().for_each(block);
        }
        if n == 1 {
            return out_t;
        }
        let mut y = vec![0.0f32; n * out];
        for (r, col) in out_t.chunks_exact(n).enumerate() {
            for (t, v) in col.iter().enumerate() {
                y[t * out + r] = *v;
            }
        }
        y
    }
}

/// `dst[k * n + t] = dot(w row k, x row t)` for every row of the block `w`
/// (`[rows, inp]`, any stored dtype, widened to f32 exactly) and every input
/// `t < n`, bit-identical to [`dot`] over the widened row. On x86-64 with
/// AVX2 (and F16C, which every AVX2 CPU has) a register-tiled kernel does it,
/// widening eight values per load. Prefill (n > 1) takes four weight rows and
/// two inputs at a time, so every loaded chunk of a weight row serves two
/// inputs and every chunk of an input four rows. Decoding (n = 1) reads one
/// row after another: memory-bound, it is fastest as one sequential stream per
/// thread (interleaving four rows measured ~40% slower on the 2-core VM). The
/// kernel keeps [`dot`]'s eight-lane summation order and does not fuse
/// multiply-adds, so both paths round identically, and a bf16 matrix gives
/// exactly the results of the same matrix upcast to f32.
fn rows_block(w: WeightRows<'_>, x: &[f32], inp: usize, n: usize, dst: &mut [f32]) {
    let size = w.dtype.size();
    assert!(
        inp > 0
            && w.bytes.len().is_multiple_of(inp * size)
            && x.len() == n * inp
            && dst.len() == w.bytes.len() / (inp * size) * n
    );
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        // SAFETY: the CPU supports AVX2 and F16C (checked just above); lengths checked by the assert.
        return unsafe { avx2::rows_block(w, x, inp, n, dst) };
    }
    portable_rows_block(w, x, inp, n, dst);
}

/// [`rows_block`] without SIMD: widen one row at a time into a reused buffer, then [`dot`].
fn portable_rows_block(w: WeightRows<'_>, x: &[f32], inp: usize, n: usize, dst: &mut [f32]) {
    let size = w.dtype.size();
    let mut row = Vec::with_capacity(inp);
    for (r, bytes) in w.bytes.chunks_exact(inp * size).enumerate() {
        row.clear();
        row.extend(bytes.chunks_exact(size).map(|b| w.dtype.decode(b)));
        for (t, input) in x.chunks_exact(inp).enumerate() {
            dst[r * n + t] = dot(&row, input);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{WeightDtype, WeightRows};

    /// Whether [`rows_block`] may run (both features are detected once and cached by std).
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c")
    }

    /// See [`super::rows_block`]; the caller checked AVX2, F16C and the lengths.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn rows_block(w: WeightRows<'_>, x: &[f32], inp: usize, n: usize, dst: &mut [f32]) {
        let rows = w.bytes.len() / (inp * w.dtype.size());
        match w.dtype {
            WeightDtype::F32 => rows_block_of::<F32s>(w.bytes.as_ptr(), rows, x, inp, n, dst),
            WeightDtype::F16 => rows_block_of::<F16s>(w.bytes.as_ptr(), rows, x, inp, n, dst),
            WeightDtype::BF16 => rows_block_of::<Bf16s>(w.bytes.as_ptr(), rows, x, inp, n, dst),
        }
    }

    /// How eight stored values become eight f32 lanes. Pointers need no alignment.
    trait Lanes {
        const BYTES: usize;
        unsafe fn load8(p: *const u8) -> __m256;
        unsafe fn one(p: *const u8) -> f32;
    }

    struct F32s;
    impl Lanes for F32s {
        const BYTES: usize = 4;
        #[inline(always)]
        unsafe fn load8(p: *const u8) -> __m256 {
            _mm256_loadu_ps(p.cast())
        }
        #[inline(always)]
        unsafe fn one(p: *const u8) -> f32 {
            p.cast::<f32>().read_unaligned()
        }
    }

    /// bf16 is the top half of an f32: zero-extend to 32 bits, shift left 16 (exact).
    struct Bf16s;
    impl Lanes for Bf16s {
        const BYTES: usize = 2;
        #[inline(always)]
        unsafe fn load8(p: *const u8) -> __m256 {
            let half = _mm_loadu_si128(p.cast());
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(half)))
        }
        #[inline(always)]
        unsafe fn one(p: *const u8) -> f32 {
            f32::from_bits(u32::from(p.cast::<u16>().read_unaligned()) << 16)
        }
    }

    /// f16 widened by F16C's `vcvtph2ps` (exact, like `half::f16::to_f32`).
    struct F16s;
    impl Lanes for F16s {
        const BYTES: usize = 2;
        #[inline(always)]
        unsafe fn load8(p: *const u8) -> __m256 {
            _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
        }
        #[inline(always)]
        unsafe fn one(p: *const u8) -> f32 {
            let bits = i32::from(p.cast::<u16>().read_unaligned());
            _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)))
        }
    }

    #[inline(always)]
    unsafe fn rows_block_of<L: Lanes>(w: *const u8, rows: usize, x: &[f32], inp: usize, n: usize, dst: &mut [f32]) {
        let x = x.as_ptr();
        let stride = inp * L::BYTES;
        let mut r = 0;
        // Four-row tiles for prefill only (see `super::rows_block`).
        while n > 1 && r + 4 <= rows {
            let ws = [0, 1, 2, 3].map(|k| w.add((r + k) * stride));
            let mut t = 0;
            while t + 2 <= n {
                let d = tile::<4, 2, L>(ws, [x.add(t * inp), x.add((t + 1) * inp)], inp);
                for (k, dk) in d.iter().enumerate() {
                    dst[(r + k) * n + t] = dk[0];
                    dst[(r + k) * n + t + 1] = dk[1];
                }
                t += 2;
            }
            if t < n {
                let d = tile::<4, 1, L>(ws, [x.add(t * inp)], inp);
                for (k, dk) in d.iter().enumerate() {
                    dst[(r + k) * n + t] = dk[0];
                }
            }
            r += 4;
        }
        for r in r..rows {
            for t in 0..n {
                dst[r * n + t] = tile::<1, 1, L>([w.add(r * stride)], [x.add(t * inp)], inp)[0][0];
            }
        }
    }

    /// `R x C` dot products of length `len`, eight lanes each, reduced like [`super::dot`].
    #[inline(always)]
    unsafe fn tile<const R: usize, const C: usize, L: Lanes>(
        ws: [*const u8; R],
        xs: [*const f32; C],
        len: usize,
    ) -> [[f32; C]; R] {
        let chunks = len / 8 * 8;
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let mut c = 0;
        while c < chunks {
            let xv: [__m256; C] = std::array::from_fn(|j| _mm256_loadu_ps(xs[j].add(c)));
            for i in 0..R {
                let wv = L::load8(ws[i].add(c * L::BYTES));
                for j in 0..C {
                    acc[i][j] = _mm256_add_ps(acc[i][j], _mm256_mul_ps(wv, xv[j]));
                }
            }
            c += 8;
        }
        let mut out = [[0.0f32; C]; R];
        for i in 0..R {
            for j in 0..C {
                let mut lanes = [0.0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), acc[i][j]);
                // Summed like `dot`'s tail (`Sum` starts from -0.0), bit for bit.
                let tail: f32 = (chunks..len).map(|k| L::one(ws[i].add(k * L::BYTES)) * *xs[j].add(k)).sum();
                out[i][j] = lanes.iter().sum::<f32>() + tail;
            }
        }
        out
    }
}

/// Dot product with eight independent accumulators, a shape LLVM turns into
/// SIMD lanes (a single running sum would serialise on the add latency).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_handles_lengths_not_multiple_of_eight() {
        let a: Vec<f32> = (1..=11).map(|v| v as f32).collect();
        let b = vec![1.0f32; 11];
        assert_eq!(dot(&a, &b), 66.0);
    }

    #[test]
    fn forward_applies_weight_rows_and_bias_to_each_input() {
        // W = [[1, 2], [3, 4], [5, 6]], b = [0.5, 0, -1]; inputs [1, 0] and [1, 1].
        let w = Linear::new(vec![1., 2., 3., 4., 5., 6.], Some(vec![0.5, 0.0, -1.0]), 3, 2).unwrap();
        let y = w.forward(&[1., 0., 1., 1.], 2);
        assert_eq!(y, vec![1.5, 3.0, 4.0, 3.5, 7.0, 10.0]);
    }

    #[test]
    fn parallel_path_matches_sequential_sums() {
        // Large enough to take the rayon path, with a row count that is not a block multiple.
        let (out, inp, n) = (37, 300, 7);
        let w: Vec<f32> = (0..out * inp).map(|i| ((i % 13) as f32 - 6.0) * 0.01).collect();
        let x: Vec<f32> = (0..n * inp).map(|i| ((i % 7) as f32 - 3.0) * 0.1).collect();
        let lin = Linear::new(w.clone(), None, out, inp).unwrap();
        let y = lin.forward(&x, n);
        for t in 0..n {
            for r in 0..out {
                let want: f64 = (0..inp).map(|k| w[r * inp + k] as f64 * x[t * inp + k] as f64).sum();
                assert!((y[t * out + r] as f64 - want).abs() < 1e-4, "t={t} r={r}");
            }
        }
    }

    #[test]
    fn tiled_dots_equal_single_dots_bit_for_bit() {
        // 7 rows (a 4-row tile plus 3 single rows), 5 inputs (two pairs plus one), odd length.
        let (rows, inp, n) = (7, 19, 5);
        let w: Vec<f32> = (0..rows * inp).map(|i| (i as f32 * 0.37).sin()).collect();
        let x: Vec<f32> = (0..n * inp).map(|i| ((i * 3) as f32).cos()).collect();
        let lin = Linear::new(w.clone(), None, rows, inp).unwrap();
        for m in 1..=n {
            let y = lin.forward(&x[..m * inp], m);
            for t in 0..m {
                for r in 0..rows {
                    let want = dot(&w[r * inp..(r + 1) * inp], &x[t * inp..(t + 1) * inp]);
                    assert_eq!(y[t * rows + r].to_bits(), want.to_bits(), "n={m} t={t} r={r}");
                }
            }
        }
    }

    /// `values` rounded to bf16 / f16, as the little-endian bytes a checkpoint stores.
    fn half_bytes(values: &[f32], dtype: WeightDtype) -> (Vec<f32>, SharedBytes) {
        let (rounded, bytes): (Vec<f32>, Vec<[u8; 2]>) = values
            .iter()
            .map(|&v| match dtype {
                WeightDtype::BF16 => (half::bf16::from_f32(v).to_f32(), half::bf16::from_f32(v).to_le_bytes()),
                _ => (half::f16::from_f32(v).to_f32(), half::f16::from_f32(v).to_le_bytes()),
            })
            .unzip();
        // One leading byte, so every value sits at an odd address: loads must not need alignment.
        let shared: Vec<u8> = std::iter::once(0xAB).chain(bytes.into_iter().flatten()).collect();
        (rounded, Arc::new(shared))
    }

    #[test]
    fn half_precision_matrices_compute_exactly_like_their_f32_upcast() {
        // 9 rows (two 4-row tiles plus one), inputs of length 21 (two 8-lane chunks plus a tail),
        // 1..=5 positions; values of both signs and an f16 subnormal.
        let (rows, inp) = (9, 21);
        let mut w: Vec<f32> = (0..rows * inp).map(|i| (i as f32 * 0.61).sin() * 3.0).collect();
        w[5] = 3.0e-6;
        let x: Vec<f32> = (0..5 * inp).map(|i| ((i * 7) as f32 * 0.13).cos()).collect();
        for dtype in [WeightDtype::BF16, WeightDtype::F16] {
            let (upcast, bytes) = half_bytes(&w, dtype);
            let stored = Linear::shared(bytes, 1, dtype, Some(vec![0.25; rows]), rows, inp).unwrap();
            let reference = Linear::new(upcast.clone(), Some(vec![0.25; rows]), rows, inp).unwrap();
            assert_eq!(stored.dtype(), dtype);
            assert_eq!(stored.weight_bytes(), rows * inp * 2);
            assert_eq!(stored.to_f32().as_ref(), upcast.as_slice());
            assert_eq!(stored.row_f32(2), upcast[2 * inp..3 * inp]);
            for n in 1..=5 {
                let (a, b) = (stored.forward(&x[..n * inp], n), reference.forward(&x[..n * inp], n));
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "{dtype:?} n={n}");
            }
            // And against f64 sums of the upcast values: the half kernel computes what it should.
            let y = stored.forward(&x[..inp], 1);
            for r in 0..rows {
                let want: f64 = 0.25 + (0..inp).map(|k| upcast[r * inp + k] as f64 * x[k] as f64).sum::<f64>();
                assert!((y[r] as f64 - want).abs() < 1e-5, "{dtype:?} row {r}: {} vs {want}", y[r]);
            }
        }
    }

    #[test]
    fn portable_rows_match_the_simd_kernel() {
        // The widen-then-dot path used without AVX2, called directly, against `forward`.
        let (rows, inp, n) = (6, 19, 3);
        let w: Vec<f32> = (0..rows * inp).map(|i| (i as f32 * 0.3).cos()).collect();
        let x: Vec<f32> = (0..n * inp).map(|i| i as f32 * 0.1 - 0.7).collect();
        for dtype in [WeightDtype::BF16, WeightDtype::F16] {
            let (_, bytes) = half_bytes(&w, dtype);
            let stored = Linear::shared(bytes, 1, dtype, None, rows, inp).unwrap();
            let mut portable = vec![0.0f32; rows * n];
            portable_rows_block(stored.rows(0, rows), &x, inp, n, &mut portable);
            let y = stored.forward(&x, n);
            for r in 0..rows {
                for t in 0..n {
                    assert_eq!(y[t * rows + r].to_bits(), portable[r * n + t].to_bits(), "{dtype:?} r={r} t={t}");
                }
            }
        }
    }

    #[test]
    fn shared_matrix_past_the_end_of_its_bytes_is_refused() {
        let bytes: SharedBytes = Arc::new(vec![0u8; 13]);
        assert!(Linear::shared(bytes.clone(), 1, WeightDtype::BF16, None, 2, 3).is_ok());
        assert!(Linear::shared(bytes.clone(), 2, WeightDtype::BF16, None, 2, 3).is_err());
        assert!(Linear::shared(bytes, usize::MAX, WeightDtype::F32, None, 1, 1).is_err());
    }

    #[test]
    fn wrong_weight_length_is_refused() {
        assert!(Linear::new(vec![0.0; 5], None, 2, 3).is_err());
    }
}
