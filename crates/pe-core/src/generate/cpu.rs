//! The CPU generator: exact tables at memory speed, each output element written once.
//!
//! Rows are produced from an *anchor* row and an *offset* table. Anchors sit at the absolute
//! positions that are multiples of [`ANCHOR_SPAN`]: for an anchor `a`, `sin(a w)` and `cos(a w)`
//! are computed exactly in f64 ([`Frequency::sin_cos`], no libm); the offset table holds the exact
//! `sin(j w)`, `cos(j w)` for `j < ANCHOR_SPAN`. Row `a + j` is then the angle-addition identity,
//! two multiplies and an add per value, with no libm call in the hot loop and no error growing
//! with the position. Because the anchor of a position is fixed, a row's bits do not depend on
//! the request it came in, on the thread that built it, or on how a cache grew. A fractional
//! position (a diffusion timestep) is its own anchor. The sequences of a batch embedded at one
//! offset share their anchor rows, computed once.
//!
//! f32 output is combined in f32 (error below 3e-7); f16, bf16 and f64 outputs are combined in
//! f64, so the half-precision outputs are accurate values rounded once (within one ulp).
//!
//! [`fill_rows`] hands each row's anchor and offset ([`RowCode`]) to a [`Finish`] that writes the
//! output row in one pass, each value combined and finished as it is written, with no row buffer:
//! a plain table rounds it to the output dtype ([`table`]), the fused embedding adds it to a
//! scaled token embedding ([`embed`]), the rotary tables split it into cos and sin ([`halves`]).
//! Each parallel task runs in an AVX2 build where the CPU has it, and each anchor row is
//! computed in AVX2's f64 lanes: the same operations, so the same bits.
//!
//! [`Frequency::sin_cos`]: crate::describe::freq::Frequency::sin_cos

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::{Add, Mul, Sub};

use candle_core::{DType, Device, Storage, Tensor};
use half::{bf16, f16};
use rayon::prelude::*;

use super::Generator;
use crate::describe::freq::{Columns, Frequency, Plan};
use crate::describe::positions::{Request, Rows};
use crate::exact::round;
use crate::{ColumnLayout, Error, Result};

/// Anchors sit at multiples of this; also the rows of one parallel task.
pub(crate) const ANCHOR_SPAN: usize = 64;

/// The position of each row of a CPU request.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RowPositions<'a> {
    /// Row `r` is at position `start + r`.
    Range { start: u32 },
    /// Row `r` is at position `start + r % period` (`period > 0`): each sequence of a batch at
    /// the same positions.
    Repeat { start: u32, period: usize },
    /// Row `r` is at position `values[r]`.
    Values(&'a [f64]),
}

impl RowPositions<'_> {
    fn at(&self, row: usize) -> f64 {
        match self {
            RowPositions::Range { start } => f64::from(*start) + row as f64,
            RowPositions::Repeat { start, period } => f64::from(*start) + (row % period) as f64,
            RowPositions::Values(values) => values[row],
        }
    }
}

/// The anchor of position `p` and the offset from it: `(floor(p / span) * span, p mod span)`
/// for an integer, `(p, 0)` for a fractional position.
fn anchor_of(p: f64) -> (f64, usize) {
    if p.fract() == 0.0 {
        let anchor = (p / ANCHOR_SPAN as f64).floor() * ANCHOR_SPAN as f64;
        (anchor, (p - anchor) as usize)
    } else {
        (p, 0)
    }
}

/// The offset table: `sin(j w)` and `cos(j w)` for every frequency and `j < ANCHOR_SPAN`,
/// exact in f64 and rounded once to f32, ready for either arithmetic.
#[derive(Debug)]
pub(crate) struct Offsets {
    f64: Vec<SinCos<f64>>,
    f32: Vec<SinCos<f32>>,
}

