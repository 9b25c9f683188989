//! [`SinusoidalEncoding`]: a checked spec that builds tables for positions, ids and timesteps on
//! any device, in f32, f16, bf16 or f64.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_core::{PeSpec, SinusoidalEncoding};
//!
//! let dev = Device::Cpu;
//! let pe = SinusoidalEncoding::new(PeSpec::fairseq(512))?;
//!
//! // A contiguous range: positions 10 .. 14.
//! let table = pe.range(10, 4, DType::F32, &dev)?;
//! assert_eq!(table.dims(), &[4, 512]);
//!
//! // Explicit ids of any shape, e.g. (batch, seq).
//! let ids = Tensor::new(&[[0u32, 1, 2], [7, 8, 9]], &dev)?;
//! assert_eq!(pe.at(&ids, DType::BF16)?.dims(), &[2, 3, 512]);
//!
//! // fairseq / M2M100 padding-aware positions (pad = 1): pad tokens get an all-zero row.
//! let tokens = Tensor::new(&[[5u32, 6, 1], [1, 9, 10]], &dev)?;
//! let pe_tokens = pe.padding_aware(&tokens, 1, 0, DType::F32)?;
//! assert_eq!(pe_tokens.get(1)?.get(0)?.abs()?.sum_all()?.to_scalar::<f32>()?, 0.0);
//!
//! // Fractional diffusion timesteps.
//! let sd = SinusoidalEncoding::new(PeSpec::stable_diffusion(320))?;
//! let t = Tensor::new(&[0.5f32, 999.0], &dev)?;
//! assert_eq!(sd.timesteps(&t, DType::F16)?.dims(), &[2, 320]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use std::sync::Arc;

use candle_core::{DType, Device, Tensor};

use crate::describe::freq::{Column, Plan};
use crate::describe::positions::{self, Request, ToPositions};
use crate::generate::{Generator, TableBackend};
use crate::{PeSpec, Result};

/// A sinusoidal positional encoding, ready to build tables.
#[derive(Clone, Debug)]
pub struct SinusoidalEncoding {
    spec: PeSpec,
    generator: Arc<Generator>,
}

impl SinusoidalEncoding {
    /// Checks `spec` (width, base, scale, odd-width policy, frequency denominators, and that
    /// every frequency is below [`MAX_ANGLE`](crate::MAX_ANGLE)).
    pub fn new(spec: PeSpec) -> Result<Self> {
        let generator = Generator::new(Plan::new(&spec)?, TableBackend::Auto);
        Ok(Self {
            spec,
            generator: Arc::new(generator),
        })
    }

    /// The same encoding built by another generator.
    pub fn with_backend(self, backend: TableBackend) -> Self {
        let plan = self.generator.plan().clone();
        Self {
            generator: Arc::new(Generator::new(plan, backend)),
            ..self
        }
    }

    /// The spec this encoding was built from.
    pub fn spec(&self) -> &PeSpec {
        &self.spec
    }

    /// The angular frequency of each sin/cos pair, `w_0` first, rounded to f64 (the tables
    /// use them to double-double precision).
    pub fn frequencies(&self) -> Vec<f64> {
        self.generator
            .plan()
            .frequencies()
            .iter()
            .map(|w| w.value())
            .collect()
    }

    /// What column `col` of a row holds (`None` past the width): which pair's sine or cosine,
    /// or the zero column of a zero-padded odd width.
    pub fn column(&self, col: usize) -> Option<Column> {
        let columns = self.generator.plan().columns();
        (col < columns.width).then(|| columns.role(col))
    }

    /// The generator in use.
    pub fn backend(&self) -> TableBackend {
        self.generator.backend()
    }

    pub(crate) fn generator(&self) -> &Generator {
        &self.generator
    }

    /// The number of columns, `d`.
    pub fn width(&self) -> usize {
        self.spec.width
    }

    /// The rows for positions `offset .. offset + len`, shape `(len, d)`.
    pub fn range(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        self.build(positions::range(offset, len)?, dtype, device)
    }

    /// The rows for integer positions of any shape (u8, u32, i16, i32 or i64, each in
    /// `0 .. 2^31`; a tensor or [`Positions`](crate::Positions)), shape
    /// `positions.dims() + [d]`, on the device of `positions`.
    pub fn at(&self, positions: &impl ToPositions, dtype: DType) -> Result<Tensor> {
        let positions = positions.to_positions()?;
        self.build(positions::ids(&positions)?, dtype, positions.device())
    }

    /// fairseq / HF M2M100 positions computed from `tokens` (see
    /// [`padding_aware_positions`](crate::padding_aware_positions)), with the all-zero row at
    /// pad tokens; `past` is the number of tokens already in the KV cache.
    pub fn padding_aware(
        &self,
        tokens: &Tensor,
        padding_idx: u32,
        past: usize,
        dtype: DType,
    ) -> Result<Tensor> {
        let positions = positions::padding_aware_positions(tokens, padding_idx, past)?;
        self.padding_rows(&positions, padding_idx, dtype)
    }

    /// The rows for positions already made padding-aware: like [`Self::at`], with all-zero
    /// rows where the position is `padding_idx`.
    pub fn padding_rows(
        &self,
        positions: &impl ToPositions,
        padding_idx: u32,
        dtype: DType,
    ) -> Result<Tensor> {
        let positions = positions.to_positions()?;
        let request = Request {
            zero_at: Some(padding_idx),
            ..positions::ids(&positions)?
        };
        self.build(request, dtype, positions.device())
    }

    /// The rows for fractional timesteps (any numeric dtype, any shape, each finite and below
    /// `2^31` in magnitude), shape `timesteps.dims() + [d]`.
    pub fn timesteps(&self, timesteps: &Tensor, dtype: DType) -> Result<Tensor> {
        self.build(positions::timesteps(timesteps)?, dtype, timesteps.device())
    }

    fn build(&self, request: Request, dtype: DType, device: &Device) -> Result<Tensor> {
        self.generator.table(&request, dtype, device)
    }
}
