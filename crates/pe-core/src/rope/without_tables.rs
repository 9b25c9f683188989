//! Rope without tables: q or k rotated where [`At`] says by `cuda/rope.cu`, which computes each
//! token's cos and sin where it uses them, with the rotary tables' bits, so that no cos/sin
//! table is built, stored or read. The result has the bits of the tables' rotation (candle-pe-nn's
//! one-pass CPU rotation, candle-nn's formula and order). It runs where the kernels run: on
//! CUDA, and on the CPU as their host build with [`TableBackend::Kernel`](crate::TableBackend)
//! (the `host-kernels` feature), where `cargo test` holds it to the tables' rotation bit for bit.

use candle_core::{DType, Tensor};

use super::at::{At, Place};
use super::layouts::PairLayout;
use super::tables::{mrope_axis, Rope};
use crate::describe::positions::Positions;
use crate::generate::kernel::TokenRows;
use crate::{Error, Result};

impl Rope {
    /// For candle-pe-nn's `RotaryEmbedding`, not a stable API: `x`, `(batch, heads, seq, d)` or
    /// `(tokens, heads, d)` with `d` the head dim, its first `rotary_dim` features turned at
    /// `at` (an offset, a position per token: `(batch, seq)` or `(tokens,)`, or M-RoPE's
    /// `(3, batch, seq)`) with `pairs`, the rest passed, by the rope kernel; `None` where it
    /// does not run (another device or backend, more tokens than its counts hold), for the
    /// tables' path.
    #[doc(hidden)]
    pub fn rotate_without_tables<'a>(
        &self,
        x: &Tensor,
        at: impl Into<At<'a>>,
        pairs: PairLayout,
    ) -> Result<Option<Tensor>> {
        let at = at.into();
        let (tokens, seq) = match *x.dims() {
            [batch, _, seq, d] if d == self.config().head_dim => (batch * seq, seq),
            [tokens, _, d] if d == self.config().head_dim => (tokens, tokens),
            _ => {
                return Err(Error::ShapeMismatch {
                    name: "x",
                    expected: format!(
                        "(batch, heads, seq, {0}) or (tokens, heads, {0})",
                        self.config().head_dim
                    ),
                    shape: x.dims().to_vec(),
                })
            }
        };
        let kernels = matches!(
            x.dtype(),
            DType::F32 | DType::F16 | DType::BF16 | DType::F64
        ) && self.uses_kernels(x.device(), tokens)?;
        if !kernels {
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
                                x.dims()
                            ),
                            _ => format!("{tokens} positions, one per token of x {:?}", x.dims()),
                        },
                        shape: positions.dims().to_vec(),
                    });
                }
                let values = positions.flat(DType::F64)?.to_device(x.device())?;
                (TokenRows::Values(values), axes, positions.end())
            }
        };
        let generator = self.generator_for(at.tracked_len().unwrap_or(end))?;
        generator
            .plan()
            .check_angles(end.saturating_sub(1) as f64)?;
        let rotated = generator.rope(x, rows, axes.as_deref(), pairs.is_interleaved())?;
        Ok(Some(rotated))
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