impl Offsets {
    pub fn new(plan: &Plan) -> Self {
        let f64: Vec<SinCos<f64>> = (0..ANCHOR_SPAN)
            .map(|j| SinCos::row(plan.frequencies(), j as f64, 1.0))
            .collect();
        let f32 = f64
            .iter()
            .map(|row| SinCos {
                sin: row.sin.iter().map(|&v| v as f32).collect(),
                cos: row.cos.iter().map(|&v| v as f32).collect(),
            })
            .collect();
        Self { f64, f32 }
    }
}

/// The arithmetic type rows are combined in: f32 or f64.
pub(crate) trait Acc:
    Copy + Send + Sync + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
    fn from_f64(v: f64) -> Self;
    /// The offset table in this arithmetic.
    fn offsets(offsets: &Offsets) -> &[SinCos<Self>];
}

impl Acc for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn offsets(offsets: &Offsets) -> &[SinCos<Self>] {
        &offsets.f32
    }
}

impl Acc for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    fn offsets(offsets: &Offsets) -> &[SinCos<Self>] {
        &offsets.f64
    }
}

/// An output element type and the arithmetic it is computed in: f32 in f32; f64, f16 and bf16
/// in f64 (so half-precision values are rounded once, from an accurate value, by
/// [`round`](crate::exact::round), not by the `half` crate's conversions).
pub(crate) trait Element: candle_core::WithDType {
    type Acc: Acc;
    fn from_acc(v: Self::Acc) -> Self;
    fn to_acc(self) -> Self::Acc;
}

impl Element for f32 {
    type Acc = f32;
    fn from_acc(v: f32) -> Self {
        v
    }
    fn to_acc(self) -> f32 {
        self
    }
}

impl Element for f64 {
    type Acc = f64;
    fn from_acc(v: f64) -> Self {
        v
    }
    fn to_acc(self) -> f64 {
        self
    }
}

impl Element for f16 {
    type Acc = f64;
    fn from_acc(v: f64) -> Self {
        f16::from_bits(round::f16_bits(v))
    }
    fn to_acc(self) -> f64 {
        self.to_f64()
    }
}

impl Element for bf16 {
    type Acc = f64;
    fn from_acc(v: f64) -> Self {
        bf16::from_bits(round::bf16_bits(v))
    }
    fn to_acc(self) -> f64 {
        self.to_f64()
    }
}

/// Output rows that split into disjoint parts, one per parallel task.
pub(crate) trait OutRows: Send + Sized {
    /// The first `rows` rows and the rest.
    fn split_rows(self, rows: usize) -> (Self, Self);
}

/// Rows of `width` elements, one after the other in one slice.
pub(crate) struct Slab<'a, O> {
    data: &'a mut [O],
    width: usize,
}

impl<'a, O> Slab<'a, O> {
    fn new(data: &'a mut [O], width: usize) -> Self {
        Self { data, width }
    }

    /// Row `i`.
    fn row(&mut self, i: usize) -> &mut [O] {
        &mut self.data[i * self.width..][..self.width]
    }
}

impl<O: Send> OutRows for Slab<'_, O> {
    fn split_rows(self, rows: usize) -> (Self, Self) {
        let width = self.width;
        let (a, b) = self.data.split_at_mut((rows * width).min(self.data.len()));
        (Self::new(a, width), Self::new(b, width))
    }
}

/// Two outputs filled row by row together (rotary cos and sin).
impl<A: OutRows, B: OutRows> OutRows for (A, B) {
    fn split_rows(self, rows: usize) -> (Self, Self) {
        let (a0, a1) = self.0.split_rows(rows);
        let (b0, b1) = self.1.split_rows(rows);
        ((a0, b0), (a1, b1))
    }
}

/// One row of the encoding, not yet written: the anchor and offset rows it combines, or none
/// for a row of zeros (a padding position).
#[derive(Clone, Copy)]
pub(crate) struct RowCode<'a, A> {
    cols: &'a Columns,
    angles: Option<(&'a SinCos<A>, &'a SinCos<A>)>,
}

