//! [`Rope`]: a checked [`RopeConfig`] that builds the cos and sin tables of
//! `candle_nn::rotary_emb::{rope, rope_i, rope_thd}`.
//!
//! A rotary table is a sinusoidal table with the rope type's frequencies: `cos[p, i] =
//! a cos(p w_i)`, `sin[p, i] = a sin(p w_i)` (`a` the attention factor, 1 for most types), so it
//! is built by the same exact generators as the sinusoidal tables.
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::{Rope, RopeConfig};
//!
//! let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
//! let (cos, sin) = rope.range(100_000, 16, DType::BF16, &Device::Cpu)?;
//! assert_eq!((cos.dims(), sin.dims()), (&[16, 64][..], &[16, 64][..]));
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use candle_core::{DType, Device, Tensor, D};

use super::at::{At, Place};
use super::config::RopeConfig;
use super::query_scale::QueryScale;
use super::types::{invalid, positive, Context, LongropePolicy};
use crate::describe::freq::Plan;
use crate::describe::positions::{self, Request, ToPositions};
use crate::generate::{Generator, TableBackend};
use crate::{Error, Result, MAX_WIDTH};

/// A checked [`RopeConfig`], ready to build cos/sin tables.
#[derive(Clone, Debug)]
pub struct Rope {
    config: RopeConfig,
    backend: TableBackend,
    longrope_policy: LongropePolicy,
    /// The generator of every sequence up to `fixed_up_to` positions.
    fixed: Arc<Generator>,
    fixed_up_to: Option<usize>,
    /// The generator last made for a sequence past `fixed_up_to`, with the length whose
    /// frequencies it has, kept for the next sequence that takes them (longrope's long factors
    /// serve every length past the original context, dynamic NTK's every layer of a step): a
    /// generator computes its frequencies and offset factors, and sends them to a device, once.
    grown: Arc<Mutex<Grown>>,
}

/// A generator made for a sequence past the fixed lengths, with the length whose frequencies it
/// has.
type Grown = Option<(usize, Arc<Generator>)>;

impl Rope {
    /// Checks `config`: head and rotary widths, `rope_theta`, and the rope type's parameters.
    pub fn new(config: RopeConfig) -> Result<Self> {
        positive("rope_theta", config.rope_theta)?;
        let p = config.partial_rotary_factor;
        if !(p > 0.0 && p <= 1.0) {
            return Err(invalid("partial_rotary_factor", "in (0, 1]", p));
        }
        if config.head_dim > MAX_WIDTH {
            return Err(invalid(
                "head_dim",
                "at most 16777216 (MAX_WIDTH)",
                config.head_dim as f64,
            ));
        }
        let dim = config.rotary_dim();
        if dim < 2 || dim % 2 == 1 {
            return Err(invalid(
                "head_dim * partial_rotary_factor (the rotary dim)",
                "even and at least 2",
                dim as f64,
            ));
        }
        if let Some(section) = &config.mrope_section {
            let sum = section
                .iter()
                .try_fold(0usize, |sum, &n| sum.checked_add(n));
            if section.len() != 3 || sum != Some(dim / 2) {
                return Err(Error::Config {
                    field: "mrope_section".into(),
                    message: format!(
                        "{section:?} must be three counts (t, h, w) adding up to the {} \
                         frequencies of a rotary dim of {dim}",
                        dim / 2
                    ),
                });
            }
        }
        if let Some(scale) = &config.query_scale {
            scale.check()?;
        }
        Self::checked(config, TableBackend::Auto, LongropePolicy::default())
    }

    fn checked(config: RopeConfig, backend: TableBackend, policy: LongropePolicy) -> Result<Self> {
        let ctx = context(&config, policy, 0);
        let formula = config.rope_type.formula();
        formula.check(&ctx)?;
        let fixed_up_to = formula.fixed_up_to(&ctx);
        let fixed = Arc::new(Generator::new(plan(&config, policy, 0)?, backend));
        Ok(Self {
            config,
            backend,
            longrope_policy: policy,
            fixed,
            fixed_up_to,
            grown: Arc::default(),
        })
    }

