//! The rotation itself: q and k turned by `(cos, sin)` tables, on the CPU in one pass over the
//! rows (`rows.rs`), elsewhere by candle-nn's fused `rope` / `rope_i` kernels (or, for whole
//! f16 and bf16 heads on CUDA, `cuda.rs`'s one pass), or by their plain twin in broadcast
//! multiplies ([`Path::Slow`]), with partial rotary and the queries' scale. The verbs
//! (`apply.rs`, `mrope.rs`, `shift.rs`) build the tables and call it.

use candle_core::{DType, Result, Tensor, D};
use candle_nn::rotary_emb::{rope, rope_i};
use candle_pe_core::TableBackend;

use super::embedding::{table_dtype, Layout, Path, RotaryEmbedding};
use super::rows::TableRows;

impl RotaryEmbedding {
    /// Rotates each of q and k that is not empty (candle-nn's kernels do not take an empty
    /// sequence); `cos` and `sin` are `(seq, half)`, `(batch, seq, half)` or `(tokens, half)`,
    /// and `scale`, q's factor per position, `(seq,)`, `(batch, seq)` or `(tokens,)`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rotate_both(
        &self,
        q: &Tensor,
        k: &Tensor,
        layout: Layout,
        cos: &Tensor,
        sin: &Tensor,
        scale: Option<&Tensor>,
        path: Path,
    ) -> Result<(Tensor, Tensor)> {
        let rotate = |x: &Tensor, scale: Option<&Tensor>| {
            if x.elem_count() == 0 {
                Ok(x.clone())
            } else {
                self.rotate(x, layout, cos, sin, scale, path)
            }
        };
        Ok((rotate(q, scale)?, rotate(k, None)?))
    }

    /// One non-empty input rotated: the first `rotary_dim` features turn in the tables' dtype,
    /// times `scale` when given, rounded once to x's dtype; the rest pass unchanged (partial
    /// rotary: phi, GPT-NeoX), or times `scale`, rounded once.
    pub(crate) fn rotate(
        &self,
        x: &Tensor,
        layout: Layout,
        cos: &Tensor,
        sin: &Tensor,
        scale: Option<&Tensor>,
        path: Path,
    ) -> Result<Tensor> {
        if self.one_pass(x, path) && cos.dtype() == table_dtype(x.dtype()) {
            return self.turn_rows(x, cos, sin, scale);
        }
        let scale = scale.map(|s| spread_scale(s, layout)).transpose()?;
        let (head_dim, rotary_dim) = (x.dim(D::Minus1)?, self.rope().config().rotary_dim());
        #[cfg(feature = "cuda")]
        if path == Path::Fused && scale.is_none() && rotary_dim == head_dim {
            if let Some(turned) = self.turn_on_cuda(x, layout, cos, sin)? {
                return Ok(turned);
            }
        }
        // The common case (a whole contiguous head in the tables' dtype) turns x itself, with
        // none of the narrow, conversions and copy that would each clone it (a decode step
        // takes a microsecond).
        let whole = rotary_dim == head_dim && x.dtype() == cos.dtype() && x.is_contiguous();
        let turned = if whole {
            x.clone()
        } else {
            x.narrow(D::Minus1, 0, rotary_dim)?
                .to_dtype(cos.dtype())?
                .contiguous()?
        };
        let turned = match path {
            Path::Fused => self.fused(&turned, layout, cos, sin)?,
            Path::Slow => self.slow(&turned, layout, cos, sin)?,
        };
        let turned = match &scale {
            Some(s) => turned.broadcast_mul(s)?,
            None => turned,
        };
        if whole {
            return Ok(turned);
        }
        let turned = turned.to_dtype(x.dtype())?;
        if rotary_dim == head_dim {
            return Ok(turned);
        }
        let passed = x.narrow(D::Minus1, rotary_dim, head_dim - rotary_dim)?;
        let passed = match &scale {
            Some(s) => passed
                .to_dtype(s.dtype())?
                .broadcast_mul(s)?
                .to_dtype(x.dtype())?,
            None => passed,
        };
        // candle concatenates along the last axis through a transposed view: make it a plain
        // tensor, which matmul and the attention kernels expect.
        Tensor::cat(&[&turned, &passed], D::Minus1)?.contiguous()
    }

    /// Whether x turns in one pass over its table rows (`rows.rs`): the fused path on the CPU,
    /// unless the rope asks for [`TableBackend::Generic`], whose tables candle-nn's kernels
    /// turn as on a GPU.
    pub(crate) fn one_pass(&self, x: &Tensor, path: Path) -> bool {
        path == Path::Fused && x.device().is_cpu() && self.rope().backend() != TableBackend::Generic
    }

    /// [`rotate`](Self::rotate) in one pass on the CPU: every token reads its row of the
    /// `(rows, half)` tables (rows: the sequence's positions, shared by a batch, or one per
    /// token), and its scale, shaped as the rows, from `scale`.
    fn turn_rows(
        &self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        scale: Option<&Tensor>,
    ) -> Result<Tensor> {
        let half = cos.dim(D::Minus1)?;
        let period = cos.elem_count() / half.max(1);
        let scales = match scale {
            Some(s) => Some(s.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?),
            None => None,
        };
        let op = super::rows::RotateRows {
            scales: scales.as_deref(),
            ..self.rows_op(TableRows::Cycle(period))
        };
        op.apply(x, &cos.contiguous()?, &sin.contiguous()?)
    }

    /// A whole f16 or bf16 head turned by f32 tables in one pass on CUDA (`cuda.rs`), with
    /// the table strides of the layout: `(seq, half)` tables shared by the batch, `(batch,
    /// seq, half)` ones, or `(tokens, half)` for `(tokens, heads, d)`; `None` where the kernel
    /// does not take x.
    #[cfg(feature = "cuda")]
    fn turn_on_cuda(
        &self,
        x: &Tensor,
        layout: Layout,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<Option<Tensor>> {
        let half = cos.dim(D::Minus1)?;
        let heads = x.dim(1)?;
        let (seq, tab_b, tab_t) = match (layout, cos.rank()) {
            (Layout::Bhsd { seq, .. }, 2) => (seq, 0, half),
            (Layout::Bhsd { seq, .. }, _) => (seq, seq * half, half),
            (Layout::Thd { .. }, _) => (1, half, 0),
        };
        super::cuda::turn(x, cos, sin, heads, seq, tab_b, tab_t, self.interleaved)
    }

    /// candle-nn's kernels. A `(tokens, heads, d)` input is `(tokens, heads, 1, d)` with
    /// `(tokens, 1, d / 2)` tables: each token a batch of one position (no copy; `rope_thd`
    /// has no interleaved twin).
    fn fused(&self, x: &Tensor, layout: Layout, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let kernel = if self.interleaved { rope_i } else { rope };
        match layout {
            Layout::Bhsd { .. } => kernel(x, cos, sin),
            Layout::Thd { tokens } => {
                let (_, heads, d) = x.dims3()?;
                let half = cos.dim(D::Minus1)?;
                let x4 = x.reshape((tokens, heads, 1, d))?;
                let cos = cos.reshape((tokens, 1, half))?;
                let sin = sin.reshape((tokens, 1, half))?;
                kernel(&x4, &cos, &sin)?.reshape((tokens, heads, d))
            }
        }
    }

    /// The same rotation with broadcast multiplies: `y1 = x1 cos - x2 sin`, `y2 = x1 sin +
    /// x2 cos` for each pair `(x1, x2)` (the two halves, or adjacent features).
    fn slow(&self, x: &Tensor, layout: Layout, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        // Tables shaped to broadcast over the heads axis.
        let spread = |t: &Tensor| match (layout, t.rank()) {
            (Layout::Bhsd { .. }, 2) => t.unsqueeze(0)?.unsqueeze(0),
            _ => t.unsqueeze(1),
        };
        let (cos, sin) = (spread(cos)?, spread(sin)?);
        let half = cos.dim(D::Minus1)?;
        if self.interleaved {
            let mut pairs = x.dims().to_vec();
            pairs.pop();
            pairs.extend([half, 2]);
            let x = x.reshape(pairs)?;
            let (x1, x2) = (x.narrow(D::Minus1, 0, 1)?, x.narrow(D::Minus1, 1, 1)?);
            let (cos, sin) = (cos.unsqueeze(D::Minus1)?, sin.unsqueeze(D::Minus1)?);
            let y1 = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
            let y2 = (x1.broadcast_mul(&sin)? + x2.broadcast_mul(&cos)?)?;
            Tensor::cat(&[y1, y2], D::Minus1)?.flatten_from(D::Minus2)
        } else {
            let (x1, x2) = (
                x.narrow(D::Minus1, 0, half)?,
                x.narrow(D::Minus1, half, half)?,
            );
            let y1 = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
            let y2 = (x1.broadcast_mul(&sin)? + x2.broadcast_mul(&cos)?)?;
            Tensor::cat(&[y1, y2], D::Minus1)
        }
    }
}

/// A factor per position shaped to broadcast over q: `(seq,)` or `(batch, seq)` to
/// `(batch or 1, 1, seq, 1)`, `(tokens,)` to `(tokens, 1, 1)`.
fn spread_scale(scale: &Tensor, layout: Layout) -> Result<Tensor> {
    match layout {
        Layout::Bhsd { seq, .. } => {
            let batch = if scale.rank() == 2 { scale.dim(0)? } else { 1 };
            scale.reshape((batch, 1, seq, 1))
        }
        Layout::Thd { tokens } => scale.reshape((tokens, 1, 1)),
    }
}
