//! llama.cpp's converter's f32 arithmetic, rebuilt step for step, so that what a GGUF file
//! stores is read back as the exact values the checkpoint's `config.json` held: DeepSeek-2's
//! `yarn_log_multiplier` (stored as `0.1 * mscale_all_dim`), the `rope_freqs` a llama3
//! rope writes (recognised bit for bit, then read as [`Llama3`] with its parameters), and the
//! rotated fraction of a head. Plain numbers in, plain numbers out: no key, no tensor, no
//! error.

use candle_pe_core::Llama3;

use super::meta::decimal;

/// The shortest decimal `m` whose `0.1 * m` (in f64, as DeepSeek-2's converter computes it)
/// rounds to the stored `v`: the decimal of `v` with its point moved one place, when that
/// holds; else `v / 0.1` in f32, as llama.cpp divides it.
pub(super) fn tenfold(v: f32) -> f64 {
    let text = format!("{v}");
    let shifted = match text.split_once('.') {
        Some((int, frac)) => {
            let (first, rest) = frac.split_at(frac.len().min(1));
            format!("{int}{first:0<1}.{rest}0")
        }
        None => format!("{text}0"),
    };
    match shifted.parse::<f64>() {
        Ok(m) if ((0.1 * m) as f32).to_bits() == v.to_bits() => m,
        _ => decimal(v / 0.1f32),
    }
}

/// The two f32 values around `x` (one when `x` is an f32): the results a faithfully rounded f32
/// power may give.
fn f32_neighbors(x: f64) -> [f32; 2] {
    let f = x as f32;
    let step = |f: f32, up: bool| {
        let bits = f.to_bits();
        f32::from_bits(if up { bits + 1 } else { bits - 1 })
    };
    match (f as f64).partial_cmp(&x) {
        Some(std::cmp::Ordering::Less) => [f, step(f, true)],
        Some(std::cmp::Ordering::Greater) => [step(f, false), f],
        _ => [f, f],
    }
}

/// The divisor llama.cpp's converter writes for pair `i` of a llama3 rope, given its f32 power
/// `base^(2i/head_dim)`: the converter's own f32 arithmetic (torch f32 tensors, Python scalars
/// rounded to f32), step for step.
fn converter_llama3_divisor(power: f32, p: &Llama3) -> f32 {
    let original = p.original_max_position_embeddings as f64;
    let high_wavelen = (original / p.high_freq_factor) as f32;
    let low_wavelen = (original / p.low_freq_factor) as f32;
    let freq = 1.0f32 / power;
    // Python's `2 * math.pi / freq` on a tensor is `freq.reciprocal() * (2 pi)`.
    let wavelen = (1.0f32 / freq) * (2.0 * std::f64::consts::PI) as f32;
    if wavelen < high_wavelen {
        1.0
    } else if wavelen > low_wavelen {
        p.factor as f32
    } else {
        let smooth = ((1.0f32 / wavelen) * original as f32 - p.low_freq_factor as f32)
            / (p.high_freq_factor - p.low_freq_factor) as f32;
        1.0f32 / ((1.0f32 - smooth) / p.factor as f32 + smooth)
    }
}

/// Whether `stored` is, bit for bit, what llama.cpp's converter writes for the llama3
/// parameters `p`, heads of `head_dim` and base `base`. Its f32 power (torch's) is within an ulp
/// of the exact one: either neighbor is accepted, pair by pair.
pub(super) fn is_converter_llama3(stored: &[f32], base: f64, head_dim: usize, p: &Llama3) -> bool {
    if head_dim < 2 || stored.len() != head_dim / 2 || p.high_freq_factor <= p.low_freq_factor {
        return false;
    }
    stored.iter().enumerate().all(|(i, s)| {
        let exponent = (2 * i) as f32 / head_dim as f32;
        f32_neighbors(base.powf(exponent as f64))
            .iter()
            .any(|&power| converter_llama3_divisor(power, p).to_bits() == s.to_bits())
    })
}

/// The largest relative error (half an ulp over the value) of f32 numbers.
pub(super) fn f32_relative_error(values: &[f32]) -> f64 {
    values
        .iter()
        .map(|&v| {
            let next = f32::from_bits(v.to_bits() + 1);
            (next as f64 - v as f64) / 2.0 / v as f64
        })
        .fold(0.0, f64::max)
}

/// The llama3 parameter sets `rope_freqs` is tried against: the file's own factor and original
/// context when it gives them, then Llama 3.1's and Llama 3.2's.
pub(super) fn llama3_candidates(factor: Option<f64>, original: Option<usize>) -> Vec<Llama3> {
    let set = |factor: f64, original: usize| Llama3 {
        factor,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: original,
    };
    let mut candidates = Vec::new();
    if factor.is_some() || original.is_some() {
        candidates.push(set(factor.unwrap_or(8.0), original.unwrap_or(8192)));
    }
    candidates.extend([set(8.0, 8192), set(32.0, 8192)]);
    candidates
}
