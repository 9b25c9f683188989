//! Rope without tables: q and k rotated where [`At`] says by `cuda/rope.cu`, in one launch,
//! which computes each token's cos and sin where it uses them (once for both), with the rotary
//! tables' bits, so that no cos/sin table is built, stored or read. The result has the bits of
//! the tables' rotation (candle-pe-nn's one-pass CPU rotation, candle-nn's formula and order).
//! It runs where the kernels run: on CUDA, and on the CPU as their host build with
//! [`TableBackend::Kernel`](crate::TableBackend) (the `host-kernels` feature), where
//! `cargo test` holds it to the tables' rotation bit for bit.
//!
//! A shift of cached keys runs the same kernel: each token turns by the exact angle of its
//! distance `to - from`, with the bits of the shift tables' rotation, so that the host neither
//! computes nor sends a table.

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
        let dtypes = xs.iter().all(|x| turns_dtype(x.dtype()));
        if !dtypes || !self.uses_kernels(first.device(), tokens)? {
            return Ok(None);
        }
        let (rows, axes, end) = match at.place() {
            Place::Offset(offset) => {
                let end = Positions::check_range(offset, seq)?;
                let rows = TokenRows::Repeat {
                    start: offset as i64,
                    period: seq,
                };
                (rows, None, end)
            }
            _ => {
                let (positions, axes) = self.token_positions(&at, first, tokens)?;
                let values = positions.f64_on(first.device())?;
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

    /// For candle-pe-nn's `RotaryEmbedding::shift`, not a stable API: `k`, rotated at `from`,
    /// moved to `to` (two offsets, two per-token positions or two M-RoPE positions, as
    /// [`rotate_without_tables`](Self::rotate_without_tables) takes them, the positions on any
    /// device) by the rope kernel, which turns each token by the cos and sin of the exact angle
    /// of its distance `to - from`, computed where it uses them: the bits of the rotation by the
    /// shift tables ([`at_shift`](Self::at_shift)), in one launch, with no table and no exact
    /// computation on the host. The frequencies of each side are those of the length it carries
    /// ([`At::with_tracked_len`]), else of a sequence reaching its largest position. `None`
    /// where the kernel does not run (another device or backend, more tokens than its counts
    /// hold), where the two sides' frequencies differ, or where a bound on the distances leaves
    /// the exact domain, for the tables' path.
    #[doc(hidden)]
    pub fn shift_without_tables<'a, 'b>(
        &self,
        k: &Tensor,
        from: impl Into<At<'a>>,
        to: impl Into<At<'b>>,
        pairs: PairLayout,
    ) -> Result<Option<Tensor>> {
        let (from, to) = (from.into(), to.into());
        let (tokens, seq) = self.tokens_of(k)?;
        if !turns_dtype(k.dtype()) || !self.uses_kernels(k.device(), tokens)? {
            return Ok(None);
        }
        let (moves, axes, ends, largest) = match (from.place(), to.place()) {
            (Place::Offset(a), Place::Offset(b)) => {
                let ends = (
                    Positions::check_range(a, seq)?,
                    Positions::check_range(b, seq)?,
                );
                let distance = b as i64 - a as i64;
                (Move::By(distance), None, ends, distance.unsigned_abs())
            }
            (Place::Positions(_), Place::Positions(_)) | (Place::Mrope(_), Place::Mrope(_)) => {
                let (f, axes) = self.token_positions(&from, k, tokens)?;
                let (t, _) = self.token_positions(&to, k, tokens)?;
                if f.dims() != t.dims() {
                    return Err(Error::ShapeMismatch {
                        name: "to",
                        expected: format!("from.dims() = {:?}", f.dims()),
                        shape: t.dims().to_vec(),
                    });
                }
                // Every distance lies within the two sides' bounds.
                let reach =
                    |a: &Positions, b: &Positions| b.max().unwrap_or(0) - a.min().unwrap_or(0);
                let largest = reach(&f, &t).max(reach(&t, &f)).unsigned_abs();
                let ends = (f.end(), t.end());
                (Move::Between(f, t), axes, ends, largest)
            }
            _ => return Ok(None),
        };
        let lens = (
            from.tracked_len().unwrap_or(ends.0),
            to.tracked_len().unwrap_or(ends.1),
        );
        let (old, new) = (self.generator_for(lens.0)?, self.generator_for(lens.1)?);
        let plan = new.plan();
        if !old.plan().same_spectrum(plan) || plan.check_angles(largest as f64).is_err() {
            return Ok(None);
        }
        // The distances, made only once the kernel is sure to take them.
        let distances = match moves {
            Move::By(distance) => TokenRows::Repeat {
                start: distance,
                period: 1,
            },
            Move::Between(f, t) => {
                let from_values = f.flat(DType::F64)?.to_device(t.device())?;
                TokenRows::Values((t.flat(DType::F64)? - from_values)?.to_device(k.device())?)
            }
        };
        let shifted = new.shift(k, distances, axes.as_deref(), pairs.is_interleaved())?;
        Ok(Some(shifted))
    }

    /// The positions of `at` (per-token or M-RoPE) and, for M-RoPE, each pair's position row:
    /// one position per token of x (`tokens` of them), three rows of them for M-RoPE, or the
    /// error naming the shape x takes.
    fn token_positions(
        &self,
        at: &At,
        x: &Tensor,
        tokens: usize,
    ) -> Result<(Positions, Option<Vec<u32>>)> {
        let positions = at.explicit()?.to_positions()?;
        let axes = match at.place() {
            Place::Mrope(_) => Some(self.mrope_axes()?),
            _ => None,
        };
        let rows = if axes.is_some() { 3 } else { 1 };
        if positions.len() != rows * tokens || positions.dims().first() != Some(&rows) && rows == 3
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
        Ok((positions, axes))
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

/// How the tokens of a shift move: all by one distance (between two offsets), or each from its
/// position to another (per-token or M-RoPE positions, shaped alike).
enum Move {
    By(i64),
    Between(Positions, Positions),
}

/// Whether the rope kernel turns inputs of `dtype`.
fn turns_dtype(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
}
