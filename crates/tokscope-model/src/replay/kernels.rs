//! The element-wise and per-row pieces of a Llama layer: RMSNorm, rotary
//! position embeddings, SiLU and softmax. Each mirrors the float32 order of
//! operations in transformers' `modeling_llama.py`, which is what the golden
//! outputs were produced with.

/// RMSNorm of each `weight.len()`-wide row of `x`: `w * x / sqrt(mean(x^2) + eps)`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let width = weight.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(width) {
        let mean_square = row.iter().map(|v| v * v).sum::<f32>() / width as f32;
        let scale = 1.0 / (mean_square + eps).sqrt();
        out.extend(row.iter().zip(weight).map(|(v, w)| w * (v * scale)));
    }
    out
}

/// Rotary embedding frequencies `1 / theta^(2j / head_dim)` for `j < head_dim / 2`.
pub fn rope_inv_freq(theta: f64, head_dim: usize) -> Vec<f32> {
    (0..head_dim / 2).map(|j| (1.0 / theta.powf((2 * j) as f64 / head_dim as f64)) as f32).collect()
}

/// Rotates every head of one position's query or key vector in place, in the
/// Hugging Face "half" layout: element `j` pairs with `j + head_dim / 2`.
pub fn apply_rope(heads: &mut [f32], position: usize, inv_freq: &[f32]) {
    let half = inv_freq.len();
    // The angle is formed in f32 like transformers' `position * inv_freq`, so
    // long positions round the same way; cos/sin are then exact for that angle.
    let (cos, sin): (Vec<f32>, Vec<f32>) = inv_freq
        .iter()
        .map(|f| {
            let angle = (position as f32 * f) as f64;
            (angle.cos() as f32, angle.sin() as f32)
        })
        .unzip();
    for head in heads.chunks_exact_mut(2 * half) {
        let (lo, hi) = head.split_at_mut(half);
        for j in 0..half {
            let (a, b) = (lo[j], hi[j]);
            lo[j] = a * cos[j] - b * sin[j];
            hi[j] = b * cos[j] + a * sin[j];
        }
    }
}

/// SiLU (swish), the gate activation of Llama's MLP.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Softmax in place, shifted by the maximum so large logits cannot overflow.
pub fn softmax_in_place(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}

/// Log-softmax of one logits row, in f64 so that log-probabilities of likely
/// tokens (close to 0) keep their digits.
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let log_sum = logits.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln() + max;
    logits.iter().map(|&v| v as f64 - log_sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_scales_each_row_to_unit_rms() {
        // Row [3, 4]: mean square 12.5, so values divide by sqrt(12.5) = 3.5355...
        let out = rms_norm(&[3.0, 4.0, 1.0, 1.0], &[1.0, 2.0], 0.0);
        let expected = [0.848_528_1, 2.262_741_7, 1.0, 2.0];
        for (o, e) in out.iter().zip(expected) {
            assert!((o - e).abs() < 1e-6, "{out:?}");
        }
    }

    #[test]
    fn rope_pairs_first_and_second_half_of_each_head() {
        // head_dim 4, theta 1: inv_freq = [1, 1]; at position 1 every pair turns by 1 radian.
        let inv = rope_inv_freq(1.0, 4);
        assert_eq!(inv, vec![1.0, 1.0]);
        let mut head = [1.0, 0.0, 0.0, 1.0];
        apply_rope(&mut head, 1, &inv);
        let (c, s) = (1f32.cos(), 1f32.sin());
        // Pair (0, 2) = (1, 0) -> (cos, sin); pair (1, 3) = (0, 1) -> (-sin, cos).
        let expected = [c, -s, s, c];
        for (o, e) in head.iter().zip(expected) {
            assert!((o - e).abs() < 1e-6, "{head:?}");
        }
    }

    #[test]
    fn rope_at_position_zero_is_identity() {
        let mut head = [0.3, -1.0, 2.0, 0.5];
        apply_rope(&mut head, 0, &rope_inv_freq(10000.0, 4));
        assert_eq!(head, [0.3, -1.0, 2.0, 0.5]);
    }

    #[test]
    fn log_softmax_of_equal_logits_is_minus_log_n() {
        let lp = log_softmax(&[5.0, 5.0, 5.0, 5.0]);
        assert!(lp.iter().all(|v| (v + 4f64.ln()).abs() < 1e-12));
    }

    #[test]
    fn softmax_survives_large_logits() {
        let mut x = [1000.0, 1000.0];
        softmax_in_place(&mut x);
        assert_eq!(x, [0.5, 0.5]);
    }
}