    /// The same rope with another rule for when longrope uses its long factors (see
    /// [`LongropePolicy`]; transformers' by default). Only longrope reads it.
    pub fn with_longrope_policy(self, policy: LongropePolicy) -> Result<Self> {
        Self::checked(self.config, self.backend, policy)
    }

    /// The rule for when longrope uses its long factors.
    pub fn longrope_policy(&self) -> LongropePolicy {
        self.longrope_policy
    }

    /// The same rope built by another generator.
    pub fn with_backend(mut self, backend: TableBackend) -> Self {
        let plan = self.fixed.plan().clone();
        self.fixed = Arc::new(Generator::new(plan, backend));
        self.backend = backend;
        self.grown = Arc::default();
        self
    }

    /// Whether `device` gets the kernels for `rows` rows (a shift's turns are computed there).
    pub(super) fn uses_kernels(&self, device: &Device, rows: usize) -> Result<bool> {
        self.fixed.uses_kernels(device, rows)
    }

    /// The config.
    pub fn config(&self) -> &RopeConfig {
        &self.config
    }

    /// The generator in use.
    pub fn backend(&self) -> TableBackend {
        self.backend
    }

    /// Columns of each table: `rotary_dim / 2`.
    pub fn half_dim(&self) -> usize {
        self.config.rotary_dim() / 2
    }

    /// The longest sequence whose tables are those of any shorter one, `None` when the
    /// frequencies never depend on the length (all rope types but dynamic NTK).
    pub fn fixed_up_to(&self) -> Option<usize> {
        self.fixed_up_to
    }

    /// For a rope type whose frequencies follow a length kept across calls, that length before
    /// any call: dynamic NTK's `max_position_embeddings` (transformers' module keeps the longest
    /// sequence seen). `None` for the other types, whose tables depend on each call alone.
    /// A caller keeping that state passes its length with the positions
    /// ([`At::with_tracked_len`]).
    ///
    /// ```
    /// use candle_pe_core::{Dynamic, Rope, RopeConfig, RopeType};
    ///
    /// let config = RopeConfig {
    ///     max_position_embeddings: Some(4096),
    ///     ..RopeConfig::new(64, 1e4).with_rope_type(RopeType::Dynamic(Dynamic { factor: 2.0 }))
    /// };
    /// let rope = Rope::new(config)?;
    /// assert_eq!(rope.tracked_len(), Some(4096));
    /// assert_eq!(rope.next_tracked_len(4096, 6000), 6000); // grows
    /// assert_eq!(rope.next_tracked_len(6000, 5000), 6000); // keeps the longest
    /// assert_eq!(Rope::new(RopeConfig::new(64, 1e4))?.tracked_len(), None);
    /// # Ok::<(), candle_pe_core::Error>(())
    /// ```
    pub fn tracked_len(&self) -> Option<usize> {
        let ctx = context(&self.config, self.longrope_policy, 0);
        self.config.rope_type.formula().tracked_len(&ctx)
    }

    /// The tracked length (see [`tracked_len`](Self::tracked_len)) after a call reaching `reach`
    /// positions (`max(position) + 1`), when it was `tracked` before: the length whose
    /// frequencies that call uses. `reach` for the types that track none.
    pub fn next_tracked_len(&self, tracked: usize, reach: usize) -> usize {
        let ctx = context(&self.config, self.longrope_policy, 0);
        self.config
            .rope_type
            .formula()
            .next_tracked_len(&ctx, tracked, reach)
    }

    /// Whether the tables depend on the [`LongropePolicy`] (set with
    /// [`with_longrope_policy`](Self::with_longrope_policy)).
    pub fn reads_longrope_policy(&self) -> bool {
        self.config.rope_type.formula().reads_longrope_policy()
    }

    /// The attention factor the tables include (YaRN's and longrope's, as HF's tables do); 1
    /// for most types.
    pub fn attention_scaling(&self) -> f64 {
        self.fixed.plan().amplitude()
    }