impl<A: Acc> RowCode<'_, A> {
    /// Writes `row[k] = put(src[k], v)` for every column `k` of the plan's layout, `v` the row's
    /// value there; `src` is read alongside (the weight row of the fused embedding; a slice of
    /// `()` when there is nothing to read).
    #[inline(always)]
    fn write<X: Copy, O>(self, src: &[X], row: &mut [O], put: impl Fn(X, A) -> O) {
        let cols = self.cols;
        let (row, src) = (&mut row[..cols.width], &src[..cols.width]);
        let Some((anchor, offset)) = self.angles else {
            for (o, &x) in row.iter_mut().zip(src) {
                *o = put(x, A::from_f64(0.0));
            }
            return;
        };
        let n = cols.n_cos;
        let last_sin = match cols.layout {
            ColumnLayout::Interleaved => {
                let (a, o) = (anchor.head(n), offset.head(n));
                let pairs = row[..2 * n].chunks_exact_mut(2).zip(src.chunks_exact(2));
                for (i, (pair, x)) in pairs.enumerate() {
                    pair[0] = put(x[0], sin_sum(&a, &o, i));
                    pair[1] = put(x[1], cos_sum(&a, &o, i));
                }
                2 * n
            }
            ColumnLayout::SinCos | ColumnLayout::CosSin => {
                let sin_first = cols.layout == ColumnLayout::SinCos;
                let split = if sin_first { cols.n_sin } else { n };
                let (first, second) = row.split_at_mut(split);
                let (x_first, x_second) = src.split_at(split);
                let (sins, coss) = if sin_first {
                    ((first, x_first), (second, x_second))
                } else {
                    ((second, x_second), (first, x_first))
                };
                split_halves(anchor, offset, n, sins, coss, &put);
                if sin_first {
                    n
                } else {
                    2 * n
                }
            }
        };
        // An odd split width ends with a sine that has no cosine.
        if cols.n_sin > n {
            let (a, o) = (anchor.head(n + 1), offset.head(n + 1));
            row[last_sin] = put(src[last_sin], sin_sum(&a, &o, n));
        }
        if cols.zero_last {
            row[cols.width - 1] = put(src[cols.width - 1], A::from_f64(0.0));
        }
    }

    /// Writes the row's `n` cosines and `n` sines (a cos|sin plan of even width, the rotary
    /// tables) to two rows of their own: `cos_row[i] = put(v)`, `sin_row[i] = put(v)`.
    #[inline(always)]
    fn write_halves<O>(self, cos_row: &mut [O], sin_row: &mut [O], put: impl Fn(A) -> O) {
        let n = cos_row.len();
        let none = vec![(); n];
        let put = |(), v| put(v);
        match self.angles {
            Some((anchor, offset)) => {
                split_halves(anchor, offset, n, (sin_row, &none), (cos_row, &none), &put)
            }
            None => {
                for o in cos_row.iter_mut().chain(sin_row) {
                    *o = put((), A::from_f64(0.0));
                }
            }
        }
    }
}

/// The first `n` values of an anchor or offset row, sliced to one length so that the loops over
/// them vectorise.
struct Head<'a, A> {
    sin: &'a [A],
    cos: &'a [A],
}

impl<A: Acc> SinCos<A> {
    #[inline(always)]
    fn head(&self, n: usize) -> Head<'_, A> {
        Head {
            sin: &self.sin[..n],
            cos: &self.cos[..n],
        }
    }
}

/// `sin((a + o) w_i) = sin(a w_i) cos(o w_i) + cos(a w_i) sin(o w_i)`.
#[inline(always)]
fn sin_sum<A: Acc>(a: &Head<'_, A>, o: &Head<'_, A>, i: usize) -> A {
    a.sin[i] * o.cos[i] + a.cos[i] * o.sin[i]
}

