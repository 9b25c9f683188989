//! The kernel generator: the CPU generator's arithmetic in CUDA kernels (`cuda/tables.cu`),
//! with its bits, in two launches and with no table in f64 and no cast.
//!
//! - **Factors**: the anchor rows (`sin` and `cos` of `a * w` for every anchor `a` a request
//!   touches, times the amplitude) and the offset rows (`j * w` for `j < 64`), each value the
//!   exact angle reduced and evaluated in f64 by `exact.cuh` (the CPU's `exact/trig.rs`,
//!   operation for operation), rounded to the work type: f32 for f32 output, f64 otherwise.
//! - **Rows**: every (row, pair) of the output, its anchor's factors and its offset's combined
//!   by angle addition in the work type and rounded once to the output dtype (f16 and bf16 by
//!   `exact/round.rs`'s integer rounding), written straight to its columns. A rotary table's
//!   halves are two planes of one output. A range's rows are written an anchor span at a time
//!   (a thread per anchor and pair, which loads the anchor's factors once); rows at given
//!   positions, a thread per row and pair.
//!
//! On a CUDA device (the `cuda` feature) that is what [`TableBackend::Auto`] runs. On the CPU
//! the same functions of `tables.cuh` run compiled for the host (the `host-kernels` feature,
//! which the tests turn on) with [`TableBackend::Kernel`]: `cargo test` holds that build to the
//! CPU generator bit for bit, so a session without a GPU can prove a kernel's arithmetic, and a
//! GPU run only confirms the device's bits.
//!
//! [`TableBackend::Auto`]: super::TableBackend::Auto
//! [`TableBackend::Kernel`]: super::TableBackend::Kernel

use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Device, Layout, Shape, Tensor};

use super::cpu::ANCHOR_SPAN;
use crate::cuda::{FactorArgs, RopeArgs, RowArgs, TurnArgs};
use crate::describe::freq::{Columns, Plan};
use crate::describe::positions::{Request, Rows};
use crate::{ColumnLayout, Result};

/// The table for `request`, shaped `(rows, width)`, on the device of the plan's frequencies
/// `w` ([`frequencies`]).
pub(crate) fn table(plan: &Plan, w: &Tensor, request: &Request, dtype: DType) -> Result<Tensor> {
    let cols = plan.columns();
    let out = Launch::new(plan, w, request, dtype)?.rows(placement(cols), 1)?;
    Ok(out.reshape((request.n_rows(), cols.width))?)
}

/// The halves `(cos, sin)` of a cos|sin plan's table, each `(rows, width / 2)`: two planes of
/// one output, both written by the same threads.
pub(crate) fn halves(
    plan: &Plan,
    w: &Tensor,
    request: &Request,
    dtype: DType,
) -> Result<(Tensor, Tensor)> {
    let (rows, h) = (request.n_rows(), plan.columns().width / 2);
    let place = Placement {
        stride: h as u32,
        sin: (0, 1),
        cos: (0, 1),
        n_cos: h as u32,
        zero_col: u32::MAX,
    };
    let out = Launch::new(plan, w, request, dtype)?.rows(place, 2)?;
    let out = out.reshape((2, rows, h))?;
    Ok((out.get(0)?, out.get(1)?))
}

/// Whether the kernels take `rows` rows: the `u32` counts of their arguments hold them (a
/// width always fits: it is at most [`MAX_WIDTH`](crate::MAX_WIDTH)).
pub(crate) fn fits(rows: usize) -> bool {
    rows < u32::MAX as usize
}

/// Where a pair's sine and cosine go in a row: `(first column, step)` each.
#[derive(Clone, Copy)]
struct Placement {
    stride: u32,
    sin: (u32, u32),
    cos: (u32, u32),
    n_cos: u32,
    zero_col: u32,
}

fn placement(cols: &Columns) -> Placement {
    let (n_sin, n_cos) = (cols.n_sin as u32, cols.n_cos as u32);
    let (sin, cos) = match cols.layout {
        ColumnLayout::Interleaved => ((0, 2), (1, 2)),
        ColumnLayout::SinCos => ((0, 1), (n_sin, 1)),
        ColumnLayout::CosSin => ((n_cos, 1), (0, 1)),
    };
    Placement {
        stride: cols.width as u32,
        sin,
        cos,
        n_cos,
        zero_col: if cols.zero_last {
            cols.width as u32 - 1
        } else {
            u32::MAX
        },
    }
}

/// One request's inputs on the device: the frequencies, the positions, the factor rows.
struct Launch {
    dtype: DType,
    rows: usize,
    /// The positions of a request of values, else `None` (a range: `start + r`).
    values: Option<Tensor>,
    start: f64,
    base: f64,
    n: usize,
    /// The anchor rows held, and the tensors of the anchor and offset factors.
    count: usize,
    anchors: Tensor,
    offsets: Tensor,
    zero_at: Option<u32>,
}

impl Launch {
    fn new(plan: &Plan, w: &Tensor, request: &Request, dtype: DType) -> Result<Self> {
        let work = super::work_dtype(dtype);
        let n = plan.frequencies().len();
        let rows = request.n_rows();
        let (values, start, base, count) = anchored(request)?;
        let factors = |args: FactorArgs| {
            let second = values
                .as_ref()
                .filter(|_| args.has_values == 1)
                .unwrap_or(w);
            w.apply_op2_no_bwd(second, &Factors { args, work })
        };
        let anchors = factors(FactorArgs {
            base,
            step: ANCHOR_SPAN as f64,
            amplitude: plan.amplitude(),
            n: n as u32,
            count: count as u32,
            anchors: 1,
            has_values: u32::from(values.is_some()),
        })?;
        let offsets = factors(FactorArgs {
            base: 0.0,
            step: 1.0,
            amplitude: 1.0,
            n: n as u32,
            count: ANCHOR_SPAN as u32,
            anchors: 0,
            has_values: 0,
        })?;
        Ok(Self {
            dtype,
            rows,
            values,
            start,
            base,
            n,
            count,
            anchors,
            offsets,
            zero_at: request.zero_at,
        })
    }

    /// The kernels' row arguments for outputs placed by `place`.
    fn args(&self, place: Placement, sin_plane: u64) -> RowArgs {
        RowArgs {
            start: self.start,
            base: self.base,
            zero_at: self.zero_at.map_or(0.0, f64::from),
            sin_plane,
            scale: 0.0,
            has_zero: u32::from(self.zero_at.is_some()),
            has_values: u32::from(self.values.is_some()),
            n: self.n as u32,
            n_cos: place.n_cos,
            anchors: self.count as u32,
            stride: place.stride,
            sin0: place.sin.0,
            sin_step: place.sin.1,
            cos0: place.cos.0,
            cos_step: place.cos.1,
            zero_col: place.zero_col,
            period: 0,
        }
    }

