//! Rope without tables: q and k rotated where [`At`] says by `cuda/rope.cu`, in one launch,
//! which computes each token's cos and sin where it uses them (once for both), with the rotary
//! tables' bits, so that no cos/sin table is built, stored or read. The result has the bits of
//! the tables' rotation (candle-pe-nn's one-pass CPU rotation, candle-nn's formula and order).
//! It runs where the kernels run: on CUDA, and on the CPU as their host build with
//! [`TableBackend::Kernel`](crate::TableBackend) (the `host-kernels` feature), where
//! `cargo test` holds it to the tables' rotation bit for bit.

use candle_core::{DType, Tensor};

use super::at::{At, Place};
use super::layouts::PairLayout;
use super::tables::{mrope_axis, Rope};
use crate::describe::positions::Positions;
use crate::generate::kernel::{turns_with, TokenRows};
use crate::{Error, Result};

impl Rope {
    /// For candle-pe-nn's `RotaryEmbedding`, not a stable API: each of `xs` (q and k, on one
    /// device), `(batch, heads, seq, d)` or `(tokens, heads, d)` with `d` the head dim and the
    /// same tokens, its first `rotary_dim` features turned at `at` (an offset, a position per
    /// token: `(batch, seq)` or `(tokens,)`, or M-RoPE's `(3, batch, seq)`) with `pairs`, the
    /// rest passed, by the rope kernel; the positions are read and moved to the device once for
    /// all of them, and an input followed by one of the same dims but for its heads and of its
    /// dtype (q, then k) turns with it in one launch, by one cos and sin. `None` where the
    /// kernel does not run (another device or backend, more tokens than its counts hold), for
    /// the tables' path.
    #[doc(hidden)]
    pub fn rotate_without_tables<'a>(
        &self,
        xs: &[&Tensor],
        at: impl Into<At<'a>>,
        pairs: PairLayout,
    ) -> Result<Option<Vec<Tensor>>> {
        let at = at.into();
        let Some(&first) = xs.first() else {
            return Ok(Some(Vec::new()));
        };
        let (tokens, seq) = self.tokens_of(first)?;
        for &x in xs {
            if self.tokens_of(x)? != (tokens, seq) || !x.device().same_device(first.device()) {
                return Err(Error::ShapeMismatch {
                    name: "x",
                    expected: format!("the tokens of {:?} on its device", first.dims()),
                    shape: x.dims().to_vec(),
                });
            }
        }
        let dtypes = xs.iter().all(|x| {
            matches!(
                x.dtype(),
                DType::F32 | DType::F16 | DType::BF16 | DType::F64
            )
        });
        if !dtypes || !self.uses_kernels(first.device(), tokens)? {
            return Ok(None);
        }
        let (rows, axes, end) = match at.place() {
            Place::Offset(offset) => {
                let end = Positions::check_range(offset, seq)?;
                let rows = TokenRows::Repeat {
                    start: offset as u32,
                    period: seq,
                };
                (rows, None, end)
            }
            place => {
                let positions = at.explicit()?.to_positions()?;
                let axes = match place {
                    Place::Mrope(_) => Some(self.mrope_axes()?),
                    _ => None,
                };
                let rows = if axes.is_some() { 3 } else { 1 };
                if positions.len() != rows * tokens
                    || positions.dims().first() != Some(&rows) && rows == 3
                {
                    return Err(Error::ShapeMismatch {
                        name: "positions",
                        expected: match rows {
                            3 => format!(
                                "(3, ...) of 3 x {tokens} positions (M-RoPE) for x {:?}",
                                first.dims()
                            ),
                            _ => {
                                format!("{tokens} positions, one per token of x {:?}", first.dims())
                            }
                        },
                        shape: positions.dims().to_vec(),
                    });
                }
                let values = positions.flat(DType::F64)?.to_device(first.device())?;
                (TokenRows::Values(values), axes, positions.end())
            }
        };
        let generator = self.generator_for(at.tracked_len().unwrap_or(end))?;
        generator
            .plan()
            .check_angles(end.saturating_sub(1) as f64)?;
        // q and k (the same dims but for the heads, one dtype) turn in one launch.
        let mut rotated = Vec::with_capacity(xs.len());
        while rotated.len() < xs.len() {
            let x = xs[rotated.len()];
            let k = xs.get(rotated.len() + 1).filter(|k| turns_with(x, k));
            let xs = (x, k.copied());
            let (x, k) =
                generator.rope(xs, rows.clone(), axes.as_deref(), pairs.is_interleaved())?;
            rotated.push(x);
            rotated.extend(k);
        }
        Ok(Some(rotated))
    }

    /// The tokens of x, `(batch * seq, seq)` or `(tokens, tokens)`, or the error naming the
    /// shapes a rotation takes.
    fn tokens_of(&self, x: &Tensor) -> Result<(usize, usize)> {
        let head_dim = self.config().head_dim;
        match *x.dims() {
            [batch, _, seq, d] if d == head_dim => Ok((batch * seq, seq)),
            [tokens, _, d] if d == head_dim => Ok((tokens, tokens)),
            _ => Err(Error::ShapeMismatch {
                name: "x",
                expected: format!("(batch, heads, seq, {head_dim}) or (tokens, heads, {head_dim})"),
                shape: x.dims().to_vec(),
            }),
        }
    }

    /// The position row (M-RoPE's temporal, height, width) of each frequency slot.
    fn mrope_axes(&self) -> Result<Vec<u32>> {
        let section = self.mrope_section("M-RoPE rotation from (3, ...) positions")?;
        let alternating = self.config().mrope_slots.is_alternating();
        Ok((0..self.half_dim())
            .map(|k| mrope_axis(section, alternating, k) as u32)
            .collect())
    }
}
