//! [`SinusoidalEncoding`]: a checked spec that builds tables for positions, ids and timesteps on
//! any device, in f32, f16, bf16 or f64.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use pe_core::{PeSpec, SinusoidalEncoding};
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
//! assert_eq!(pe.ids(&ids, DType::BF16)?.dims(), &[2, 3, 512]);
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
//! # Ok::<(), pe_core::Error>(())
//! ```

use std::sync::Arc;

use candle_core::{DType, Device, Tensor};

use crate::freq::Plan;
use crate::positions::{self, Request};
use crate::{cpu, generic, Error, PeSpec, Result};

/// Which generator builds the tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The CPU generator on the CPU device, the generic one elsewhere.
    #[default]
    Auto,
    /// The CPU generator; an error on any other device.
    Cpu,
    /// Candle tensor ops on any device (what runs on CUDA); forced here, it also runs on the CPU.
    Generic,
}

/// A sinusoidal positional encoding, ready to build tables.
#[derive(Clone, Debug)]
pub struct SinusoidalEncoding {
    spec: PeSpec,
    plan: Arc<Plan>,
    backend: Backend,
}

impl SinusoidalEncoding {
    /// Checks `spec` (width, base, scale, odd-width policy, frequency denominators).
    pub fn new(spec: PeSpec) -> Result<Self> {
        Ok(Self {
            plan: Arc::new(Plan::new(&spec)?),
            spec,
            backend: Backend::Auto,
        })
    }

    /// The same encoding built by another generator.
    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The spec this encoding was built from.
    pub fn spec(&self) -> &PeSpec {
        &self.spec
    }

    /// The frequencies and column positions.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The generator in use.
    pub fn backend(&self) -> Backend {
        self.backend
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

    /// The rows for integer position ids of any shape (u8, u32, i16, i32 or i64, each in
    /// `0 .. 2^31`), shape `ids.dims() + [d]`, on the device of `ids`.
    pub fn ids(&self, ids: &Tensor, dtype: DType) -> Result<Tensor> {
        self.build(positions::ids(ids)?, dtype, ids.device())
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

    /// The rows for positions already made padding-aware: like [`Self::ids`], with all-zero
    /// rows where the position is `padding_idx`.
    pub fn padding_rows(
        &self,
        positions: &Tensor,
        padding_idx: u32,
        dtype: DType,
    ) -> Result<Tensor> {
        let request = Request {
            zero_at: Some(padding_idx),
            ..positions::ids(positions)?
        };
        self.build(request, dtype, positions.device())
    }

    /// The rows for fractional timesteps (any numeric dtype, any shape, finite), shape
    /// `timesteps.dims() + [d]`. Exact for `|t| < 2^31`.
    pub fn timesteps(&self, timesteps: &Tensor, dtype: DType) -> Result<Tensor> {
        self.build(positions::timesteps(timesteps)?, dtype, timesteps.device())
    }

    fn build(&self, request: Request, dtype: DType, device: &Device) -> Result<Tensor> {
        build(&self.plan, self.backend, request, dtype, device)
    }
}

/// The table of `plan` for `request` on `device`, shaped `request.lead + [width]`, by the
/// generator `backend` picks; dtype, device and size are checked first.
pub(crate) fn build(
    plan: &Plan,
    backend: Backend,
    request: Request,
    dtype: DType,
    device: &Device,
) -> Result<Tensor> {
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
        return Err(Error::UnsupportedDtype(dtype));
    }
    let (rows, width) = (request.n_rows(), plan.columns().width);
    let use_cpu = match (backend, device) {
        (Backend::Auto | Backend::Cpu, Device::Cpu) => true,
        (Backend::Cpu, other) => return Err(Error::CpuBackendOnDevice(other.location())),
        _ => false,
    };
    // The generic path holds about eight f64 intermediates of (rows, d / 2).
    let working_set = if use_cpu { 0 } else { 4 * 8 * width as u128 };
    check_size(rows, width, dtype, device, working_set)?;
    let table = if rows == 0 {
        Tensor::zeros((0, width), dtype, device)?
    } else if use_cpu {
        cpu::generate(plan, &request, dtype)?
    } else {
        generic::generate(plan, &request, dtype, device)?
    };
    let mut shape = request.lead;
    shape.push(width);
    Ok(table.reshape(shape)?)
}

/// Tables below this size skip the available-memory check.
const SMALL_TABLE_BYTES: u128 = 256 << 20;

/// Fails before allocating when `rows` rows (plus `scratch_per_row` bytes each) cannot fit.
fn check_size(
    rows: usize,
    width: usize,
    dtype: DType,
    device: &Device,
    scratch_per_row: u128,
) -> Result<()> {
    let table = rows as u128 * width as u128 * dtype.size_in_bytes() as u128;
    let needed = table + rows as u128 * scratch_per_row;
    let too_large = |why: String| Error::TooLarge {
        rows,
        width,
        dtype,
        bytes: needed,
        why,
    };
    if needed > isize::MAX as u128 {
        return Err(too_large(format!(
            "that exceeds the largest allocation ({} bytes)",
            isize::MAX
        )));
    }
    // Small tables always fit; reading /proc/meminfo would cost more than building them.
    if device.is_cpu() && needed > SMALL_TABLE_BYTES {
        if let Some(available) = available_memory() {
            if needed > available {
                return Err(too_large(format!(
                    "only {available} bytes of memory are available"
                )));
            }
        }
    }
    Ok(())
}

/// `MemAvailable` from `/proc/meminfo`, where there is one.
fn available_memory() -> Option<u128> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
