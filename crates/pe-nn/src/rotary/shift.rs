//! Re-rotation of cached keys: [`RotaryEmbedding::shift`] moves keys already rotated at their
//! positions to other positions (a window cache dropping tokens, a context shift, a prefix
//! reused at another offset), from one offset to another, from per-token positions to others,
//! or from M-RoPE positions to others. Each pair turns by the exact angle between the two
//! positions ([`Rope::at_shift`](candle_pe_core::Rope::at_shift)), in f32 (f64 for f64 keys), rounded once
//! to the keys' dtype: a shifted key is the key rotated at its new position to within one
//! rounding of its dtype, at any distance, and shifting again from the result adds one rounding
//! more (shift from the original key to avoid that).
//!
//! On CUDA, where both sides share one spectrum, the rope kernel turns each token by the cos
//! and sin of its distance, computed where it uses them (`Rope::shift_without_tables`: no
//! table, and the host computes nothing exact). On the CPU the turn reads its table rows in one
//! pass, as [`apply`](RotaryEmbedding::apply) does at per-token positions; elsewhere (and with
//! [`TableBackend::Generic`]) candle-nn's kernels take the gathered tables. The plain twin
//! (`shift_slow`, for tests) is what all of them are held to.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_nn::{RopeConfig, RotaryEmbedding};
//!
//! let dev = Device::Cpu;
//! let rotary = RotaryEmbedding::new(RopeConfig::new(64, 10_000.0))?;
//! let k = Tensor::randn(0f32, 1.0, (1, 2, 5, 64), &dev)?.to_dtype(DType::BF16)?;
//! // Keys rotated at 1000 .. 1005, moved to 4 .. 9 (a window cache evicted 996 tokens).
//! let (_, at_1000) = rotary.apply(&k, &k, 1000)?;
//! let moved = rotary.shift(&at_1000, 1000, 4)?;
//! let (_, at_4) = rotary.apply(&k, &k, 4)?;
//! let err = (moved.to_dtype(DType::F32)? - at_4.to_dtype(DType::F32)?)?.abs()?.max_all()?;
//! assert!(err.to_scalar::<f32>()? <= 0.04); // a few bf16 roundings of values near 1
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, Device, Result, Tensor};
use candle_pe_core::{At, Place, Positions, ToPositions};

use super::embedding::{check_mrope_positions, table_dtype, Layout, Path, RotaryEmbedding};

/// How a shift is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// The rope kernel without tables where it runs, the CPU's one pass over k, or
    /// candle-nn's kernels elsewhere (and with [`TableBackend::Generic`]).
    Auto,
    /// Plain candle ops, the reference twin.
    Slow,
}

/// The tables of a shift: one row for every token, or a row per token shaped as the positions.
enum Tables {
    Shared(Tensor, Tensor),
    PerToken(Tensor, Tensor),
}

impl RotaryEmbedding {
    /// `k`, rotated at positions `from`, moved to positions `to`; both of one kind ([`At`]):
    ///
    /// - two offsets (`usize`): the keys at `from .. from + seq` moved to `to .. to + seq`
    ///   (`seq` the sequence or token axis of k), every token turning by the same exact angle
    ///   `(to - from) * w_i`: `shift(&k, 1000, 4)` moves keys back by 996 positions;
    /// - per-token positions (`&Tensor` or `&Positions`): `(batch, seq)` each for `(batch,
    ///   heads, seq, head_dim)` keys, `(tokens,)` for `(tokens, heads, head_dim)` ones, each in
    ///   `0 .. 2^31`; either may live on another device than k; each pair turns by the exact
    ///   angle `(to - from) * w_i`;
    /// - M-RoPE positions ([`At::mrope`]), `(3, batch, seq)` each for `(batch, heads, seq,
    ///   head_dim)` keys: frequency slot `i` turns by the exact difference of the row
    ///   `mrope_section` gives it.
    ///
    /// Between two offsets every token turns by one angle in the fixed frequencies (for
    /// dynamic NTK, those of the length tracked now). Otherwise the frequencies of each side
    /// are those [`apply`](Self::apply) uses: of a sequence reaching its largest position (so
    /// longrope turns from its short factors to its long ones when `to` goes past the original
    /// context), or for dynamic NTK those of the length
    /// tracked now on both sides (not for M-RoPE positions, whose tables track none), or those
    /// of the length a side carries ([`At::with_tracked_len`]: dynamic NTK grown from one
    /// length to another; longrope's factors chosen by each length): then each pair turns by
    /// `angle_new(to) - angle_old(from)`, exactly.
    pub fn shift<'a, 'b>(
        &self,
        k: &Tensor,
        from: impl Into<At<'a>>,
        to: impl Into<At<'b>>,
    ) -> Result<Tensor> {
        self.shift_route(k, from.into(), to.into(), Route::Auto)
    }

