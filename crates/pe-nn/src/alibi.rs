//! [`AlibiBias`]: ALiBi added to attention scores, for MPT, BLOOM, Baichuan-13B and JinaBERT-v2
//! pipelines, without materialising an `(H, L, L)` bias: the `(H, 1, L)` causal form (or the
//! two factors of the symmetric one) broadcast into the scores.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_nn::AlibiBias;
//!
//! let alibi = AlibiBias::new(12)?;
//! // Scores of a decode step: (batch, heads, 1 query, 9 keys in the KV cache).
//! let scores = Tensor::zeros((2, 12, 1, 9), DType::F32, &Device::Cpu)?;
//! let biased = alibi.add_causal(&scores)?;
//! assert_eq!(biased.dims(), &[2, 12, 1, 9]);
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, Result, Tensor};
use candle_pe_core::Alibi;

/// ALiBi for attention scores `(batch, heads, queries, keys)`.
#[derive(Clone, Debug)]
pub struct AlibiBias {
    alibi: Alibi,
}

impl AlibiBias {
    /// ALiBi for `heads` heads with `alibi_bias_max` 8.
    pub fn new(heads: usize) -> Result<Self> {
        Ok(Self {
            alibi: Alibi::new(heads)?,
        })
    }

    /// The same heads with another `alibi_bias_max`.
    pub fn with_max_bias(self, max_bias: f64) -> Result<Self> {
        Ok(Self {
            alibi: self.alibi.with_max_bias(max_bias)?,
        })
    }

    /// The slopes (pe-core's [`Alibi`]).
    pub fn alibi(&self) -> &Alibi {
        &self.alibi
    }

    /// `scores` plus the causal bias `slope * (j - (keys - 1))`: for decoder-only models, the
    /// queries being the last ones of the keys (a prefill, or a decode step with a KV cache).
    pub fn add_causal(&self, scores: &Tensor) -> Result<Tensor> {
        let keys = self.check(scores)?.3;
        let bias = self
            .alibi
            .causal_bias(keys, scores.dtype(), scores.device())?;
        scores.broadcast_add(&bias)
    }

    /// `scores` plus the symmetric bias `-slope * |i - j|` of bidirectional attention
    /// (JinaBERT-v2), queries at positions `query_offset ..` and keys at `0 ..`.
    pub fn add_symmetric(&self, scores: &Tensor, query_offset: usize) -> Result<Tensor> {
        let (_, _, queries, keys) = self.check(scores)?;
        let (slopes, distance) = self.alibi.symmetric_factors(
            queries,
            query_offset,
            keys,
            scores.dtype(),
            scores.device(),
        )?;
        scores.broadcast_add(&slopes.broadcast_mul(&distance)?)
    }

    fn check(&self, scores: &Tensor) -> Result<(usize, usize, usize, usize)> {
        let heads = self.alibi.heads();
        match *scores.dims() {
            [b, h, q, k] if h == heads => Ok((b, h, q, k)),
            _ => bail!(
                "scores must have shape (batch, {heads}, queries, keys), got {:?}",
                scores.dims()
            ),
        }
    }
}