    /// `planes` planes of `rows` rows of `place.stride` values: the table, or its halves.
    fn rows(&self, place: Placement, planes: usize) -> Result<Tensor> {
        let plane = self.rows as u64 * u64::from(place.stride);
        let op = RowsOp {
            args: self.args(place, if planes == 2 { plane } else { 0 }),
            rows: self.rows as u64,
            len: planes * plane as usize,
            dtype: self.dtype,
        };
        let values = self.values.as_ref().unwrap_or(&self.anchors);
        let op = OutputOp::Rows(op);
        Ok(self.anchors.apply_op3_no_bwd(&self.offsets, values, &op)?)
    }
}

/// Where the tokens of an embedding block or a rotation sit.
#[derive(Clone)]
pub(crate) enum TokenRows {
    /// Every sequence of `period` tokens at `start ..` (for a shift, period 1: every token
    /// moved by `start`, which may be negative).
    Repeat { start: i64, period: usize },
    /// One position per token: a flat f64 tensor on the tokens' device.
    Values(Tensor),
}

/// `scale * weights[tokens[r]] + PE(position of r)` for the flat `tokens` (any integer dtype,
/// on the weights' device), `(tokens, width)` in the dtype of `weights`: one launch, each
/// weight row read once, each output written once (the CPU's fused block, with its bits).
pub(crate) fn embed(
    plan: &Plan,
    w: &Tensor,
    weights: &Tensor,
    tokens: &Tensor,
    rows: TokenRows,
    zero_at: Option<u32>,
    scale: f64,
) -> Result<Tensor> {
    let device = weights.device();
    let (n_tokens, width) = (tokens.elem_count(), plan.columns().width);
    if n_tokens == 0 {
        return Ok(Tensor::zeros((0, width), weights.dtype(), device)?);
    }
    let tokens = tokens.to_dtype(DType::F64)?;
    let (request, period, info) = match rows {
        TokenRows::Repeat { start, period } => {
            // An embedding's offset (checked, never negative).
            let range = crate::describe::positions::range(start as usize, period)?;
            (range, period as u32, tokens)
        }
        TokenRows::Values(values) => {
            let info = Tensor::cat(&[&tokens, &values], 0)?;
            let request = Request {
                rows: Rows::Values(values),
                lead: vec![n_tokens],
                zero_at,
                end: 0,
                largest: 0.0,
            };
            (request, 0, info)
        }
    };
    let mut launch = Launch::new(plan, w, &request, weights.dtype())?;
    launch.rows = n_tokens;
    let mut args = launch.args(placement(plan.columns()), 0);
    (args.scale, args.period) = (scale, period);
    let split = launch.anchors.elem_count();
    let factors = Tensor::cat(&[&launch.anchors, &launch.offsets], 0)?;
    let op = EmbedOp {
        args,
        rows: n_tokens as u64,
        split,
    };
    let op = OutputOp::Embed(op);
    let out = factors.apply_op3_no_bwd(&weights.contiguous()?, &info.contiguous()?, &op)?;
    Ok(out.reshape((n_tokens, width))?)
}

/// A shift's turn rows (`Generator::turns`) by `pe_turns`: `(cos, sin)`, each
/// `(keys.len(), axis.len())` in `dtype` on `device`, from the distinct rows' `keys` (generate/
/// turn.rs `unique_rows`) and each slot's position axis.
pub(crate) fn turns(
    (old, new): (&Plan, &Plan),
    keys: &[[i64; 6]],
    same: bool,
    axis: &[u32],
    dtype: DType,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let (rows, h) = (keys.len(), axis.len());
    let split = 2 * old.frequencies().len();
    let w = Tensor::cat(
        &[
            frequencies(old, None, device)?,
            frequencies(new, None, device)?,
        ],
        0,
    )?;
    let keys: Vec<f64> = keys.iter().flatten().map(|&k| k as f64).collect();
    let keys = Tensor::from_vec(keys, rows * 6, device)?;
    let axis = Tensor::new(axis, device)?;
    let args = TurnArgs {
        ratio: new.amplitude() / old.amplitude(),
        h: h as u32,
        same: u32::from(same),
        rows: rows as u32,
        _pad: 0,
    };
    let op = OutputOp::Turns(TurnsOp { args, split, dtype });
    let out = w
        .apply_op3_no_bwd(&keys, &axis, &op)?
        .reshape((2, rows, h))?;
    Ok((out.get(0)?, out.get(1)?))
}

/// Rope without tables (`rope.cu`): `x`, `(batch, heads, seq, d)` or `(tokens, heads, d)`, its
/// first `2n` features of each head turned at the positions `rows` gives its tokens (`(batch,
/// seq)` or `(tokens,)` in order), with `plan`'s frequencies (`n` of them, `w` on x's device)
/// and amplitude; with M-RoPE (`w` then holds each pair's position row after the frequencies,
/// [`frequencies`]), `rows` holds three rows of positions. `k`, beside x (q) with the same
/// dims but for its heads and x's dtype, turns in the same launch by the same cos and sin,
/// computed once. Each token's cos and sin are computed where they are used, with the rotary
/// tables' bits, and the result has the bits of the CPU's one-pass rotation by those tables:
/// one launch, no table. With `turn`, `rows` holds distances (`to - from`, any sign), not
/// positions, and each pair turns by the cos and sin of the shift tables (the exact angle of
/// the distance, rounded once to the rotation's float), a shift in one spectrum. The caller
/// has checked the positions against x and `fits` for the tokens.
pub(crate) fn rope(
    plan: &Plan,
    w: &Tensor,
    (x, k): (&Tensor, Option<&Tensor>),
    rows: TokenRows,
    mrope: bool,
    interleaved: bool,
    turn: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    let (tokens, heads, seq, d) = rope_layout(x)?;
    let heads_k = match k {
        Some(k) if turns_with(x, k) => k.dims()[1],
        Some(k) => {
            return Err(crate::Error::ShapeMismatch {
                name: "k",
                expected: format!("{:?} but for its heads, in {:?}", x.dims(), x.dtype()),
                shape: k.dims().to_vec(),
            })
        }
        None => 0,
    };
    let n = plan.frequencies().len();
    if tokens == 0 {
        return Ok((x.clone(), k.cloned()));
    }
    let (start, period, values) = match rows {
        TokenRows::Repeat { start, period } => (start as f64, period, None),
        TokenRows::Values(values) => (0.0, 1, Some(values.contiguous()?)),
    };
    let args = RopeArgs {
        start,
        amplitude: plan.amplitude(),
        n: n as u32,
        d: d as u32,
        heads: heads as u32,
        seq: seq as u32,
        period: period as u32,
        has_values: u32::from(values.is_some()),
        interleaved: u32::from(interleaved),
        axes: u32::from(mrope),
        heads_k: heads_k as u32,
        turn: u32::from(turn),
        groups: rope_groups(tokens, d - n, heads + heads_k),
    };
    let op = OutputOp::Rope(RopeOp {
        args,
        tokens: tokens as u64,
        k: k.map(Tensor::contiguous).transpose()?,
    });
    let values = values.as_ref().unwrap_or(w);
    let out = x.contiguous()?.apply_op3_no_bwd(w, values, &op)?;
    let len = x.elem_count();
    let turned = out.narrow(0, 0, len)?.reshape(x.dims())?;
    let k = match k {
        Some(k) => Some(out.narrow(0, len, k.elem_count())?.reshape(k.dims())?),
        None => None,
    };
    Ok((turned, k))
}

