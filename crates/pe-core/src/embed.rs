//! [`PeCache::embed`]: `embedding_scale * weights[tokens] + PE(positions)`, the arithmetic of the embedding
//! block that starts every encoder and decoder.
//!
//! On the CPU it is one fused pass: each token's embedding row is gathered, scaled and added to
//! its exact encoding, and each output element is written once, with no `(batch, seq, d)`
//! intermediate. Its plain twin, on every other device (or with [`TableBackend::Generic`]), is the
//! candle-op composition: `index_select`, `affine`, the cached encoding rows, `broadcast_add`.
//! Half-precision weights are added in f32 (generic) or f64 (fused) and rounded once.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_core::{TableBackend, PeCache, PeSpec, SinusoidalEncoding, TokenPositions};
//!
//! let dev = Device::Cpu;
//! let weights = Tensor::randn(0f32, 1.0, (100, 32), &dev)?;
//! let tokens = Tensor::new(&[[1u32, 2, 3], [4, 5, 6]], &dev)?;
//! let fused = PeCache::new(SinusoidalEncoding::new(PeSpec::marian(32))?);
//! let x = fused.embed(&weights, &tokens, TokenPositions::Offset(10), 32f64.sqrt())?;
//! assert_eq!(x.dims(), &[2, 3, 32]);
//!
//! // The candle-op twin gives the same values.
//! let plain = PeCache::new(SinusoidalEncoding::new(PeSpec::marian(32))?.with_backend(TableBackend::Generic));
//! let y = plain.embed(&weights, &tokens, TokenPositions::Offset(10), 32f64.sqrt())?;
//! assert!((x - y)?.abs()?.max_all()?.to_scalar::<f32>()? < 1e-5);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```
//!
//! [`TableBackend::Generic`]: crate::TableBackend::Generic

use candle_core::{DType, Tensor, D};

use crate::describe::positions;
use crate::generate::kernel::TokenRows;
use crate::generate::{check_dtype, RowPositions};
use crate::{Error, PeCache, Positions, Result};

/// The positions of the tokens of an [`PeCache::embed`] call.
#[derive(Clone, Copy, Debug)]
pub enum TokenPositions<'a> {
    /// Token `s` of every sequence (the last axis) is at `offset + s`: `offset` is the number of
    /// tokens already in the KV cache.
    Offset(usize),
    /// Explicit positions, checked, shaped like the tokens (left-padded batches).
    Ids(&'a Positions),
    /// Explicit positions already made padding-aware (fairseq / HF M2M100, see
    /// [`padding_aware_positions`](crate::padding_aware_positions)): tokens at position
    /// `padding_idx` get no encoding.
    PaddedIds {
        /// The positions, checked, shaped like the tokens.
        positions: &'a Positions,
        /// The padding position.
        padding_idx: u32,
    },
}

impl PeCache {
    /// `embedding_scale * weights[tokens] + PE(positions)`, shape `tokens.dims() + [d]`, in the dtype of
    /// `weights` (`(vocab, d)`, f32, f16, bf16 or f64, with `d` this encoding's width), on the
    /// device of `tokens`. Tokens are integer ids below `vocab`, of rank 1 or more.
    pub fn embed(
        &self,
        weights: &Tensor,
        tokens: &Tensor,
        positions: TokenPositions<'_>,
        embedding_scale: f64,
    ) -> Result<Tensor> {
        self.check_embed(weights, tokens, embedding_scale)?;
        let (checked, largest) = check_positions(positions, tokens)?;
        let generator = self.encoding().generator();
        generator.plan().check_angles(largest)?;
        let mut shape = tokens.dims().to_vec();
        shape.push(self.encoding().width());
        if generator.uses_cpu(tokens.device())? {
            return self.embed_fused(weights, tokens, &checked, embedding_scale, shape);
        }
        if generator.uses_kernels(tokens.device(), tokens.elem_count())? {
            return self.embed_kernel(weights, tokens, &checked, embedding_scale, shape);
        }
        self.embed_plain(weights, tokens, checked, embedding_scale, shape)
    }

    /// Checks the weights against the width, their dtype, the scale and the tokens.
    fn check_embed(&self, weights: &Tensor, tokens: &Tensor, embedding_scale: f64) -> Result<()> {
        let d = self.encoding().width();
        let vocab = match *weights.dims() {
            [vocab, width] if width == d => vocab,
            _ => {
                return Err(Error::ShapeMismatch {
                    name: "weights",
                    expected: format!("(vocab, {d})"),
                    shape: weights.dims().to_vec(),
                })
            }
        };
        check_dtype(weights.dtype())?;
        if !embedding_scale.is_finite() {
            return Err(Error::InvalidParameter {
                name: "embedding_scale",
                expected: "finite",
                value: embedding_scale,
            });
        }
        positions::check_tokens(tokens, vocab)?;
        if tokens.rank() == 0 {
            return Err(Error::WrongRank {
                name: "tokens",
                expected: "1 or more",
                shape: vec![],
            });
        }
        Ok(())
    }

