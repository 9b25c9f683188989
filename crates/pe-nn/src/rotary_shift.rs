//! Re-rotation of cached keys: [`RotaryEmbedding::shift`], [`shift_at`](RotaryEmbedding::shift_at)
//! and [`shift_mrope`](RotaryEmbedding::shift_mrope) move keys already rotated at their positions
//! to other positions (a window cache dropping tokens, a context shift, a prefix reused at
//! another offset). Each pair turns by the exact angle between the two positions
//! ([`Rope::at_shift`](candle_pe_core::Rope::at_shift)), in f32 (f64 for f64 keys), rounded once
//! to the keys' dtype: a shifted key is the key rotated at its new position to within one
//! rounding of its dtype, at any distance, and shifting again from the result adds one rounding
//! more (shift from the original key to avoid that).
//!
//! On the CPU the turn reads its table rows in one pass, as [`apply_at`](RotaryEmbedding::apply_at)
//! does; on other devices (and with [`TableBackend::Generic`]) candle-nn's kernels take the
//! gathered tables; [`shift_at_slow`](RotaryEmbedding::shift_at_slow) is the plain twin both are
//! held to.
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
//! let moved = rotary.shift(&at_1000, -996)?;
//! let (_, at_4) = rotary.apply(&k, &k, 4)?;
//! let err = (moved.to_dtype(DType::F32)? - at_4.to_dtype(DType::F32)?)?.abs()?.max_all()?;
//! assert!(err.to_scalar::<f32>()? <= 0.04); // a few bf16 roundings of values near 1
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, Device, Result, Tensor};
use candle_pe_core::{TableBackend, ToPositions, MAX_POSITION};

use crate::rotary::{table_dtype, Layout, Path, RotaryEmbedding};
use crate::rotary_mrope::check_mrope_positions;