/// The threads a rope launch aims at: about one wave of a large GPU's resident threads (an
/// H100 holds 132 x 2,048).
const ROPE_THREADS: usize = 1 << 18;

/// Threads per (token, slot) of a rope launch over `heads` heads (q's and k's): enough to
/// reach [`ROPE_THREADS`] in all, each turning every `groups`-th head. At a decode step (one
/// token, a few slots) that is one thread per head, so that no thread turns 40 heads one after
/// the other while the rest of the GPU waits; at a long prefill it is one, so that each token's
/// cos and sin are computed once. The bits are the same for any count.
pub(crate) fn rope_groups(tokens: usize, slots: usize, heads: usize) -> u32 {
    let per_group = tokens.saturating_mul(slots).max(1);
    ROPE_THREADS.div_ceil(per_group).clamp(1, heads.max(1)) as u32
}

/// Whether `k` turns with `x` in one launch of [`rope`]: the same dims but for the heads (the
/// second), and x's dtype.
pub(crate) fn turns_with(x: &Tensor, k: &Tensor) -> bool {
    let (a, b) = (x.dims(), k.dims());
    k.dtype() == x.dtype() && a.len() == b.len() && a.len() >= 2 && a[0] == b[0] && a[2..] == b[2..]
}

/// `(tokens, heads, seq, d)` of a rotation's input, `(batch, heads, seq, d)` or `(tokens,
/// heads, d)` (seq 1).
fn rope_layout(x: &Tensor) -> Result<(usize, usize, usize, usize)> {
    match *x.dims() {
        [batch, heads, seq, d] => Ok((batch * seq, heads, seq, d)),
        [tokens, heads, d] => Ok((tokens, heads, 1, d)),
        _ => Err(crate::Error::ShapeMismatch {
            name: "x",
            expected: "(batch, heads, seq, d) or (tokens, heads, d)".into(),
            shape: x.dims().to_vec(),
        }),
    }
}

/// The frequencies as `(hi, lo)` pairs on `device`, what the kernels read; for the rope
/// kernel at M-RoPE positions, then each pair's position row (`axes`, as f64: small integers,
/// exact).
pub(crate) fn frequencies(plan: &Plan, axes: Option<&[u32]>, device: &Device) -> Result<Tensor> {
    let mut w: Vec<f64> = plan
        .frequencies()
        .iter()
        .flat_map(|w| {
            let (hi, lo) = w.parts();
            [hi, lo]
        })
        .collect();
    w.extend(axes.unwrap_or_default().iter().map(|&a| f64::from(a)));
    let len = w.len();
    Ok(Tensor::from_vec(w, len, device)?)
}

/// Where a request's rows take their anchors: `(positions, start, first anchor, anchors)`. A
/// range's rows `start + r` share the anchors from its first on; rows at positions (`Some`)
/// have one anchor row each.
fn anchored(request: &Request) -> Result<(Option<Tensor>, f64, f64, usize)> {
    let span = ANCHOR_SPAN as f64;
    Ok(match &request.rows {
        Rows::Range { start, len } => {
            let first = (f64::from(*start) / span).floor() * span;
            let last = ((f64::from(*start) + (len - 1) as f64) / span).floor() * span;
            let count = ((last - first) / span) as usize + 1;
            (None, f64::from(*start), first, count)
        }
        Rows::Values(values) => (Some(values.contiguous()?), 0.0, 0.0, request.n_rows()),
    })
}

/// The factor rows: `(2 * count * n)` values of the work type, the sines then the cosines.
#[cfg_attr(not(any(feature = "cuda", feature = "host-kernels")), allow(dead_code))]
struct Factors {
    args: FactorArgs,
    work: DType,
}

/// The output rows, `len` values of `dtype`, from the anchors, the offsets and the positions.
#[cfg_attr(not(any(feature = "cuda", feature = "host-kernels")), allow(dead_code))]
struct RowsOp {
    args: RowArgs,
    rows: u64,
    len: usize,
    dtype: DType,
}

/// The threads of a `pe_rope` launch of `tokens` tokens (`rope.cuh`'s `pe_rope_threads`): one
/// per (token, group of heads, slot).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn rope_threads(r: &RopeArgs, tokens: u64) -> u64 {
    tokens * u64::from(r.groups) * u64::from(r.d - r.n)
}

/// The threads of a `pe_rows` or `pe_embed` launch of `rows` rows (`tables.cuh`'s
/// `pe_rows_threads`): one per (range, anchor, pair) of a range or a range repeated, whose rows
/// are written a span of one anchor at a time; one per (row, pair) otherwise.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn row_threads(t: &RowArgs, rows: u64) -> u64 {
    let items = if t.has_values == 0 && t.has_zero == 0 {
        let ranges = if t.period > 0 {
            rows / u64::from(t.period)
        } else {
            1
        };
        ranges * u64::from(t.anchors)
    } else {
        rows
    };
    items * u64::from(t.n.max(1))
}

