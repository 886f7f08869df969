//! Dense projections `y = x W^T + b`, the forward pass's dominant cost.
//! Weights stay in the checkpoint's `[out, in]` row-major layout so every
//! output is one contiguous dot product; rows are split across rayon threads.
//! Decoding one token is memory-bound (each weight is read once per token),
//! prefill reuses a block of weight rows for all prompt positions while it is
//! still in cache.

use rayon::prelude::*;

use crate::error::Result;

/// Weight rows handed to one rayon task: enough to amortise scheduling, few
/// enough that a block (rows x in_features) stays in L2 across prompt positions.
const ROWS_PER_TASK: usize = 16;

/// Below this many multiply-adds a projection runs on the calling thread:
/// rayon's hand-off costs more than the work.
const PARALLEL_MIN_MACS: usize = 1 << 16;

/// A weight matrix `[out_features, in_features]` with an optional bias.
#[derive(Debug, Clone)]
pub struct Linear {
    weight: Vec<f32>,
    bias: Option<Vec<f32>>,
    out_features: usize,
    in_features: usize,
}

impl Linear {
    /// Wraps a row-major `[out_features, in_features]` matrix, checking its length.
    pub fn new(weight: Vec<f32>, bias: Option<Vec<f32>>, out_features: usize, in_features: usize) -> Result<Self> {
        if weight.len() != out_features * in_features {
            return Err(model_err!("weight has {} values, expected {out_features} x {in_features}", weight.len()));
        }
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

    /// The whole matrix, row-major `[out_features, in_features]`.
    pub fn weight(&self) -> &[f32] {
        &self.weight
    }

    /// The bias, when the checkpoint has one.
    pub fn bias(&self) -> Option<&[f32]> {
        self.bias.as_deref()
    }

    /// Row `r` of the matrix; for an embedding matrix, the vector of token `r`.
    pub fn row(&self, r: usize) -> &[f32] {
        &self.weight[r * self.in_features..(r + 1) * self.in_features]
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
            let w = &self.weight[first_row * inp..(first_row + rows) * inp];
            rows_block(w, x, inp, n, chunk);
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
/// (`[rows, inp]`) and every input `t < n`, bit-identical to [`dot`]. On x86-64
/// with AVX2 a register-tiled kernel does it. Prefill (n > 1) takes four weight
/// rows and two inputs at a time, so every loaded chunk of a weight row serves
/// two inputs and every chunk of an input four rows. Decoding (n = 1) reads one
/// row after another: memory-bound, it is fastest as one sequential stream per
/// thread (interleaving four rows measured ~40% slower on the 2-core VM). The
/// kernel keeps [`dot`]'s eight-lane summation order and does not fuse
/// multiply-adds, so both paths round identically.
fn rows_block(w: &[f32], x: &[f32], inp: usize, n: usize, dst: &mut [f32]) {
    assert!(w.len().is_multiple_of(inp) && x.len() == n * inp && dst.len() == w.len() / inp * n);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above); lengths checked by the assert.
        return unsafe { avx2::rows_block(w, x, inp, n, dst) };
    }
    for (r, row) in w.chunks_exact(inp).enumerate() {
        for (t, input) in x.chunks_exact(inp).enumerate() {
            dst[r * n + t] = dot(row, input);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// See [`super::rows_block`]; the caller checked AVX2 and the lengths.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn rows_block(w: &[f32], x: &[f32], inp: usize, n: usize, dst: &mut [f32]) {
        let rows = w.len() / inp;
        let (w, x) = (w.as_ptr(), x.as_ptr());
        let mut r = 0;
        // Four-row tiles for prefill only (see `super::rows_block`).
        while n > 1 && r + 4 <= rows {
            let ws = [0, 1, 2, 3].map(|k| w.add((r + k) * inp));
            let mut t = 0;
            while t + 2 <= n {
                let d = tile::<4, 2>(ws, [x.add(t * inp), x.add((t + 1) * inp)], inp);
                for (k, dk) in d.iter().enumerate() {
                    dst[(r + k) * n + t] = dk[0];
                    dst[(r + k) * n + t + 1] = dk[1];
                }
                t += 2;
            }
            if t < n {
                let d = tile::<4, 1>(ws, [x.add(t * inp)], inp);
                for (k, dk) in d.iter().enumerate() {
                    dst[(r + k) * n + t] = dk[0];
                }
            }
            r += 4;
        }
        for r in r..rows {
            for t in 0..n {
                dst[r * n + t] = tile::<1, 1>([w.add(r * inp)], [x.add(t * inp)], inp)[0][0];
            }
        }
    }

    /// `R x C` dot products of length `len`, eight lanes each, reduced like [`super::dot`].
    #[inline(always)]
    unsafe fn tile<const R: usize, const C: usize>(
        ws: [*const f32; R],
        xs: [*const f32; C],
        len: usize,
    ) -> [[f32; C]; R] {
        let chunks = len / 8 * 8;
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let mut c = 0;
        while c < chunks {
            let xv: [__m256; C] = std::array::from_fn(|j| _mm256_loadu_ps(xs[j].add(c)));
            for i in 0..R {
                let wv = _mm256_loadu_ps(ws[i].add(c));
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
                let tail: f32 = (chunks..len).map(|k| *ws[i].add(k) * *xs[j].add(k)).sum();
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

    #[test]
    fn wrong_weight_length_is_refused() {
        assert!(Linear::new(vec![0.0; 5], None, 2, 3).is_err());
    }
}