    /// The factor on the queries at each position after the rotation (query temperature:
    /// Ministral 3's `llama_4_scaling_beta`), if the config gives one; its tensors are
    /// [`QueryScale::range`] and [`QueryScale::at`].
    pub fn query_scale(&self) -> Option<&QueryScale> {
        self.config.query_scale.as_ref()
    }

    /// The factor the model multiplies its attention softmax scale (`head_dim^-0.5`) by, from the
    /// rope config: DeepSeek-V3's `mscale(factor, mscale_all_dim)^2` for YaRN with
    /// `mscale_all_dim`, 1 otherwise. It is not in the tables: the attention applies it.
    ///
    /// ```
    /// use candle_pe_core::{Rope, RopeConfig, RopeType, Yarn};
    ///
    /// let yarn = Yarn { mscale: Some(1.0), mscale_all_dim: Some(1.0), ..Yarn::new(40.0, 4096) };
    /// let rope = Rope::new(RopeConfig::new(64, 1e4).with_rope_type(RopeType::Yarn(yarn)))?;
    /// let m = 0.1 * 40f64.ln() + 1.0;
    /// assert_eq!(rope.softmax_scale(), m * m);
    /// assert_eq!(rope.attention_scaling(), 1.0); // mscale / mscale_all_dim
    /// # Ok::<(), candle_pe_core::Error>(())
    /// ```
    pub fn softmax_scale(&self) -> f64 {
        self.config.rope_type.formula().softmax_scale()
    }

    /// The angular frequencies `w_i` for a sequence of `seq_len` positions, rounded to f64 (the
    /// tables use them to double-double precision).
    pub fn inv_freq(&self, seq_len: usize) -> Vec<f64> {
        let ctx = context(&self.config, self.longrope_policy, seq_len);
        let w = self.config.rope_type.formula().frequencies(&ctx);
        w.into_iter().map(|w| w.to_f64()).collect()
    }

    /// `(cos, sin)` for positions `offset .. offset + len`, each `(len, rotary_dim / 2)` and
    /// contiguous, as `candle_nn::rotary_emb::rope` takes them. The frequencies are those of a
    /// sequence of `offset + len` positions.
    pub fn range(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        self.build(positions::range(offset, len)?, dtype, device)
    }