impl CustomOp2 for Factors {
    fn name(&self) -> &'static str {
        "pe-factors"
    }

    fn cpu_fwd(
        &self,
        w: &CpuStorage,
        lw: &Layout,
        values: &CpuStorage,
        lv: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        #[cfg(feature = "host-kernels")]
        return host::factors(self, (w, lw), (values, lv));
        #[cfg(not(feature = "host-kernels"))]
        {
            let _ = (w, lw, values, lv);
            no_host_build(self.name())
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        w: &candle_core::CudaStorage,
        lw: &Layout,
        values: &candle_core::CudaStorage,
        lv: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        device::factors(self, (w, lw), (values, lv))
    }
}

/// The embedding block's rows, from the factor rows (anchors, then offsets, split at `split`),
/// the weights and the tokens (then the positions) as f64.
#[cfg_attr(not(any(feature = "cuda", feature = "host-kernels")), allow(dead_code))]
struct EmbedOp {
    args: RowArgs,
    rows: u64,
    split: usize,
}

/// A shift's turn rows, from the old then the new frequencies (split at `split`), the keys
/// and the slots' axes.
#[cfg_attr(not(any(feature = "cuda", feature = "host-kernels")), allow(dead_code))]
struct TurnsOp {
    args: TurnArgs,
    split: usize,
    dtype: DType,
}

/// Rope without tables: x turned, and `k` beside it, from the frequencies and the positions
/// (f64); the output holds x's values, then k's.
#[cfg_attr(not(any(feature = "cuda", feature = "host-kernels")), allow(dead_code))]
struct RopeOp {
    args: RopeArgs,
    tokens: u64,
    /// The second input (contiguous, on x's device), with `args.heads_k` heads.
    k: Option<Tensor>,
}

/// The kernels that write an output: a table's rows, the embedding block's, a shift's turns,
/// a rotation.
#[cfg_attr(not(any(feature = "cuda", feature = "host-kernels")), allow(dead_code))]
enum OutputOp {
    Rows(RowsOp),
    Embed(EmbedOp),
    Turns(TurnsOp),
    Rope(RopeOp),
}

impl CustomOp3 for OutputOp {
    fn name(&self) -> &'static str {
        match self {
            OutputOp::Rows(_) => "pe-rows",
            OutputOp::Embed(_) => "pe-embed",
            OutputOp::Turns(_) => "pe-turns",
            OutputOp::Rope(_) => "pe-rope",
        }
    }

    fn cpu_fwd(
        &self,
        a: &CpuStorage,
        la: &Layout,
        b: &CpuStorage,
        lb: &Layout,
        c: &CpuStorage,
        lc: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        #[cfg(feature = "host-kernels")]
        return match self {
            OutputOp::Rows(op) => host::rows(op, (a, la), (b, lb), (c, lc)),
            OutputOp::Embed(op) => host::embed(op, (a, la), (b, lb), (c, lc)),
            OutputOp::Turns(op) => host::turns(op, (a, la), (b, lb), (c, lc)),
            OutputOp::Rope(op) => host::rope(op, (a, la), (b, lb), (c, lc)),
        };
        #[cfg(not(feature = "host-kernels"))]
        {
            let _ = (a, la, b, lb, c, lc);
            no_host_build(self.name())
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        a: &candle_core::CudaStorage,
        la: &Layout,
        b: &candle_core::CudaStorage,
        lb: &Layout,
        c: &candle_core::CudaStorage,
        lc: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        match self {
            OutputOp::Rows(op) => device::rows(op, (a, la), (b, lb), (c, lc)),
            OutputOp::Embed(op) => device::embed(op, (a, la), (b, lb), (c, lc)),
            OutputOp::Turns(op) => device::turns(op, (a, la), (b, lb), (c, lc)),
            OutputOp::Rope(op) => device::rope(op, (a, la), (b, lb), (c, lc)),
        }
    }
}

/// What a kernel's CPU side answers without its host build (`TableBackend::Kernel` is refused
/// before that, so only a direct use of the op gets here).
#[cfg(not(feature = "host-kernels"))]
fn no_host_build(name: &str) -> candle_core::Result<(CpuStorage, Shape)> {
    candle_core::bail!("{name} on the CPU needs the host-kernels feature")
}

/// The host build's calls (`cuda/host.cpp`).
#[cfg(feature = "host-kernels")]
mod host {
    use candle_core::{bail, CpuStorage, DType, Layout, Result, Shape, Storage, Tensor};

    use super::{Factors, RowsOp};

    pub fn embed(
        op: &super::EmbedOp,
        factors: (&CpuStorage, &Layout),
        weights: (&CpuStorage, &Layout),
        info: (&CpuStorage, &Layout),
    ) -> Result<(CpuStorage, Shape)> {
        use crate::cuda::host::*;
        use half::{bf16, f16};
        let (t, rows) = (&op.args, op.rows);
        let info = slice::<f64>(info)?.as_ptr();
        let len = rows as usize * t.stride as usize;
        macro_rules! run {
            ($acc:ty, $elem:ty, $raw:ty, $nan:expr, $f:ident, $wrap:ident) => {{
                let f = slice::<$acc>(factors)?;
                let (a, o) = f.split_at(op.split);
                let w = slice::<$elem>(weights)?.as_ptr().cast::<$raw>();
                let out = both_ways("pe-embed", len, $nan, |backward, out| {
                    let p = out.as_mut_ptr().cast::<$raw>();
                    // SAFETY: the factor rows are those `embed` made for these arguments,
                    // `info` holds a token (checked below the vocabulary) and, with
                    // has_values, a position per row, and the function writes within the
                    // `len` values of `out`.
                    unsafe { $f(t, rows, a.as_ptr(), o.as_ptr(), info, w, p, backward) };
                })?;
                CpuStorage::$wrap(out)
            }};
        }
        let storage = match candle_core::backend::BackendStorage::dtype(weights.0) {
            DType::F32 => run!(f32, f32, f32, f32::NAN, pe_host_embed_f32, F32),
            DType::F64 => run!(f64, f64, f64, f64::NAN, pe_host_embed_f64, F64),
            DType::F16 => run!(f64, f16, u16, f16::NAN, pe_host_embed_f16, F16),
            DType::BF16 => run!(f64, bf16, u16, bf16::NAN, pe_host_embed_bf16, BF16),
            other => bail!("pe-embed: no kernel reads {other:?}"),
        };
        Ok((storage, Shape::from(len)))
    }