/// `cos((a + o) w_i) = cos(a w_i) cos(o w_i) - sin(a w_i) sin(o w_i)`.
#[inline(always)]
fn cos_sum<A: Acc>(a: &Head<'_, A>, o: &Head<'_, A>, i: usize) -> A {
    a.cos[i] * o.cos[i] - a.sin[i] * o.sin[i]
}

/// The first `n` sines and cosines of the row at `anchor + offset`, each written where it goes,
/// `put` with the value read alongside: two indexed loops over slices of one length, which the
/// compiler vectorises.
#[inline(always)]
fn split_halves<A: Acc, X: Copy, O>(
    anchor: &SinCos<A>,
    offset: &SinCos<A>,
    n: usize,
    (sins, x_sins): (&mut [O], &[X]),
    (coss, x_coss): (&mut [O], &[X]),
    put: &impl Fn(X, A) -> O,
) {
    let (a, o) = (anchor.head(n), offset.head(n));
    let (sins, x_sins) = (&mut sins[..n], &x_sins[..n]);
    let (coss, x_coss) = (&mut coss[..n], &x_coss[..n]);
    for i in 0..n {
        sins[i] = put(x_sins[i], sin_sum(&a, &o, i));
    }
    for i in 0..n {
        coss[i] = put(x_coss[i], cos_sum(&a, &o, i));
    }
}

/// What a fill makes of each row: [`row`](Self::row) writes row `i` of `out`, a task's part
/// of the output, from the row's anchor and offset (`code`); `row` is the row's index in the
/// whole output. Implementations mark it `#[inline(always)]`, so that the AVX2 build of a task
/// ([`Fill::task`]) holds the whole row loop.
pub(crate) trait Finish<A, S>: Sync {
    fn row(&self, row: usize, code: RowCode<'_, A>, out: &mut S, i: usize);
}

/// The rows of a plain table: each value rounded to the output dtype. `none` has a `()` for
/// every column (nothing is read alongside).
struct Table<'a, T> {
    none: &'a [()],
    dtype: PhantomData<T>,
}

impl<T: Element> Finish<T::Acc, Slab<'_, MaybeUninit<T>>> for Table<'_, T> {
    #[inline(always)]
    fn row(&self, _: usize, code: RowCode<'_, T::Acc>, out: &mut Slab<MaybeUninit<T>>, i: usize) {
        code.write(self.none, out.row(i), |(), v| {
            MaybeUninit::new(T::from_acc(v))
        });
    }
}

/// The rows of the rotary tables: cos and sin, each rounded to the output dtype.
struct Halves<T>(PhantomData<T>);

type SlabPair<'a, T> = (Slab<'a, MaybeUninit<T>>, Slab<'a, MaybeUninit<T>>);

impl<T: Element> Finish<T::Acc, SlabPair<'_, T>> for Halves<T> {
    #[inline(always)]
    fn row(&self, _: usize, code: RowCode<'_, T::Acc>, out: &mut SlabPair<T>, i: usize) {
        let put = |v| MaybeUninit::new(T::from_acc(v));
        code.write_halves(out.0.row(i), out.1.row(i), put);
    }
}

/// The rows of the fused embedding block: `scale * weights[tokens[r]] + PE`, with `d` columns.
struct Embed<'a, T: Element> {
    weights: &'a [T],
    tokens: &'a [usize],
    d: usize,
    scale: T::Acc,
}

impl<T: Element> Finish<T::Acc, Slab<'_, MaybeUninit<T>>> for Embed<'_, T> {
    #[inline(always)]
    fn row(&self, r: usize, code: RowCode<'_, T::Acc>, out: &mut Slab<MaybeUninit<T>>, i: usize) {
        let row = &self.weights[self.tokens[r] * self.d..][..self.d];
        code.write(row, out.row(i), |x, pe| {
            MaybeUninit::new(T::from_acc(self.scale * x.to_acc() + pe))
        });
    }
}