    /// `(cos, sin)` at per-token or M-RoPE positions ([`At`]; a `&Tensor` or
    /// `&`[`Positions`](crate::Positions) converts to per-token positions), with the
    /// frequencies of a sequence reaching the largest position, or of the length the positions
    /// carry ([`At::with_tracked_len`]: what a stateful caller needs when the frequencies in use
    /// are those of an earlier, longer sequence; transformers' dynamic NTK keeps the longest
    /// length seen, see [`Dynamic::next_tracked_len`](super::Dynamic::next_tracked_len)).
    ///
    /// Per-token positions of any shape give tables shaped `positions.dims() + [rotary_dim /
    /// 2]`. M-RoPE's positions ([`At::mrope`]: Qwen2-VL, Qwen2.5-VL, Qwen3-VL) are shaped
    /// `(3, seq)` or `(3, batch, seq)` (rows: temporal, height, width) and give tables shaped
    /// as the positions without their first dim, plus `[rotary_dim / 2]`: frequency slot `k`
    /// takes its angle from the row `mrope_section` gives it, in contiguous blocks (`k` in the
    /// `s`-th section takes row `s`), or alternating
    /// ([`MropeSlots::Alternating`](crate::MropeSlots): row 1 if `k % 3 == 1` and
    /// `k < 3 * section[1]`, row 2 if `k % 3 == 2` and `k < 3 * section[2]`, row 0
    /// otherwise). Each value is the one per-token positions give its row's position, so three
    /// equal rows give the 1-D tables bit for bit. An offset is refused: consecutive positions
    /// are [`range`](Self::range).
    ///
    /// ```
    /// use candle_core::{DType, Device, Tensor};
    /// use candle_pe_core::{At, Rope, RopeConfig};
    ///
    /// let config = RopeConfig {
    ///     mrope_section: Some(vec![16, 24, 24]),
    ///     ..RopeConfig::new(128, 1e6)
    /// };
    /// let rope = Rope::new(config)?;
    /// let ids = Tensor::new(&[[0i64, 1, 2], [0, 5, 5], [0, 7, 8]], &Device::Cpu)?;
    /// let (cos, _) = rope.at(&ids, DType::F32)?; // per-token positions
    /// assert_eq!(cos.dims(), &[3, 3, 64]);
    /// let (cos, sin) = rope.at(At::mrope(&ids), DType::F32)?;
    /// assert_eq!(cos.dims(), &[3, 64]);
    /// # Ok::<(), candle_pe_core::Error>(())
    /// ```
    pub fn at<'a>(&self, at: impl Into<At<'a>>, dtype: DType) -> Result<(Tensor, Tensor)> {
        let at = at.into();
        let positions = at.explicit()?;
        if let Place::Mrope(_) = at.place() {
            return self.at_mrope(positions, at.tracked_len(), dtype);
        }
        let positions = positions.to_positions()?;
        let request = positions::ids(&positions)?;
        let len = at.tracked_len().unwrap_or(request.end);
        self.build_for(request, len, dtype, positions.device())
    }

    /// M-RoPE's tables at `(3, ...)` positions, with the frequencies of a sequence of `len`
    /// positions, or of one reaching the largest position.
    fn at_mrope(
        &self,
        positions: &dyn ToPositions,
        len: Option<usize>,
        dtype: DType,
    ) -> Result<(Tensor, Tensor)> {
        let section = self.mrope_section("M-RoPE tables from (3, ...) positions")?;
        check_mrope_dims("positions", positions.dims())?;
        let ids = positions.to_positions()?;
        let h = self.half_dim();
        // The frequencies are those of the whole call: one sequence reaching the largest id.
        let end = len.unwrap_or(ids.end());
        let mut cos = Vec::with_capacity(3);
        let mut sin = Vec::with_capacity(3);
        for axis in 0..3 {
            let request = positions::ids(&ids.row(axis)?)?;
            let (c, s) = self.build_for(request, end, dtype, ids.device())?;
            cos.push(c);
            sin.push(s);
        }
        let columns: Vec<u32> = (0..h)
            .map(|k| {
                (mrope_axis(section, self.config.mrope_slots.is_alternating(), k) * h + k) as u32
            })
            .collect();
        let columns = Tensor::new(columns.as_slice(), ids.device())?;
        let gather = |parts: Vec<Tensor>| -> Result<Tensor> {
            let all = Tensor::cat(&parts, D::Minus1)?;
            let last = all.rank() - 1;
            Ok(all.index_select(&columns, last)?.contiguous()?)
        };
        Ok((gather(cos)?, gather(sin)?))
    }

    /// The config's `mrope_section`, which M-RoPE's tables (`needed_by`) need.
    pub(super) fn mrope_section(&self, needed_by: &'static str) -> Result<&[usize]> {
        self.config
            .mrope_section
            .as_deref()
            .ok_or(Error::MissingParameter {
                name: "mrope_section",
                needed_by,
            })
    }

    /// The generator of every sequence's tables when the frequencies do not follow the length
    /// (all rope types but dynamic NTK): what [`AxesRope`](super::AxesRope)'s axes share.
    pub(crate) fn generator(&self) -> Arc<Generator> {
        Arc::clone(&self.fixed)
    }

    /// The plan (frequencies and attention factor) of a sequence of `len` positions.
    pub(super) fn plan_for(&self, len: usize) -> Result<Plan> {
        Ok(self.generator_for(len)?.plan().clone())
    }

    /// Where the rope type gives every sequence longer than the fixed ones the same frequencies
    /// (longrope's long factors), the shortest such length.
    pub(crate) fn long_spectrum(&self) -> Option<usize> {
        let one = self.config.rope_type.formula().one_spectrum_past_fixed();
        // (No sequence is longer than usize::MAX.)
        self.fixed_up_to
            .filter(|_| one)
            .and_then(|limit| limit.checked_add(1))
    }

    /// `(cos, sin)` for positions `offset .. offset + len` with the frequencies of a sequence of
    /// `seq_len` positions (the rows a [`RopeCache`](crate::RopeCache) builds).
    pub(super) fn range_with_frequencies_of(
        &self,
        offset: usize,
        len: usize,
        seq_len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        self.build_for(positions::range(offset, len)?, seq_len, dtype, device)
    }

    /// The generator of a sequence of `len` positions: the fixed one, shared, where the
    /// frequencies do not follow the length; past it, the one last made when it has the
    /// frequencies of `len` (those of its own length, or of the long spectrum), else a new one.
    pub(super) fn generator_for(&self, len: usize) -> Result<Arc<Generator>> {
        match self.fixed_up_to {
            Some(limit) if len > limit => {
                let len = self.long_spectrum().unwrap_or(len);
                let mut grown = self.grown.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some((_, kept)) = grown.as_ref().filter(|(kept, _)| *kept == len) {
                    return Ok(Arc::clone(kept));
                }
                let plan = plan(&self.config, self.longrope_policy, len)?;
                let made = Arc::new(Generator::new(plan, self.backend));
                *grown = Some((len, Arc::clone(&made)));
                Ok(made)
            }
            _ => Ok(Arc::clone(&self.fixed)),
        }
    }

    fn build(&self, request: Request, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
        let end = request.end;
        self.build_for(request, end, dtype, device)
    }

    /// The tables of `request` with the frequencies of a sequence of `end` positions.
    fn build_for(
        &self,
        request: Request,
        end: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let h = self.half_dim();
        if request.n_rows() == 0 {
            // Fresh empty tables: a narrowed view of an empty one would point past its storage.
            crate::generate::check_dtype(dtype)?;
            let mut shape = request.lead.clone();
            shape.push(h);
            let empty = Tensor::zeros(shape, dtype, device)?;
            return Ok((empty.clone(), empty));
        }
        self.generator_for(end)?.halves(&request, dtype, device)
    }
}