    pub fn turns(
        op: &super::TurnsOp,
        w: (&CpuStorage, &Layout),
        keys: (&CpuStorage, &Layout),
        axis: (&CpuStorage, &Layout),
    ) -> Result<(CpuStorage, Shape)> {
        use crate::cuda::host::*;
        use half::{bf16, f16};
        let t = &op.args;
        let (old, new) = slice::<f64>(w)?.split_at(op.split);
        let (keys, axis) = (slice::<f64>(keys)?.as_ptr(), slice::<u32>(axis)?.as_ptr());
        let (old, new) = (old.as_ptr(), new.as_ptr());
        let len = 2 * t.rows as usize * t.h as usize;
        macro_rules! run {
            ($raw:ty, $nan:expr, $f:ident, $wrap:ident) => {{
                let out = both_ways("pe-turns", len, $nan, |backward, out| {
                    let p = out.as_mut_ptr().cast::<$raw>();
                    // SAFETY: the frequencies hold `h` pairs each, the keys six values per
                    // row, the axes one per slot (each below 3), and the function writes
                    // within the `len` values of `out`.
                    unsafe { $f(t, old, new, keys, axis, p, backward) };
                })?;
                CpuStorage::$wrap(out)
            }};
        }
        let storage = match op.dtype {
            DType::F32 => run!(f32, f32::NAN, pe_host_turns_f32, F32),
            DType::F64 => run!(f64, f64::NAN, pe_host_turns_f64, F64),
            DType::F16 => run!(u16, f16::NAN, pe_host_turns_f16, F16),
            DType::BF16 => run!(u16, bf16::NAN, pe_host_turns_bf16, BF16),
            other => bail!("pe-turns: no kernel writes {other:?}"),
        };
        Ok((storage, Shape::from(len)))
    }

    pub fn rope(
        op: &super::RopeOp,
        x: (&CpuStorage, &Layout),
        w: (&CpuStorage, &Layout),
        values: (&CpuStorage, &Layout),
    ) -> Result<(CpuStorage, Shape)> {
        use crate::cuda::host::*;
        use half::{bf16, f16};
        let r = &op.args;
        let w = slice::<f64>(w)?;
        let values = slice::<f64>(values)?;
        let tokens = op.tokens as usize;
        let (rows, pairs) = if r.axes == 1 { (3, 3) } else { (1, 2) };
        if w.len() < pairs * r.n as usize || r.has_values == 1 && values.len() < rows * tokens {
            bail!("pe-rope: fewer frequencies or positions than the arguments name");
        }
        let second = op.k.as_ref().map(Tensor::storage_and_layout);
        let each = |heads: u32| tokens * heads as usize * r.d as usize;
        macro_rules! run {
            ($elem:ty, $raw:ty, $nan:expr, $f:ident, $wrap:ident) => {{
                let x = slice::<$elem>(x)?;
                let k = match &second {
                    Some((storage, layout)) => match &**storage {
                        Storage::Cpu(k) => slice::<$elem>((k, layout))?,
                        _ => bail!("pe-rope: k is not on x's device"),
                    },
                    None => &[],
                };
                if x.len() != each(r.heads) || k.len() != each(r.heads_k) {
                    bail!("pe-rope: q and k are not the sizes the arguments name");
                }
                let y = both_ways("pe-rope", x.len() + k.len(), $nan, |backward, y| {
                    // SAFETY: x and k are `tokens * heads * d` and `tokens * heads_k * d`
                    // contiguous values (checked above; `k` is read only with heads_k > 0),
                    // w holds n frequency pairs (and n axes, each below 3, with M-RoPE) and
                    // `values` a position per token (three rows with M-RoPE), checked above,
                    // and the function writes within the `x.len() + k.len()` values of `y`.
                    unsafe {
                        $f(
                            r,
                            op.tokens,
                            w.as_ptr(),
                            values.as_ptr(),
                            x.as_ptr().cast::<$raw>(),
                            k.as_ptr().cast::<$raw>(),
                            y.as_mut_ptr().cast::<$raw>(),
                            backward,
                        )
                    };
                })?;
                (CpuStorage::$wrap(y), x.len() + k.len())
            }};
        }
        let (storage, len) = match candle_core::backend::BackendStorage::dtype(x.0) {
            DType::F32 => run!(f32, f32, f32::NAN, pe_host_rope_f32, F32),
            DType::F64 => run!(f64, f64, f64::NAN, pe_host_rope_f64, F64),
            DType::F16 => run!(f16, u16, f16::NAN, pe_host_rope_f16, F16),
            DType::BF16 => run!(bf16, u16, bf16::NAN, pe_host_rope_bf16, BF16),
            other => bail!("pe-rope: no kernel turns {other:?}"),
        };
        Ok((storage, Shape::from(len)))
    }

    /// A host loop's values (`run(backward, out)`), run forward and then backward, each into
    /// `len` values that start as NaN, so that one no thread writes shows. A GPU runs a
    /// launch's threads in any order, so a kernel whose values depend on it (two threads
    /// writing one value differently, one reading what another writes) is refused here, in
    /// every test that runs it.
    fn both_ways<T: Bits>(
        name: &str,
        len: usize,
        nan: T,
        run: impl Fn(u32, &mut [T]),
    ) -> Result<Vec<T>> {
        let mut forward = vec![nan; len];
        run(0, &mut forward);
        let mut backward = vec![nan; len];
        run(1, &mut backward);
        let differs = forward
            .iter()
            .zip(&backward)
            .position(|(a, b)| a.bits() != b.bits());
        if let Some(i) = differs {
            let (a, b) = (forward[i].bits(), backward[i].bits());
            bail!(
                "{name}: value {i} of the host build depends on the order its threads run in \
                 ({a:#x} forward, {b:#x} backward)"
            );
        }
        Ok(forward)
    }

    /// A value's bits, to compare two runs' (NaN included).
    trait Bits: Copy {
        fn bits(self) -> u64;
    }

    macro_rules! bits {
        ($($t:ty),*) => {
            $(impl Bits for $t {
                fn bits(self) -> u64 {
                    self.to_bits().into()
                }
            })*
        };
    }
    bits!(f32, f64, half::f16, half::bf16);