    /// The CPU's one fused pass: each token's row gathered, scaled and added to its encoding.
    fn embed_fused(
        &self,
        weights: &Tensor,
        tokens: &Tensor,
        checked: &Checked,
        embedding_scale: f64,
        shape: Vec<usize>,
    ) -> Result<Tensor> {
        let seq = tokens.dim(D::Minus1)?;
        let tokens = tokens
            .flatten_all()?
            .to_dtype(DType::I64)?
            .to_vec1::<i64>()?;
        let tokens: Vec<usize> = tokens.into_iter().map(|t| t as usize).collect();
        let values;
        let (rows, zero_at) = match checked {
            Checked::Offset(offset) => {
                let start = *offset as u32;
                let period = seq.max(1);
                (RowPositions::Repeat { start, period }, None)
            }
            Checked::Ids(ids, zero_at) => {
                values = match ids.host() {
                    Some(host) => host.iter().map(|&p| p as f64).collect(),
                    None => ids.flat(DType::F64)?.to_vec1::<f64>()?,
                };
                (RowPositions::Values(&values), *zero_at)
            }
        };
        let generator = self.encoding().generator();
        let out = generator.embed(weights, &tokens, rows, zero_at, embedding_scale)?;
        Ok(out.reshape(shape)?)
    }

    /// The kernels' one launch (CUDA, or their host build): each token's weight row read once,
    /// scaled and added to its encoding, with the fused CPU pass's bits.
    fn embed_kernel(
        &self,
        weights: &Tensor,
        tokens: &Tensor,
        checked: &Checked,
        embedding_scale: f64,
        shape: Vec<usize>,
    ) -> Result<Tensor> {
        let device = tokens.device();
        let (rows, zero_at) = match checked {
            Checked::Offset(offset) => {
                let period = tokens.dim(D::Minus1)?.max(1);
                let start = *offset as i64;
                (TokenRows::Repeat { start, period }, None)
            }
            Checked::Ids(ids, zero_at) => (TokenRows::Values(ids.f64_on(device)?), *zero_at),
        };
        let weights = weights.to_device(device)?;
        let generator = self.encoding().generator();
        let flat = tokens.flatten_all()?;
        let out = generator.embed_kernel(&weights, &flat, rows, zero_at, embedding_scale)?;
        Ok(out.reshape(shape)?)
    }

    /// The plain twin in candle ops: `index_select`, `affine`, the cached encoding rows,
    /// `broadcast_add`; half-precision weights added in f32 and rounded once.
    fn embed_plain(
        &self,
        weights: &Tensor,
        tokens: &Tensor,
        checked: Checked,
        embedding_scale: f64,
        shape: Vec<usize>,
    ) -> Result<Tensor> {
        let (ids, zero_at) = match checked {
            Checked::Offset(offset) => {
                let seq = tokens.dim(D::Minus1)?;
                let ids = Tensor::arange(offset as i64, (offset + seq) as i64, tokens.device())?;
                let ids = ids.broadcast_as(tokens.shape())?.contiguous()?;
                // Checked above, as a range.
                let bounds = (offset as i64, (offset + seq) as i64 - 1);
                (Positions::in_range(ids, bounds), None)
            }
            Checked::Ids(ids, zero_at) => (ids, zero_at),
        };
        let dtype = weights.dtype();
        let compute = match dtype {
            DType::F16 | DType::BF16 => DType::F32,
            other => other,
        };
        let flat = tokens.flatten_all()?.to_dtype(DType::U32)?;
        let x = weights
            .to_device(tokens.device())?
            .index_select(&flat, 0)?
            .to_dtype(compute)?
            .affine(embedding_scale, 0.0)?
            .reshape(shape)?;
        let pe = match zero_at {
            Some(pad) => self.padding_rows(&ids, pad, compute)?,
            None => self.at(&ids, compute)?,
        };
        Ok((x + pe)?.to_dtype(dtype)?)
    }
}

/// The positions of an embed call checked against the tokens, and the largest of them (the
/// angle check's).
fn check_positions(positions: TokenPositions<'_>, tokens: &Tensor) -> Result<(Checked, f64)> {
    let seq = tokens.dim(D::Minus1)?;
    let explicit = |positions: &Positions, zero_at| -> Result<(Checked, f64)> {
        same_shape(positions, tokens)?;
        let largest = positions.end().saturating_sub(1) as f64;
        Ok((Checked::Ids(positions.clone(), zero_at), largest))
    };
    match positions {
        TokenPositions::Offset(offset) => {
            let range = positions::range(offset, seq)?;
            // No token, no position: an empty batch checks no angle.
            let largest = if tokens.elem_count() == 0 {
                0.0
            } else {
                range.largest
            };
            Ok((Checked::Offset(offset), largest))
        }
        TokenPositions::Ids(ids) => explicit(ids, None),
        TokenPositions::PaddedIds {
            positions,
            padding_idx,
        } => explicit(positions, Some(padding_idx)),
    }
}

/// The positions of an embed call, checked.
enum Checked {
    /// Every sequence at `offset ..`.
    Offset(usize),
    /// Explicit positions shaped like the tokens, and the padding position.
    Ids(Positions, Option<u32>),
}

/// Fails unless `positions` have the shape of `tokens`.
fn same_shape(positions: &Positions, tokens: &Tensor) -> Result<()> {
    if positions.dims() != tokens.dims() {
        return Err(Error::ShapeMismatch {
            name: "positions",
            expected: format!("the shape of tokens, {:?}", tokens.dims()),
            shape: positions.dims().to_vec(),
        });
    }
    Ok(())
}
