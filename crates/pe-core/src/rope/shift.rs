//! The tables of a shift: `(cos, sin)` of the turn that moves a key rotated at position `from`
//! to position `to`. Rotations add, so the turn of pair `i` is the exact angle
//! `to * w_i - from * w_i = (to - from) * w_i`, whatever the two positions; where the
//! frequencies themselves differ between the two (dynamic NTK grown, longrope's short and long
//! factors), it is `to * w'_i - from * w_i`, the angle of the new spectrum at `to` less the angle
//! of the old one at `from`, both exact products subtracted in double-double. The sine and
//! cosine are taken to about an f64 ulp and rounded once to the table's dtype, so a key shifted
//! with them is its rotation at `to` to within one rounding of its own dtype, at any distance.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_core::{Rope, RopeConfig};
//!
//! let rope = Rope::new(RopeConfig::new(64, 10_000.0))?;
//! let from = Tensor::new(&[1000u32, 5], &Device::Cpu)?;
//! let to = Tensor::new(&[4, 2_000_000_000], &Device::Cpu)?;
//! let (cos, sin) = rope.at_shift(&from, &to, DType::F32)?;
//! assert_eq!(cos.dims(), &[2, 32]);
//! // Pair 0 (w = 1) of the first key turns back by 996 radians.
//! let want = (-996f64).sin() as f32;
//! assert_eq!(sin.get(0)?.get(0)?.to_scalar::<f32>()?, want);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use candle_core::{DType, Tensor};

use super::at::{At, Place};
use super::tables::{check_mrope_dims, mrope_axis, Rope};
use crate::describe::positions::{Positions, ToPositions};
use crate::generate::Generator;
use crate::{Error, Result};

impl Rope {
    /// `(cos, sin)` turning keys rotated at positions `from` to positions `to`, in `dtype`, on
    /// the device of `from`. `from` and `to` are both per-token positions, shaped alike (the
    /// tables are `from.dims() + [rotary_dim / 2]`), or both M-RoPE's `(3, ...)` positions
    /// ([`At::mrope`], rows temporal, height, width, as [`at`](Self::at) takes them: frequency
    /// slot `k` turns by the difference of the row `mrope_section` gives it; the tables are
    /// shaped as the positions without their first dim, plus `[rotary_dim / 2]`).
    ///
    /// The frequencies of each side are those of a sequence reaching its largest position, as
    /// [`at`](Self::at) uses (so longrope turns from its short factors to its long ones when
    /// `to` goes past the original context), or those of the length a side carries
    /// ([`At::with_tracked_len`]: dynamic NTK's tracked length). The angle of pair `i` is `to *
    /// w'_i - from * w_i` exactly, `(to - from) * w_i` when the two lengths give the same
    /// frequencies (every rope type but dynamic NTK and longrope; any length up to
    /// [`fixed_up_to`](Self::fixed_up_to) for those), and the values carry the ratio of the two
    /// attention factors (1 for every rope type in use, whose factor does not depend on the
    /// length). No table is cached: each distinct `(from, to)` (each distinct `to - from` for
    /// one spectrum) is computed once per call.
    pub fn at_shift<'a, 'b>(
        &self,
        from: impl Into<At<'a>>,
        to: impl Into<At<'b>>,
        dtype: DType,
    ) -> Result<(Tensor, Tensor)> {
        let (from, to) = (from.into(), to.into());
        let (f, t) = (from.explicit()?, to.explicit()?);
        let lens = (from.tracked_len(), to.tracked_len());
        match (from.place(), to.place()) {
            (Place::Positions(_), Place::Positions(_)) => {
                let (f, t) = checked_pair(f, t, "to", "from.dims()")?;
                let lens = (lens.0.unwrap_or(f.end()), lens.1.unwrap_or(t.end()));
                self.turns(&f, &t, lens, dtype)
            }
            (Place::Mrope(_), Place::Mrope(_)) => self.mrope_turns(f, t, lens, dtype),
            _ => Err(Error::ShapeMismatch {
                name: "to",
                expected: "positions of the kind of from (both per-token or both M-RoPE)".into(),
                shape: t.dims().to_vec(),
            }),
        }
    }

    /// The shift tables of checked positions in the spectra of the two lengths.
    fn turns(
        &self,
        from: &Positions,
        to: &Positions,
        (from_len, to_len): (usize, usize),
        dtype: DType,
    ) -> Result<(Tensor, Tensor)> {
        let (old, new) = (self.plan_for(from_len)?, self.plan_for(to_len)?);
        let rows = [host(from)?];
        let target = [host(to)?];
        Generator::turns(
            &old,
            &new,
            &rows,
            &target,
            self.half_dim(),
            |_| 0,
            from.dims(),
            dtype,
            (from.device(), self.uses_kernels(from.device(), from.len())?),
        )
    }

    /// M-RoPE's shift tables at `(3, ...)` positions, in the spectra of the given lengths or of
    /// sequences reaching each side's largest position.
    fn mrope_turns(
        &self,
        from: &dyn ToPositions,
        to: &dyn ToPositions,
        lens: (Option<usize>, Option<usize>),
        dtype: DType,
    ) -> Result<(Tensor, Tensor)> {
        let section = self.mrope_section("M-RoPE shift tables from (3, ...) positions")?;
        check_mrope_dims("from", from.dims())?;
        let (from, to) = checked_pair(from, to, "to", "from.dims()")?;
        let (from_len, to_len) = (lens.0.unwrap_or(from.end()), lens.1.unwrap_or(to.end()));
        let (old, new) = (self.plan_for(from_len)?, self.plan_for(to_len)?);
        let rows = [from.row(0)?, from.row(1)?, from.row(2)?];
        let target = [to.row(0)?, to.row(1)?, to.row(2)?];
        let rows = [host(&rows[0])?, host(&rows[1])?, host(&rows[2])?];
        let target = [host(&target[0])?, host(&target[1])?, host(&target[2])?];
        let interleaved = self.config().mrope_slots.is_alternating();
        Generator::turns(
            &old,
            &new,
            &rows,
            &target,
            self.half_dim(),
            |k| mrope_axis(section, interleaved, k),
            &from.dims()[1..],
            dtype,
            (from.device(), self.uses_kernels(from.device(), from.len())?),
        )
    }
}

/// Checks `from` and `to` and that they have the same shape.
fn checked_pair(
    from: &dyn ToPositions,
    to: &dyn ToPositions,
    name: &'static str,
    expected: &str,
) -> Result<(Positions, Positions)> {
    if from.dims() != to.dims() {
        return Err(Error::ShapeMismatch {
            name,
            expected: format!("{expected} = {:?}", from.dims()),
            shape: to.dims().to_vec(),
        });
    }
    Ok((from.to_positions()?, to.to_positions()?))
}

/// The values of checked positions, flattened, read to the host when they live elsewhere.
fn host(positions: &Positions) -> Result<Vec<i64>> {
    Ok(positions.values()?.into_owned())
}