    fn slice<'a, T: candle_core::WithDType>(
        (storage, layout): (&'a CpuStorage, &Layout),
    ) -> Result<&'a [T]> {
        match layout.contiguous_offsets() {
            Some((a, b)) => Ok(&storage.as_slice::<T>()?[a..b]),
            None => bail!("candle-pe kernel: the inputs must be contiguous"),
        }
    }

    pub fn factors(
        op: &Factors,
        w: (&CpuStorage, &Layout),
        values: (&CpuStorage, &Layout),
    ) -> Result<(CpuStorage, Shape)> {
        use crate::cuda::host::{pe_host_factors_f32, pe_host_factors_f64};
        let (w, values) = (slice::<f64>(w)?, slice::<f64>(values)?);
        let f = &op.args;
        let len = 2 * f.count as usize * f.n as usize;
        if f.has_values == 1 && values.len() < f.count as usize || w.len() < 2 * f.n as usize {
            bail!("pe-factors: fewer inputs than the arguments name");
        }
        let (w, values) = (w.as_ptr(), values.as_ptr());
        // SAFETY (both): the function reads 2n frequencies and `count` values (with
        // has_values), both checked above, and writes the `len` values of `out`.
        let storage = match op.work {
            DType::F32 => {
                CpuStorage::F32(both_ways("pe-factors", len, f32::NAN, |b, out| unsafe {
                    pe_host_factors_f32(f, w, values, out.as_mut_ptr(), b)
                })?)
            }
            _ => CpuStorage::F64(both_ways("pe-factors", len, f64::NAN, |b, out| unsafe {
                pe_host_factors_f64(f, w, values, out.as_mut_ptr(), b)
            })?),
        };
        Ok((storage, Shape::from(len)))
    }

    pub fn rows(
        op: &RowsOp,
        anchors: (&CpuStorage, &Layout),
        offsets: (&CpuStorage, &Layout),
        values: (&CpuStorage, &Layout),
    ) -> Result<(CpuStorage, Shape)> {
        use crate::cuda::host::*;
        use half::{bf16, f16};
        let (t, rows) = (&op.args, op.rows);
        let values = match t.has_values {
            1 => slice::<f64>(values)?.as_ptr(),
            _ => std::ptr::null(),
        };
        macro_rules! run {
            ($acc:ty, $raw:ty, $nan:expr, $f:ident, $wrap:ident) => {{
                let (a, o) = (slice::<$acc>(anchors)?, slice::<$acc>(offsets)?);
                let out = both_ways("pe-rows", op.len, $nan, |backward, out| {
                    let p = out.as_mut_ptr().cast::<$raw>();
                    // SAFETY: the anchors and offsets are the factor rows `Launch::new` made
                    // for these arguments, the values hold one position per row, and the
                    // function writes within the `len` values of `out`:
                    // `planes * rows * stride`.
                    unsafe { $f(t, rows, a.as_ptr(), o.as_ptr(), values, p, backward) };
                })?;
                CpuStorage::$wrap(out)
            }};
        }
        let storage = match op.dtype {
            DType::F32 => run!(f32, f32, f32::NAN, pe_host_rows_f32, F32),
            DType::F64 => run!(f64, f64, f64::NAN, pe_host_rows_f64, F64),
            DType::F16 => run!(f64, u16, f16::NAN, pe_host_rows_f16, F16),
            DType::BF16 => run!(f64, u16, bf16::NAN, pe_host_rows_bf16, BF16),
            other => bail!("pe-rows: no kernel writes {other:?}"),
        };
        Ok((storage, Shape::from(op.len)))
    }
}

/// The launches on CUDA (`cuda/tables.cu`).
#[cfg(feature = "cuda")]
mod device {
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
    use candle_core::{bail, CudaDevice, CudaStorage, Layout, Result, Shape, Storage, Tensor};

    use super::{rope_threads, row_threads, Factors, RowsOp};
    use crate::cuda::{grid, part, ROPE, TABLES};

    /// Launches kernel `$name` of `tables.cu` (or of the module `$ptx`) on `$dev` over
    /// `$items` items, the arguments pushed by `$push` onto the builder `$b`. The caller states
    /// the kernel's safety contract.
    macro_rules! launch {
        ($dev:expr, $name:expr, $items:expr, |$b:ident| $push:block) => {
            launch!($dev, TABLES, $name, $items, |$b| $push)
        };
        ($dev:expr, $ptx:expr, $name:expr, $items:expr, |$b:ident| $push:block) => {{
            let func = $ptx.function($dev, $name)?;
            let stream = $dev.cuda_stream();
            let mut $b = stream.launch_builder(&func);
            $push
            // SAFETY: as the caller states for this kernel and these arguments.
            unsafe { $b.launch(grid($items)) }.w()?;
        }};
    }

    /// The output of `len` values on `dev`, as candle's storage and shape.
    fn output(dev: &CudaDevice, slice: CudaStorageSlice, len: usize) -> (CudaStorage, Shape) {
        let device = dev.clone();
        (CudaStorage { slice, device }, Shape::from(len))
    }

    pub fn factors(
        op: &Factors,
        (w, lw): (&CudaStorage, &Layout),
        (values, lv): (&CudaStorage, &Layout),
    ) -> Result<(CudaStorage, Shape)> {
        let dev = w.device();
        let (CudaStorageSlice::F64(w), CudaStorageSlice::F64(values)) = (&w.slice, &values.slice)
        else {
            bail!("pe-factors: the frequencies and positions must be f64")
        };
        let (w, values) = (part(w, lw, "w")?, part(values, lv, "values")?);
        let f = &op.args;
        let len = 2 * f.count as usize * f.n as usize;
        let items = u64::from(f.count) * u64::from(f.n);
        macro_rules! factors {
            ($name:literal, $work:ty, $wrap:ident) => {{
                // One value at least: a plan of no pairs (a zero-padded width of 1) has none.
                let out = dev.alloc_zeros::<$work>(len.max(1))?;
                // The kernel reads 2n frequencies and `count` positions (with has_values) and
                // writes within the 2 * count * n values of `out`.
                launch!(dev, $name, items, |b| {
                    b.arg(f).arg(&w).arg(&values).arg(&out);
                });
                CudaStorageSlice::$wrap(out)
            }};
        }
        let slice = match op.work {
            candle_core::DType::F32 => factors!("pe_factors_f32", f32, F32),
            _ => factors!("pe_factors_f64", f64, F64),
        };
        Ok(output(dev, slice, len))
    }