/// Finds each of `rows` rows' anchor and offset (in parallel) and has `finish` write it into
/// `out`. Rows at position `zero_at` are zeros.
fn fill_rows<A: Acc, S: OutRows, F: Finish<A, S>>(
    generator: &Generator,
    positions: RowPositions<'_>,
    zero_at: Option<u32>,
    rows: usize,
    out: S,
    finish: &F,
) {
    if rows == 0 {
        return;
    }
    let plan = generator.plan();
    let (base, shared) = shared_anchors::<A>(plan, positions, rows);
    let fill = Fill {
        plan,
        offsets: A::offsets(generator.offsets()),
        positions,
        zero_at: zero_at.map(f64::from),
        base,
        shared,
        finish,
    };
    let head_rows = head_rows(positions, rows);
    let (head, tail) = out.split_rows(head_rows);
    // A request of one task runs here: handing it to the pool would cost more than the work.
    if rows - head_rows <= ANCHOR_SPAN {
        fill.task(0, head_rows, head);
        fill.task(head_rows, rows - head_rows, tail);
        return;
    }
    let chunks = anchor_chunks(tail, head_rows, rows);
    rayon::join(
        || fill.task(0, head_rows, head),
        || {
            chunks
                .into_par_iter()
                .for_each(|(first, n, chunk)| fill.task(first, n, chunk))
        },
    );
}

/// One fill: where its rows are, their anchors, and what each row writes.
struct Fill<'a, A, F> {
    plan: &'a Plan,
    offsets: &'a [SinCos<A>],
    positions: RowPositions<'a>,
    zero_at: Option<f64>,
    /// The anchors shared by sequences at the same positions, from `base` ([`shared_anchors`]).
    base: f64,
    shared: Vec<SinCos<A>>,
    finish: &'a F,
}

impl<A: Acc, F> Fill<'_, A, F> {
    /// Writes rows `first..first + n` into `out`, their part of the output, with AVX2's wider
    /// vectors where the CPU has them (the same operations, so the same bits).
    fn task<S: OutRows>(&self, first: usize, n: usize, out: S)
    where
        F: Finish<A, S>,
    {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { self.task_avx2(first, n, out) };
        }
        self.task_rows(first, n, out)
    }

    /// [`task_rows`](Self::task_rows) compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn task_avx2<S: OutRows>(&self, first: usize, n: usize, out: S)
    where
        F: Finish<A, S>,
    {
        self.task_rows(first, n, out)
    }

    /// [`task`](Self::task) for every CPU: each row's anchor is a shared one, or computed once
    /// and reused while the positions stay in its span.
    #[inline(always)]
    fn task_rows<S: OutRows>(&self, first: usize, n: usize, mut out: S)
    where
        F: Finish<A, S>,
    {
        let (plan, cols) = (self.plan, self.plan.columns());
        if let (RowPositions::Range { start }, None) = (self.positions, self.zero_at) {
            // A range's task lies in one anchor span (its tasks start on anchors, and the head
            // ends before the first): one anchor, the offsets in order.
            let (at, j) = anchor_of(f64::from(start) + first as f64);
            let anchor = SinCos::at(plan, at);
            for (i, offset) in self.offsets[j..j + n].iter().enumerate() {
                let angles = Some((&anchor, offset));
                self.finish
                    .row(first + i, RowCode { cols, angles }, &mut out, i);
            }
            return;
        }
        let mut anchor: Option<(f64, SinCos<A>)> = None;
        for i in 0..n {
            let p = self.positions.at(first + i);
            let angles = if Some(p) == self.zero_at {
                None
            } else {
                let (at, j) = anchor_of(p);
                let k = ((at - self.base) / ANCHOR_SPAN as f64) as usize;
                let values = match self.shared.get(k) {
                    Some(values) => values,
                    None => match &mut anchor {
                        Some((current, values)) if *current == at => values,
                        slot => &slot.insert((at, SinCos::at(plan, at))).1,
                    },
                };
                Some((values, &self.offsets[j]))
            };
            self.finish
                .row(first + i, RowCode { cols, angles }, &mut out, i);
        }
    }
}

