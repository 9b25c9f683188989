//! [`Alibi`]: attention with linear biases (Press et al. 2022), as MPT, BLOOM, Baichuan-13B and
//! JinaBERT-v2 use it: per-head slopes, and the bias `slope * (j - i)` added to the attention
//! score of query `i` and key `j`, as tensors that broadcast instead of an `(H, L, L)` one.
//!
//! The slopes of `n` heads, with `p` the largest power of two at most `n`, are
//! `2^(-max_bias k / p)` for `k = 1 ..= p`, followed (when `n` is not a power of two) by the
//! odd-numbered slopes of `2p` heads, `2^(-max_bias (2k - 1) / (2p))`, until there are `n`.
//! This is the sequence of BLOOM's `build_alibi_tensor` and MPT's `gen_slopes` (which computes it
//! in another order). The slopes are computed in double-double, so every output dtype gets the
//! exact slope rounded once.
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::Alibi;
//!
//! let alibi = Alibi::new(12)?; // alibi_bias_max 8
//! assert_eq!(alibi.slopes()[0], 0.5);
//! // Causal decoding: 5 keys, the bias of each head (12, 1, 5), 0 at the newest key.
//! let bias = alibi.causal_bias(5, DType::F32, &Device::Cpu)?;
//! assert_eq!(bias.dims(), &[12, 1, 5]);
//! assert_eq!(bias.get(0)?.squeeze(0)?.to_vec1::<f32>()?, [-2.0, -1.5, -1.0, -0.5, 0.0]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use candle_core::{DType, Device, Tensor};

use crate::exact::dd::{Dd, LN2};
use crate::generate::{check_dtype, check_size};
use crate::{Error, Result, MAX_POSITION};

/// MPT's and the paper's `alibi_bias_max`.
pub const DEFAULT_ALIBI_BIAS_MAX: f64 = 8.0;

/// ALiBi slopes for a number of heads.
#[derive(Clone, Debug, PartialEq)]
pub struct Alibi {
    max_bias: f64,
    slopes: Vec<f64>,
}

impl Alibi {
    /// The slopes of `heads` heads with `alibi_bias_max` 8.
    pub fn new(heads: usize) -> Result<Self> {
        Self::slopes_for(heads, DEFAULT_ALIBI_BIAS_MAX)
    }

    /// The same heads with another `alibi_bias_max`.
    pub fn with_max_bias(self, max_bias: f64) -> Result<Self> {
        Self::slopes_for(self.heads(), max_bias)
    }

    /// The slopes of `heads` heads with `alibi_bias_max` `max_bias`.
    fn slopes_for(heads: usize, max_bias: f64) -> Result<Self> {
        if heads == 0 || heads > 1 << 20 {
            return Err(Error::InvalidParameter {
                name: "heads",
                expected: "in 1 ..= 1048576",
                value: heads as f64,
            });
        }
        if !(max_bias.is_finite() && max_bias > 0.0) {
            return Err(Error::InvalidParameter {
                name: "alibi_bias_max",
                expected: "finite and > 0",
                value: max_bias,
            });
        }
        let p = 1usize << heads.ilog2();
        // 2^(-max_bias k / m), exactly, rounded once.
        let slope = |k: usize, m: usize| (Dd::ratio(-max_bias * k as f64, m as f64) * LN2).exp();
        let mut slopes: Vec<f64> = (1..=p).map(|k| slope(k, p).to_f64()).collect();
        slopes.extend((0..heads - p).map(|j| slope(2 * j + 1, 2 * p).to_f64()));
        Ok(Self { max_bias, slopes })
    }

    /// The number of heads.
    pub fn heads(&self) -> usize {
        self.slopes.len()
    }

    /// `alibi_bias_max`.
    pub fn max_bias(&self) -> f64 {
        self.max_bias
    }

    /// The slope of each head, in f64.
    pub fn slopes(&self) -> &[f64] {
        &self.slopes
    }

    /// The slopes as a `(heads,)` tensor (what `candle-flash-attn`'s `flash_attn_alibi` takes).
    pub fn slopes_tensor(&self, dtype: DType, device: &Device) -> Result<Tensor> {
        check_dtype(dtype)?;
        Ok(Tensor::new(self.slopes.as_slice(), device)?.to_dtype(dtype)?)
    }

    /// The bias of causal attention over `keys` keys, `(heads, 1, keys)`: `slope * (j - (keys -
    /// 1))`, 0 at the newest key. It broadcasts over the queries of a `(batch, heads, queries,
    /// keys)` score tensor: within a row the bias differs from `slope * (j - i)` by a constant,
    /// which softmax ignores (MPT's form). A decode step with a KV cache of `keys` entries uses
    /// the same tensor.
    pub fn causal_bias(&self, keys: usize, dtype: DType, device: &Device) -> Result<Tensor> {
        check_dtype(dtype)?;
        check_len("keys", keys)?;
        // Built in f64 on the host first: 8 bytes a value besides the output.
        check_size(self.heads(), keys, dtype, device, 8 * keys as u128)?;
        let values: Vec<f64> = self
            .slopes
            .iter()
            .flat_map(|&m| (0..keys).map(move |j| m * (j as f64 - (keys as f64 - 1.0))))
            .collect();
        let bias = Tensor::from_vec(values, (self.heads(), 1, keys), device)?;
        Ok(bias.to_dtype(dtype)?)
    }

    /// The symmetric bias of bidirectional attention (JinaBERT-v2), `-slope * |i - j|` for
    /// `queries` queries at positions `query_offset ..` and `keys` keys at `0 ..`, as the two
    /// factors whose product it is: `(-slopes (heads, 1, 1), |i - j| (1, queries, keys))`, so
    /// that a caller can broadcast them without materialising `(heads, queries, keys)` twice.
    pub fn symmetric_factors(
        &self,
        queries: usize,
        query_offset: usize,
        keys: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        check_dtype(dtype)?;
        check_len("queries", query_offset.saturating_add(queries))?;
        check_len("keys", keys)?;
        check_size(queries, keys, dtype, device, 8 * keys as u128)?;
        let slopes: Vec<f64> = self.slopes.iter().map(|m| -m).collect();
        let slopes = Tensor::from_vec(slopes, (self.heads(), 1, 1), device)?.to_dtype(dtype)?;
        let distance: Vec<f64> = (query_offset..query_offset + queries)
            .flat_map(|i| (0..keys).map(move |j| (i as f64 - j as f64).abs()))
            .collect();
        let distance = Tensor::from_vec(distance, (1, queries, keys), device)?.to_dtype(dtype)?;
        Ok((slopes, distance))
    }
}

fn check_len(name: &'static str, len: usize) -> Result<()> {
    if len as u64 > MAX_POSITION {
        return Err(Error::PositionOutOfRange {
            name,
            value: len as i128,
        });
    }
    Ok(())
}