    pub fn rows(
        op: &RowsOp,
        (anchors, la): (&CudaStorage, &Layout),
        (offsets, lo): (&CudaStorage, &Layout),
        (values, lv): (&CudaStorage, &Layout),
    ) -> Result<(CudaStorage, Shape)> {
        let dev = anchors.device();
        let t = &op.args;
        let items = row_threads(t, op.rows);
        let values = match (&values.slice, t.has_values) {
            (CudaStorageSlice::F64(v), 1) => Some(part(v, lv, "values")?),
            _ => None,
        };
        let null = 0u64;
        macro_rules! rows {
            ($name:literal, $acc:ident, $out:ty, $wrap:ident) => {{
                let (CudaStorageSlice::$acc(a), CudaStorageSlice::$acc(o)) =
                    (&anchors.slice, &offsets.slice)
                else {
                    bail!("pe-rows: the factors are not in the work type")
                };
                let (a, o) = (part(a, la, "anchors")?, part(o, lo, "offsets")?);
                // SAFETY: every value is written by the kernel (each row's pairs, its zero
                // column, both planes of halves).
                let out = unsafe { dev.alloc::<$out>(op.len)? };
                // The kernel reads the factor rows of these arguments and one position per row
                // (with has_values), and writes within the `len` values of `out`.
                launch!(dev, $name, items, |b| {
                    b.arg(t).arg(&op.rows).arg(&a).arg(&o);
                    match &values {
                        Some(v) => b.arg(v),
                        None => b.arg(&null),
                    };
                    b.arg(&out);
                });
                CudaStorageSlice::$wrap(out)
            }};
        }
        let slice = match op.dtype {
            candle_core::DType::F32 => rows!("pe_rows_f32", F32, f32, F32),
            candle_core::DType::F64 => rows!("pe_rows_f64", F64, f64, F64),
            candle_core::DType::F16 => rows!("pe_rows_f16", F64, half::f16, F16),
            candle_core::DType::BF16 => rows!("pe_rows_bf16", F64, half::bf16, BF16),
            other => bail!("pe-rows: no kernel writes {other:?}"),
        };
        Ok(output(dev, slice, op.len))
    }

    pub fn embed(
        op: &super::EmbedOp,
        (factors, lf): (&CudaStorage, &Layout),
        (weights, lw): (&CudaStorage, &Layout),
        (info, li): (&CudaStorage, &Layout),
    ) -> Result<(CudaStorage, Shape)> {
        let dev = factors.device();
        let t = &op.args;
        let len = op.rows as usize * t.stride as usize;
        let items = row_threads(t, op.rows);
        let CudaStorageSlice::F64(info) = &info.slice else {
            bail!("pe-embed: the tokens and positions must be f64")
        };
        let info = part(info, li, "tokens")?;
        macro_rules! embed {
            ($name:literal, $acc:ident, $elem:ident, $out:ty) => {{
                let (CudaStorageSlice::$acc(f), CudaStorageSlice::$elem(w)) =
                    (&factors.slice, &weights.slice)
                else {
                    bail!("pe-embed: the factors are not in the work type")
                };
                let f = part(f, lf, "factors")?;
                let (a, o) = (f.slice(..op.split), f.slice(op.split..));
                let w = part(w, lw, "weights")?;
                // SAFETY: every value is written by the kernel (each token's pairs and its zero
                // column).
                let out = unsafe { dev.alloc::<$out>(len)? };
                // The kernel reads the factor rows of these arguments, one token (and position)
                // per row, the weight rows of the tokens (checked below the vocabulary), and
                // writes within the `len` values of `out`.
                launch!(dev, $name, items, |b| {
                    b.arg(t)
                        .arg(&op.rows)
                        .arg(&a)
                        .arg(&o)
                        .arg(&info)
                        .arg(&w)
                        .arg(&out);
                });
                CudaStorageSlice::$elem(out)
            }};
        }
        let slice = match weights.dtype() {
            candle_core::DType::F32 => embed!("pe_embed_f32", F32, F32, f32),
            candle_core::DType::F64 => embed!("pe_embed_f64", F64, F64, f64),
            candle_core::DType::F16 => embed!("pe_embed_f16", F64, F16, half::f16),
            candle_core::DType::BF16 => embed!("pe_embed_bf16", F64, BF16, half::bf16),
            other => bail!("pe-embed: no kernel reads {other:?}"),
        };
        Ok(output(dev, slice, len))
    }

    pub fn turns(
        op: &super::TurnsOp,
        (w, lw): (&CudaStorage, &Layout),
        (keys, lk): (&CudaStorage, &Layout),
        (axis, lx): (&CudaStorage, &Layout),
    ) -> Result<(CudaStorage, Shape)> {
        let dev = w.device();
        let t = &op.args;
        let len = 2 * t.rows as usize * t.h as usize;
        let items = u64::from(t.rows) * u64::from(t.h);
        let (CudaStorageSlice::F64(w), CudaStorageSlice::F64(keys), CudaStorageSlice::U32(axis)) =
            (&w.slice, &keys.slice, &axis.slice)
        else {
            bail!("pe-turns: the frequencies and keys must be f64, the axes u32")
        };
        let w = part(w, lw, "frequencies")?;
        let (old, new) = (w.slice(..op.split), w.slice(op.split..));
        let (keys, axis) = (part(keys, lk, "keys")?, part(axis, lx, "axes")?);
        macro_rules! turns {
            ($name:literal, $out:ty, $wrap:ident) => {{
                // SAFETY: every value is written by the kernel (both planes of every row).
                let out = unsafe { dev.alloc::<$out>(len.max(1))? };
                // The kernel reads h frequency pairs of each spectrum, six keys per row, one
                // axis per slot, and writes within the `len` values of `out`.
                launch!(dev, $name, items, |b| {
                    b.arg(t).arg(&old).arg(&new).arg(&keys).arg(&axis).arg(&out);
                });
                CudaStorageSlice::$wrap(out)
            }};
        }
        let slice = match op.dtype {
            candle_core::DType::F32 => turns!("pe_turns_f32", f32, F32),
            candle_core::DType::F64 => turns!("pe_turns_f64", f64, F64),
            candle_core::DType::F16 => turns!("pe_turns_f16", half::f16, F16),
            candle_core::DType::BF16 => turns!("pe_turns_bf16", half::bf16, BF16),
            other => bail!("pe-turns: no kernel writes {other:?}"),
        };
        Ok(output(dev, slice, len))
    }