/// The rows before a range's first anchor: a range's tasks start on anchors, so each task
/// computes one anchor row (none for other requests).
fn head_rows(positions: RowPositions<'_>, rows: usize) -> usize {
    match positions {
        RowPositions::Range { start } => (ANCHOR_SPAN - start as usize % ANCHOR_SPAN) % ANCHOR_SPAN,
        RowPositions::Repeat { .. } | RowPositions::Values(_) => 0,
    }
    .min(rows)
}

/// The rows a task computes, from `first`: the rest of the output after the head, cut in
/// spans of [`ANCHOR_SPAN`] rows, each `(first row, rows, its part of the output)`.
fn anchor_chunks<S: OutRows>(mut tail: S, first: usize, rows: usize) -> Vec<(usize, usize, S)> {
    let mut chunks = Vec::with_capacity((rows - first).div_ceil(ANCHOR_SPAN));
    let mut first = first;
    while first < rows {
        let n = ANCHOR_SPAN.min(rows - first);
        let (chunk, rest) = tail.split_rows(n);
        chunks.push((first, n, chunk));
        tail = rest;
        first += n;
    }
    chunks
}

/// Sequences that repeat one sequence's positions share its anchors, computed once, up front,
/// instead of once per sequence: anchors `base`, `base + span`, ... (none for other requests).
fn shared_anchors<A: Acc>(
    plan: &Plan,
    positions: RowPositions<'_>,
    rows: usize,
) -> (f64, Vec<SinCos<A>>) {
    match positions {
        RowPositions::Repeat { start, period } if rows > period => {
            let base = anchor_of(f64::from(start)).0;
            let last = anchor_of(f64::from(start) + (period - 1) as f64).0;
            let count = ((last - base) / ANCHOR_SPAN as f64) as usize + 1;
            let anchors = (0..count)
                .into_par_iter()
                .map(|k| SinCos::at(plan, base + (k * ANCHOR_SPAN) as f64))
                .collect();
            (base, anchors)
        }
        _ => (0.0, Vec::new()),
    }
}

/// The rows of a request as the CPU generator reads them: a range, or positions on the host.
enum HostRows {
    Range(u32),
    Values(Vec<f64>),
}

impl HostRows {
    fn of(request: &Request) -> Result<Self> {
        Ok(match &request.rows {
            Rows::Range { start, .. } => HostRows::Range(*start),
            Rows::Values(tensor) => HostRows::Values(tensor.to_vec1::<f64>()?),
        })
    }

    fn positions(&self) -> RowPositions<'_> {
        match self {
            HostRows::Range(start) => RowPositions::Range { start: *start },
            HostRows::Values(values) => RowPositions::Values(values),
        }
    }
}

/// Builds the table for `request` on the CPU, shaped `(rows, width)`.
pub(crate) fn table(generator: &Generator, request: &Request, dtype: DType) -> Result<Tensor> {
    let host = HostRows::of(request)?;
    let (positions, rows) = (host.positions(), request.n_rows());
    match dtype {
        DType::F32 => rows_of::<f32>(generator, positions, rows, request.zero_at),
        DType::F64 => rows_of::<f64>(generator, positions, rows, request.zero_at),
        DType::F16 => rows_of::<f16>(generator, positions, rows, request.zero_at),
        DType::BF16 => rows_of::<bf16>(generator, positions, rows, request.zero_at),
        other => Err(Error::UnsupportedDtype(other)),
    }
}