/// How a shift is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// The CPU's one pass over k, or candle-nn's kernels elsewhere (and with
    /// [`TableBackend::Generic`]).
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
    /// `k`, rotated at its positions, moved by `delta` positions (negative too, `|delta| <
    /// 2^31`): every token of `(batch, heads, seq, head_dim)` or `(tokens, heads, head_dim)`
    /// turns by the exact angle `delta * w_i`. The frequencies are the fixed ones (for dynamic
    /// NTK, those of the length tracked now); where they depend on the length (longrope past
    /// its original context), use [`shift_at_with_len`](Self::shift_at_with_len).
    pub fn shift(&self, k: &Tensor, delta: i64) -> Result<Tensor> {
        let layout = self.check("k", k)?;
        if delta.unsigned_abs() >= MAX_POSITION {
            bail!("delta must be within -2147483647 ..= 2147483647 (|delta| < 2^31), got {delta}")
        }
        let (from, to) = if delta >= 0 { (0, delta) } else { (-delta, 0) };
        let len = self.tracked_len().unwrap_or(0);
        let from = Tensor::new(&[from], &Device::Cpu)?;
        let to = Tensor::new(&[to], &Device::Cpu)?;
        let (cos, sin) =
            self.rope()
                .at_shift_with_len(&from, &to, len, len, table_dtype(k.dtype()))?;
        self.turn(k, layout, Tables::Shared(cos, sin), Route::Auto)
    }

    /// `k`, rotated at positions `from`, moved to positions `to`: `(batch, seq)` each for
    /// `(batch, heads, seq, head_dim)` keys, `(tokens,)` for `(tokens, heads, head_dim)` ones,
    /// each position in `0 .. 2^31`; either may live on another device than k. Each pair turns
    /// by the exact angle `(to - from) * w_i`. The frequencies of each side are those
    /// [`apply_at`](Self::apply_at) uses: of a sequence reaching its largest position (so
    /// longrope turns from its short factors to its long ones when `to` goes past the original
    /// context), or for dynamic NTK those of the length tracked now on both sides.
    pub fn shift_at(
        &self,
        k: &Tensor,
        from: &impl ToPositions,
        to: &impl ToPositions,
    ) -> Result<Tensor> {
        self.shift_at_route(k, from, to, None, Route::Auto)
    }

    /// [`shift_at`](Self::shift_at) with the frequencies of a sequence of `from_len` positions on
    /// the `from` side and of `to_len` on the `to` side: each pair turns by `angle_new(to) -
    /// angle_old(from)`, exactly (dynamic NTK grown from `from_len` to `to_len`; longrope's
    /// factors chosen by each length).
    pub fn shift_at_with_len(
        &self,
        k: &Tensor,
        from: &impl ToPositions,
        to: &impl ToPositions,
        from_len: usize,
        to_len: usize,
    ) -> Result<Tensor> {
        self.shift_at_route(k, from, to, Some((from_len, to_len)), Route::Auto)
    }

    /// [`shift_at`](Self::shift_at) computed with plain candle ops from the same tables: the
    /// reference the one-pass and kernel paths are held to, bit for bit on the CPU.
    pub fn shift_at_slow(
        &self,
        k: &Tensor,
        from: &impl ToPositions,
        to: &impl ToPositions,
    ) -> Result<Tensor> {
        self.shift_at_route(k, from, to, None, Route::Slow)
    }

    /// M-RoPE keys `(batch, heads, seq, head_dim)` rotated at positions `from`, moved to
    /// `to`, each `(3, batch, seq)` as [`apply_mrope`](Self::apply_mrope) takes them: frequency
    /// slot `i` turns by the exact difference of the row `mrope_section` gives it.
    pub fn shift_mrope(
        &self,
        k: &Tensor,
        from: &impl ToPositions,
        to: &impl ToPositions,
    ) -> Result<Tensor> {
        let layout = self.check("k", k)?;
        check_mrope_positions(
            "shift_mrope",
            "k",
            k,
            layout,
            &[("from", from.dims()), ("to", to.dims())],
        )?;
        let (cos, sin) = self
            .rope()
            .at_shift_mrope(from, to, table_dtype(k.dtype()))?;
        self.turn(k, layout, Tables::PerToken(cos, sin), Route::Auto)
    }

    fn shift_at_route(
        &self,
        k: &Tensor,
        from: &impl ToPositions,
        to: &impl ToPositions,
        lens: Option<(usize, usize)>,
        route: Route,
    ) -> Result<Tensor> {
        let layout = self.check("k", k)?;
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
        let (from_len, to_len) = match (lens, self.tracked_len()) {
            (Some(lens), _) => lens,
            (None, Some(len)) => (len, len),
            (None, None) => (from.end(), to.end()),
        };
        let (cos, sin) =
            self.rope()
                .at_shift_with_len(&from, &to, from_len, to_len, table_dtype(k.dtype()))?;
        self.turn(k, layout, Tables::PerToken(cos, sin), route)
    }

    /// Turns k by the shift tables.
    fn turn(&self, k: &Tensor, layout: Layout, tables: Tables, route: Route) -> Result<Tensor> {
        if k.elem_count() == 0 {
            return Ok(k.clone());
        }
        let tokens = match layout {
            Layout::Bhsd { batch, seq } => batch * seq,
            Layout::Thd { tokens } => tokens,
        };
        let one_pass = route == Route::Auto
            && k.device().is_cpu()
            && self.rope().backend() != TableBackend::Generic;
        if one_pass {
            let (rows, positions, cos, sin) = match tables {
                Tables::Shared(cos, sin) => (1, vec![0; tokens], cos, sin),
                Tables::PerToken(cos, sin) => (tokens, (0..tokens as i64).collect(), cos, sin),
            };
            let op = self.rows_op(&positions, rows);
            return op.apply(k, &cos.contiguous()?, &sin.contiguous()?);
        }
        // One table row for every token: the CUDA kernel reads it in place.
        #[cfg(feature = "cuda")]
        if let (Tables::Shared(cos, sin), Route::Auto) = (&tables, route) {
            let full = k.dims().last() == Some(&self.rope().config().rotary_dim());
            let (cos, sin) = (cos.to_device(k.device())?, sin.to_device(k.device())?);
            let heads = k.dim(1)?;
            if full {
                if let Some(k) = crate::rotary_cuda::turn(
                    k,
                    &cos,
                    &sin,
                    heads,
                    1,
                    0,
                    0,
                    self.pair_layout().is_interleaved(),
                )? {
                    return Ok(k);
                }
            }
        }
        // Tables as the kernels take them: (seq, half), (batch, seq, half) or (tokens, half).
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
        let (cos, sin) = (cos.to_device(k.device())?, sin.to_device(k.device())?);
        let path = match route {
            Route::Auto => Path::Fused,
            Route::Slow => Path::Slow,
        };
        self.rotate(k, layout, &cos, &sin, None, path)
    }
}