    pub fn rope(
        op: &super::RopeOp,
        (x, lx): (&CudaStorage, &Layout),
        (w, lw): (&CudaStorage, &Layout),
        (values, lv): (&CudaStorage, &Layout),
    ) -> Result<(CudaStorage, Shape)> {
        let dev = x.device();
        let r = &op.args;
        let items = rope_threads(r, op.tokens);
        let (CudaStorageSlice::F64(w), CudaStorageSlice::F64(values)) = (&w.slice, &values.slice)
        else {
            bail!("pe-rope: the frequencies and positions must be f64")
        };
        let (w, values) = (part(w, lw, "frequencies")?, part(values, lv, "positions")?);
        let second = op.k.as_ref().map(Tensor::storage_and_layout);
        let each = |heads: u32| op.tokens as usize * heads as usize * r.d as usize;
        macro_rules! rope {
            ($name:literal, $elem:ident, $ty:ty) => {{
                let CudaStorageSlice::$elem(x) = &x.slice else {
                    bail!("pe-rope: x is not {}", stringify!($ty))
                };
                let x = part(x, lx, "x")?;
                let k = match &second {
                    Some((storage, lk)) => match &**storage {
                        Storage::Cuda(k) => match &k.slice {
                            CudaStorageSlice::$elem(k) => Some(part(k, lk, "k")?),
                            _ => bail!("pe-rope: k is not {}", stringify!($ty)),
                        },
                        _ => bail!("pe-rope: k is not on x's device"),
                    },
                    None => None,
                };
                let k_len = k.as_ref().map_or(0, |k| k.len());
                if x.len() != each(r.heads) || k_len != each(r.heads_k) {
                    bail!("pe-rope: q and k are not the sizes the arguments name");
                }
                let len = x.len() + k_len;
                // SAFETY: every value is written by the kernel (each token's pairs and its
                // passed features, in every head of x and of k).
                let y = unsafe { dev.alloc::<$ty>(len)? };
                // The kernel reads the values of x and of k (checked above; k only with
                // heads_k > 0, x stands in for it otherwise), n frequency pairs (and n axes,
                // each below 3, with M-RoPE), a position per token (with has_values; three
                // rows with M-RoPE), and writes within the `len` values of `y`.
                launch!(dev, ROPE, $name, items, |b| {
                    b.arg(r)
                        .arg(&op.tokens)
                        .arg(&w)
                        .arg(&values)
                        .arg(&x)
                        .arg(k.as_ref().unwrap_or(&x))
                        .arg(&y);
                });
                (CudaStorageSlice::$elem(y), len)
            }};
        }
        let (slice, len) = match x.dtype() {
            candle_core::DType::F32 => rope!("pe_rope_f32", F32, f32),
            candle_core::DType::F64 => rope!("pe_rope_f64", F64, f64),
            candle_core::DType::F16 => rope!("pe_rope_f16", F16, half::f16),
            candle_core::DType::BF16 => rope!("pe_rope_bf16", BF16, half::bf16),
            other => bail!("pe-rope: no kernel turns {other:?}"),
        };
        Ok(output(dev, slice, len))
    }
}

#[cfg(test)]
mod tests {
    use super::rope_groups;
    #[cfg(feature = "host-kernels")]
    use super::{rope_threads, row_threads};
    #[cfg(feature = "host-kernels")]
    use crate::cuda::{RopeArgs, RowArgs};

    /// The grids are sized in Rust by the rules the kernels loop by in C (`pe_rows_threads`,
    /// `pe_rope_threads`): a range, a range repeated per sequence, values, a zero row, a table
    /// of no pairs, and a rotation split or not by heads, whole or partial.
    #[cfg(feature = "host-kernels")]
    #[test]
    fn the_grids_count_the_threads_the_kernels_take() {
        use crate::cuda::host::{pe_host_rope_threads, pe_host_rows_threads};
        let table = RowArgs {
            start: 37.0,
            base: 0.0,
            zero_at: 0.0,
            sin_plane: 0,
            scale: 0.0,
            has_zero: 0,
            has_values: 0,
            n: 31,
            n_cos: 31,
            anchors: 5,
            stride: 63,
            sin0: 0,
            sin_step: 2,
            cos0: 1,
            cos_step: 2,
            zero_col: 62,
            period: 0,
        };
        let shapes = [
            (table, 300),
            (
                RowArgs {
                    period: 200,
                    ..table
                },
                600,
            ),
            (
                RowArgs {
                    has_values: 1,
                    ..table
                },
                300,
            ),
            (
                RowArgs {
                    has_zero: 1,
                    ..table
                },
                300,
            ),
            (
                RowArgs {
                    n: 0,
                    n_cos: 0,
                    ..table
                },
                300,
            ),
            (
                RowArgs {
                    period: 1,
                    anchors: 1,
                    ..table
                },
                7,
            ),
        ];
        for (args, rows) in shapes {
            // SAFETY: the functions read the arguments only.
            let c = unsafe { pe_host_rows_threads(&args, rows) };
            assert_eq!(row_threads(&args, rows), c, "{args:?}, {rows} rows");
        }
        assert_eq!(row_threads(&shapes[1].0, 600), 3 * 5 * 31);
        let rope = RopeArgs {
            start: 0.0,
            amplitude: 1.0,
            n: 32,
            d: 128,
            heads: 32,
            seq: 1,
            period: 1,
            has_values: 0,
            interleaved: 0,
            axes: 0,
            heads_k: 8,
            turn: 0,
            groups: 40,
        };
        for (args, tokens) in [
            (rope, 1),
            (
                RopeArgs {
                    groups: 1,
                    n: 64,
                    ..rope
                },
                4_096,
            ),
        ] {
            // SAFETY: the function reads the arguments only.
            let c = unsafe { pe_host_rope_threads(&args, tokens) };
            assert_eq!(rope_threads(&args, tokens), c, "{args:?}, {tokens} tokens");
        }
    }

    /// One thread per head at a decode step, one for all heads at a long prefill, between them
    /// enough threads for a wave; the counts candle-pe-nn's `without_tables.rs` turns at.
    #[test]
    fn rope_launches_split_heads_the_fewer_tokens_they_turn() {
        assert_eq!(rope_groups(1, 64, 40), 40);
        assert_eq!(rope_groups(8, 64, 40), 40);
        assert_eq!(rope_groups(512, 64, 40), 8);
        assert_eq!(rope_groups(4_096, 64, 40), 1);
        assert_eq!(rope_groups(1 << 31, 64, 40), 1);
        assert_eq!(rope_groups(1, 1, 0), 1);
        let whole = [1, 16_384, 30_000, 40_000, 70_000].map(|t| rope_groups(t, 4, 5));
        let partial = [1, 11_000, 20_000, 30_000, 50_000].map(|t| rope_groups(t, 6, 5));
        assert_eq!(whole, [5, 4, 3, 2, 1]);
        assert_eq!(partial, [5, 4, 3, 2, 1]);
        let whole = [1, 16_384, 30_000, 40_000, 70_000].map(|t| rope_groups(t, 4, 14));
        let partial = [1, 11_000, 20_000, 30_000, 50_000].map(|t| rope_groups(t, 6, 14));
        assert_eq!(whole, [14, 4, 3, 2, 1]);
        assert_eq!(partial, [14, 4, 3, 2, 1]);
    }
}