/// The two halves of a cos|sin plan's table (the rotary tables) for `request` on the CPU,
/// `(cos, sin)`, each `(rows, width / 2)`: both written directly, in the same parallel pass,
/// with no combined table and no copy.
pub(crate) fn halves(
    generator: &Generator,
    request: &Request,
    dtype: DType,
) -> Result<(Tensor, Tensor)> {
    let host = HostRows::of(request)?;
    let (positions, rows) = (host.positions(), request.n_rows());
    match dtype {
        DType::F32 => halves_of::<f32>(generator, positions, rows, request.zero_at),
        DType::F64 => halves_of::<f64>(generator, positions, rows, request.zero_at),
        DType::F16 => halves_of::<f16>(generator, positions, rows, request.zero_at),
        DType::BF16 => halves_of::<bf16>(generator, positions, rows, request.zero_at),
        other => Err(Error::UnsupportedDtype(other)),
    }
}

fn halves_of<T: Element>(
    generator: &Generator,
    positions: RowPositions<'_>,
    rows: usize,
    zero_at: Option<u32>,
) -> Result<(Tensor, Tensor)> {
    let h = generator.plan().columns().width / 2;
    let mut cos = uninit_vec::<T>(rows, h)?;
    let mut sin = uninit_vec::<T>(rows, h)?;
    let out = (
        Slab::new(cos.spare_capacity_mut(), h),
        Slab::new(sin.spare_capacity_mut(), h),
    );
    fill_rows(
        generator,
        positions,
        zero_at,
        rows,
        out,
        &Halves(PhantomData),
    );
    // SAFETY: `fill_rows` gave every row of both spare capacities to `Halves`, which wrote
    // each of the `h` elements of both.
    unsafe {
        cos.set_len(rows * h);
        sin.set_len(rows * h);
    }
    let cos = Tensor::from_vec(cos, (rows, h), &Device::Cpu)?;
    Ok((cos, Tensor::from_vec(sin, (rows, h), &Device::Cpu)?))
}

fn rows_of<T: Element>(
    generator: &Generator,
    positions: RowPositions<'_>,
    rows: usize,
    zero_at: Option<u32>,
) -> Result<Tensor> {
    let width = generator.plan().columns().width;
    let mut out = uninit_vec::<T>(rows, width)?;
    let none = vec![(); width];
    let finish = Table {
        none: &none,
        dtype: PhantomData,
    };
    let slab = Slab::new(out.spare_capacity_mut(), width);
    fill_rows(generator, positions, zero_at, rows, slab, &finish);
    // SAFETY: `fill_rows` gave every row of the spare capacity to `Table`, which wrote each of
    // its `width` elements.
    unsafe { out.set_len(rows * width) };
    Ok(Tensor::from_vec(out, (rows, width), &Device::Cpu)?)
}

/// `scale * weights[tokens[r]] + PE(position of row r)` for every token `r`, shape
/// `(tokens.len(), d)`, in the dtype of `weights`: one pass, each output element written once.
/// The caller has checked that `weights` is a `(vocab, d)` CPU tensor with `d` the plan's width,
/// that every token is below `vocab`, and that `positions` has a position for every token.
pub(crate) fn embed(
    generator: &Generator,
    weights: &Tensor,
    tokens: &[usize],
    positions: RowPositions<'_>,
    zero_at: Option<u32>,
    scale: f64,
) -> Result<Tensor> {
    let weights = weights.contiguous()?;
    match weights.dtype() {
        DType::F32 => embed_rows::<f32>(generator, &weights, tokens, positions, zero_at, scale),
        DType::F64 => embed_rows::<f64>(generator, &weights, tokens, positions, zero_at, scale),
        DType::F16 => embed_rows::<f16>(generator, &weights, tokens, positions, zero_at, scale),
        DType::BF16 => embed_rows::<bf16>(generator, &weights, tokens, positions, zero_at, scale),
        other => Err(Error::UnsupportedDtype(other)),
    }
}

