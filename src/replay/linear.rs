//! Dense projections `y = x W^T + b`, the forward pass's dominant cost.
//! Weights stay in the checkpoint's `[out, in]` row-major layout so every
//! output is one contiguous dot product; rows are split across rayon threads.
//! Decoding one token is memory-bound (each weight is read once per token),
//! prefill reuses a block of weight rows for all prompt positions while it is
//! still in cache.

use rayon::prelude::*;

use crate::error::{Error, Result};

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
    pub fn new(
        weight: Vec<f32>,
        bias: Option<Vec<f32>>,
        out_features: usize,
        in_features: usize,
    ) -> Result<Self> {
        if weight.len() != out_features * in_features {
            return Err(Error::Model(format!(
                "weight has {} values, expected {out_features} x {in_features}",
                weight.len()
            )));
        }
        if bias.as_ref().is_some_and(|b| b.len() != out_features) {
            return Err(Error::Model(format!(
                "bias length differs from out_features {out_features}"
            )));
        }
        Ok(Linear {
            weight,
            bias,
            out_features,
            in_features,
        })
    }

    /// Number of outputs (rows).
    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// Number of inputs (columns).
    pub fn in_features(&self) -> usize {
        self.in_features
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
        let block = |(b, chunk): (usize, &mut [f32])| {
            let first_row = b * ROWS_PER_TASK;
            for (k, dst) in chunk.chunks_exact_mut(n).enumerate() {
                let r = first_row + k;
                let w = &self.weight[r * inp..(r + 1) * inp];
                let bias = self.bias.as_ref().map_or(0.0, |b| b[r]);
                let input = |t: usize| &x[t * inp..(t + 1) * inp];
                // Four inputs per pass share each load of the weight row (prefill).
                let mut quads = dst.chunks_exact_mut(4);
                for (g, y) in (&mut quads).enumerate() {
                    let t = 4 * g;
                    let d = dot4(w, [input(t), input(t + 1), input(t + 2), input(t + 3)]);
                    y.iter_mut().zip(d).for_each(|(y, d)| *y = d + bias);
                }
                let done = n - quads.into_remainder().len();
                for (t, y) in dst[done..].iter_mut().enumerate() {
                    *y = dot(w, input(done + t)) + bias;
                }
            }
        };
        if out * inp * n < PARALLEL_MIN_MACS {
            out_t
                .chunks_mut(ROWS_PER_TASK * n)
                .enumerate()
                .for_each(block);
        } else {
            out_t
                .par_chunks_mut(ROWS_PER_TASK * n)
                .enumerate()
                .for_each(block);
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

/// Dot product with eight independent accumulators, a shape LLVM turns into
/// SIMD lanes (a single running sum would serialise on the add latency).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Four dot products of `w` with four inputs at once: each chunk of `w` is
/// loaded once for all four. Per input the summation order equals [`dot`]'s,
/// so results do not depend on how many positions a pass holds.
#[inline]
fn dot4(w: &[f32], xs: [&[f32]; 4]) -> [f32; 4] {
    let mut acc = [[0.0f32; 8]; 4];
    let chunks = w.len() / 8 * 8;
    for c in (0..chunks).step_by(8) {
        let wc = &w[c..c + 8];
        for (a, x) in acc.iter_mut().zip(&xs) {
            let xc = &x[c..c + 8];
            for k in 0..8 {
                a[k] += wc[k] * xc[k];
            }
        }
    }
    let mut out = [0.0f32; 4];
    for ((o, a), x) in out.iter_mut().zip(&acc).zip(&xs) {
        let tail: f32 = w[chunks..]
            .iter()
            .zip(&x[chunks..])
            .map(|(p, q)| p * q)
            .sum();
        *o = a.iter().sum::<f32>() + tail;
    }
    out
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
        let w = Linear::new(
            vec![1., 2., 3., 4., 5., 6.],
            Some(vec![0.5, 0.0, -1.0]),
            3,
            2,
        )
        .unwrap();
        let y = w.forward(&[1., 0., 1., 1.], 2);
        assert_eq!(y, vec![1.5, 3.0, 4.0, 3.5, 7.0, 10.0]);
    }

    #[test]
    fn parallel_path_matches_sequential_sums() {
        // Large enough to take the rayon path, with a row count that is not a block multiple.
        let (out, inp, n) = (37, 300, 7);
        let w: Vec<f32> = (0..out * inp)
            .map(|i| ((i % 13) as f32 - 6.0) * 0.01)
            .collect();
        let x: Vec<f32> = (0..n * inp).map(|i| ((i % 7) as f32 - 3.0) * 0.1).collect();
        let lin = Linear::new(w.clone(), None, out, inp).unwrap();
        let y = lin.forward(&x, n);
        for t in 0..n {
            for r in 0..out {
                let want: f64 = (0..inp)
                    .map(|k| w[r * inp + k] as f64 * x[t * inp + k] as f64)
                    .sum();
                assert!((y[t * out + r] as f64 - want).abs() < 1e-4, "t={t} r={r}");
            }
        }
    }

    #[test]
    fn four_input_dot_equals_single_dots_bit_for_bit() {
        let w: Vec<f32> = (0..19).map(|i| (i as f32 * 0.37).sin()).collect();
        let xs: Vec<Vec<f32>> = (0..4)
            .map(|t| (0..19).map(|i| ((i * (t + 2)) as f32).cos()).collect())
            .collect();
        let four = dot4(&w, [&xs[0], &xs[1], &xs[2], &xs[3]]);
        for t in 0..4 {
            assert_eq!(four[t].to_bits(), dot(&w, &xs[t]).to_bits());
        }
    }

    #[test]
    fn wrong_weight_length_is_refused() {
        assert!(Linear::new(vec![0.0; 5], None, 2, 3).is_err());
    }
}