    /// For tests only, not part of the API: [`shift`](Self::shift) computed with plain candle
    /// ops from the same tables: the reference the one-pass and kernel paths are held to, bit
    /// for bit on the CPU.
    #[doc(hidden)]
    pub fn shift_slow<'a, 'b>(
        &self,
        k: &Tensor,
        from: impl Into<At<'a>>,
        to: impl Into<At<'b>>,
    ) -> Result<Tensor> {
        self.shift_route(k, from.into(), to.into(), Route::Slow)
    }

    fn shift_route(&self, k: &Tensor, from: At, to: At, route: Route) -> Result<Tensor> {
        let layout = self.check("k", k)?;
        let lens = (from.tracked_len(), to.tracked_len());
        match (from.place(), to.place()) {
            (Place::Offset(a), Place::Offset(b)) => self.shift_range(k, layout, (a, b), lens, route),
            (Place::Positions(f), Place::Positions(t)) => self.shift_ids(k, layout, (f, t), lens, route),
            (Place::Mrope(f), Place::Mrope(t)) => {
                check_mrope_positions(
                    "shift",
                    "k",
                    k,
                    layout,
                    &[("from", f.dims()), ("to", t.dims())],
                )?;
                if let Some(k) = self.without_tables_shift(k, from, to, route)? {
                    return Ok(k);
                }
                let (cos, sin) = self.rope().at_shift(from, to, table_dtype(k.dtype()))?;
                self.turn(k, layout, Tables::PerToken(cos, sin), route)
            }
            (f, t) => bail!(
                "shift takes from and to of one kind (two offsets, two per-token positions or two M-RoPE positions), got {f:?} and {t:?}"
            ),
        }
    }

    /// Keys at `from .. from + seq` moved to `to .. to + seq`: one table row for every token
    /// when both sides have one spectrum, a row per token otherwise.
    fn shift_range(
        &self,
        k: &Tensor,
        layout: Layout,
        (from, to): (usize, usize),
        lens: (Option<usize>, Option<usize>),
        route: Route,
    ) -> Result<Tensor> {
        let seq = layout.seq();
        Positions::check_range(from, seq)?;
        Positions::check_range(to, seq)?;
        // A move between offsets turns every token by one angle, in the fixed spectrum (for
        // dynamic NTK, the length tracked now): the spectrum of a side's reach is asked for
        // with `At::with_tracked_len`, or with per-token positions.
        let tracked = self.tracked_len().unwrap_or(0);
        let lens = (lens.0.unwrap_or(tracked), lens.1.unwrap_or(tracked));
        let one_spectrum = lens.0 == lens.1
            || self
                .rope()
                .fixed_up_to()
                .is_none_or(|fixed| lens.0 <= fixed && lens.1 <= fixed);
        if !one_spectrum {
            let (f, t) = (range_ids(layout, from)?, range_ids(layout, to)?);
            return self.shift_ids(k, layout, (&f, &t), (Some(lens.0), Some(lens.1)), route);
        }
        let sides = (
            At::offset(from).with_tracked_len(lens.0),
            At::offset(to).with_tracked_len(lens.1),
        );
        if let Some(k) = self.without_tables_shift(k, sides.0, sides.1, route)? {
            return Ok(k);
        }
        let ends = |p: usize| Tensor::new(&[p as i64], &Device::Cpu);
        let (f, t) = (ends(from)?, ends(to)?);
        let (cos, sin) = self.rope().at_shift(
            At::positions(&f).with_tracked_len(lens.0),
            At::positions(&t).with_tracked_len(lens.1),
            table_dtype(k.dtype()),
        )?;
        self.turn(k, layout, Tables::Shared(cos, sin), route)
    }