fn embed_rows<T: Element>(
    generator: &Generator,
    weights: &Tensor,
    tokens: &[usize],
    positions: RowPositions<'_>,
    zero_at: Option<u32>,
    scale: f64,
) -> Result<Tensor> {
    let d = generator.plan().columns().width;
    let (storage, layout) = weights.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        return Err(Error::CpuBackendOnDevice(weights.device().location()));
    };
    let weights = &cpu.as_slice::<T>()?[layout.start_offset()..];
    let mut out = uninit_vec::<T>(tokens.len(), d)?;
    let finish = Embed {
        weights,
        tokens,
        d,
        scale: T::Acc::from_f64(scale),
    };
    let slab = Slab::new(out.spare_capacity_mut(), d);
    fill_rows(generator, positions, zero_at, tokens.len(), slab, &finish);
    // SAFETY: `fill_rows` gave every row of the spare capacity to `Embed`, which wrote each
    // of its `d` elements.
    unsafe { out.set_len(tokens.len() * d) };
    Ok(Tensor::from_vec(out, (tokens.len(), d), &Device::Cpu)?)
}

/// An empty vector with room for exactly `rows * width` elements, or `Error::TooLarge`.
fn uninit_vec<T: Element>(rows: usize, width: usize) -> Result<Vec<T>> {
    let too_large = |why: String| Error::TooLarge {
        rows,
        width,
        dtype: T::DTYPE,
        bytes: rows as u128 * width as u128 * T::DTYPE.size_in_bytes() as u128,
        why,
    };
    let total = rows
        .checked_mul(width)
        .ok_or_else(|| too_large("the element count overflows usize".into()))?;
    let mut out = Vec::new();
    out.try_reserve_exact(total)
        .map_err(|e| too_large(format!("the allocator refused ({e})")))?;
    Ok(out)
}

/// `sin` and `cos` of one angle for every frequency.
#[derive(Debug)]
pub(crate) struct SinCos<A> {
    sin: Vec<A>,
    cos: Vec<A>,
}

impl<A: Acc> SinCos<A> {
    /// The anchor row at `p`, times the plan's amplitude, so that the rows combined from it
    /// carry the amplitude at no cost.
    fn at(plan: &Plan, p: f64) -> Self {
        Self::row(plan.frequencies(), p, plan.amplitude())
    }

    /// `amplitude * sin(p w)` and `amplitude * cos(p w)` for every frequency `w`, with AVX2's
    /// wider vectors where the CPU has them (the same operations, so the same bits).
    fn row(frequencies: &[Frequency], p: f64, amplitude: f64) -> Self {
        let zero = A::from_f64(0.0);
        let n = frequencies.len();
        let mut row = Self {
            sin: vec![zero; n],
            cos: vec![zero; n],
        };
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            unsafe { row.fill_avx2(frequencies, p, amplitude) };
            return row;
        }
        row.fill(frequencies, p, amplitude);
        row
    }

    /// [`fill`](Self::fill) compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn fill_avx2(&mut self, frequencies: &[Frequency], p: f64, amplitude: f64) {
        self.fill(frequencies, p, amplitude)
    }

    /// Writes the row at `p`: one loop over the frequencies with no branch inside
    /// ([`trig::sin_cos`](crate::exact::trig::sin_cos) has none), which the compiler
    /// vectorises.
    #[inline(always)]
    fn fill(&mut self, frequencies: &[Frequency], p: f64, amplitude: f64) {
        let n = frequencies.len();
        let (sin, cos) = (&mut self.sin[..n], &mut self.cos[..n]);
        if p == 0.0 {
            sin.fill(A::from_f64(amplitude * 0.0));
            cos.fill(A::from_f64(amplitude * 1.0));
            return;
        }
        for i in 0..n {
            let (s, c) = frequencies[i].sin_cos(p);
            sin[i] = A::from_f64(amplitude * s);
            cos[i] = A::from_f64(amplitude * c);
        }
    }
}