/// Fails unless `dims` (of the positions named `name`) are M-RoPE's `(3, seq)` or
/// `(3, batch, seq)`.
pub(super) fn check_mrope_dims(name: &'static str, dims: &[usize]) -> Result<()> {
    if !(dims.len() == 2 || dims.len() == 3) || dims[0] != 3 {
        return Err(Error::ShapeMismatch {
            name,
            expected: "(3, seq) or (3, batch, seq) (M-RoPE)".into(),
            shape: dims.to_vec(),
        });
    }
    Ok(())
}

/// The row of M-RoPE's position ids that frequency slot `k` takes its angle from.
pub(super) fn mrope_axis(section: &[usize], interleaved: bool, k: usize) -> usize {
    if interleaved {
        match k % 3 {
            1 if k < 3 * section[1] => 1,
            2 if k < 3 * section[2] => 2,
            _ => 0,
        }
    } else {
        let mut start = 0;
        for (s, &n) in section.iter().enumerate() {
            if k < start + n {
                return s % 3;
            }
            start += n;
        }
        0
    }
}

fn context(config: &RopeConfig, longrope_policy: LongropePolicy, seq_len: usize) -> Context {
    Context {
        rope_theta: config.rope_theta,
        rotary_dim: config.rotary_dim(),
        max_position_embeddings: config.max_position_embeddings,
        seq_len,
        partial_rotary_factor: config.partial_rotary_factor,
        longrope_policy,
    }
}

/// The plan (frequencies and attention factor) of `config`'s tables for a sequence of `seq_len`
/// positions.
fn plan(config: &RopeConfig, policy: LongropePolicy, seq_len: usize) -> Result<Plan> {
    let ctx = context(config, policy, seq_len);
    let formula = config.rope_type.formula();
    Plan::from_frequencies(&formula.frequencies(&ctx), formula.attention_factor(&ctx))
}