    /// Keys at per-token positions `from` moved to `to`, in the spectra of the given lengths,
    /// of the length tracked now, or of each side's reach.
    fn shift_ids(
        &self,
        k: &Tensor,
        layout: Layout,
        (from, to): (&dyn ToPositions, &dyn ToPositions),
        lens: (Option<usize>, Option<usize>),
        route: Route,
    ) -> Result<Tensor> {
        let (expected, shape) = match layout {
            Layout::Bhsd { batch, seq } => (vec![batch, seq], "(batch, seq)"),
            Layout::Thd { tokens } => (vec![tokens], "(tokens,)"),
        };
        for (name, positions) in [("from", from.dims()), ("to", to.dims())] {
            if positions != expected {
                bail!(
                    "{name} must have shape {shape} = {expected:?} for k {:?}, got {positions:?}",
                    k.dims()
                )
            }
        }
        let (from, to) = (from.to_positions()?, to.to_positions()?);
        let tracked = self.tracked_len();
        let from_len = lens.0.or(tracked).unwrap_or(from.end());
        let to_len = lens.1.or(tracked).unwrap_or(to.end());
        let sides = (
            At::positions(&from).with_tracked_len(from_len),
            At::positions(&to).with_tracked_len(to_len),
        );
        if let Some(k) = self.without_tables_shift(k, sides.0, sides.1, route)? {
            return Ok(k);
        }
        let (cos, sin) = self
            .rope()
            .at_shift(sides.0, sides.1, table_dtype(k.dtype()))?;
        self.turn(k, layout, Tables::PerToken(cos, sin), route)
    }

    /// The shift by the rope kernel, which turns each token by its distance without a table,
    /// where it runs (CUDA; the host build with `TableBackend::Kernel`) and both sides share
    /// one spectrum; `None` otherwise, and for the plain twin.
    fn without_tables_shift(
        &self,
        k: &Tensor,
        from: At,
        to: At,
        route: Route,
    ) -> Result<Option<Tensor>> {
        if route != Route::Auto || k.elem_count() == 0 {
            return Ok(None);
        }
        Ok(self
            .rope()
            .shift_without_tables(k, from, to, self.pair_layout())?)
    }

    /// Turns k by the shift tables.
    fn turn(&self, k: &Tensor, layout: Layout, tables: Tables, route: Route) -> Result<Tensor> {
        if k.elem_count() == 0 {
            return Ok(k.clone());
        }
        if route == Route::Auto && self.one_pass(k, Path::Fused) {
            // One table row for every token, or one per token: the rows of the one pass.
            let (Tables::Shared(cos, sin) | Tables::PerToken(cos, sin)) = tables;
            return self.rotate(k, layout, &cos, &sin, None, Path::Fused);
        }
        let (cos, sin) = token_tables(k, layout, tables)?;
        let path = match route {
            Route::Auto => Path::Fused,
            Route::Slow => Path::Slow,
        };
        self.rotate(k, layout, &cos, &sin, None, path)
    }
}

/// The shift tables as the kernels take them, on k's device: `(seq, half)`, `(batch, seq,
/// half)` or `(tokens, half)`.
fn token_tables(k: &Tensor, layout: Layout, tables: Tables) -> Result<(Tensor, Tensor)> {
    let (cos, sin) = match tables {
        Tables::Shared(cos, sin) => {
            let rows = match layout {
                Layout::Bhsd { seq, .. } => seq,
                Layout::Thd { tokens } => tokens,
            };
            // Spread on k's device: a copy of the spread tables to a GPU would cost more
            // than the rotation.
            let spread = |t: Tensor| {
                let half = t.dim(1)?;
                t.to_device(k.device())?
                    .broadcast_as((rows, half))?
                    .contiguous()
            };
            (spread(cos)?, spread(sin)?)
        }
        Tables::PerToken(cos, sin) => (cos, sin),
    };
    Ok((cos.to_device(k.device())?, sin.to_device(k.device())?))
}

/// Positions `offset .. offset + seq` for every token of k's layout: `(batch, seq)` or
/// `(tokens,)`, on the CPU.
fn range_ids(layout: Layout, offset: usize) -> Result<Tensor> {
    let seq = layout.seq();
    let ids = Tensor::arange(offset as i64, (offset + seq) as i64, &Device::Cpu)?;
    match layout {
        Layout::Bhsd { batch, seq } => ids.broadcast_as((batch, seq))?.contiguous(),
        Layout::Thd { .. } => Ok(ids),
    }
}
