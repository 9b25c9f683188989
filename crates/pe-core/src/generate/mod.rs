//! The generators: a checked [`Plan`] and a checked [`Request`] in, a table out.
//!
//! - [`cpu`]: exact anchor rows every [`cpu::ANCHOR_SPAN`] absolute positions, the rows between
//!   by angle addition from an exact offset table, in parallel, each element written once; also
//!   the fused gather-scale-add of an embedding block.
//! - [`kernel`]: the CPU generator's arithmetic in CUDA kernels, with its bits (what runs on
//!   CUDA); on the CPU, their host build, for the tests.
//! - [`generic`]: the same exact math in candle ops, for every device.
//! - [`turn`]: the tables of a shift, the exact turn from one position (and spectrum) to
//!   another ([`Generator::turns`]).
//!
//! Every value depends only on (plan, position, column, dtype): never on the request's offset,
//! length or shape, on what was asked before, or on thread timing.

pub(crate) mod cpu;
pub(crate) mod generic;
pub(crate) mod kernel;
mod turn;

pub(crate) use cpu::RowPositions;

use std::sync::{Mutex, OnceLock};

use candle_core::{DType, Device, Tensor};

use crate::describe::freq::Plan;
use crate::describe::positions::Request;
use crate::{Error, Result};

/// Which generator builds the tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TableBackend {
    /// The CPU generator on the CPU device, the kernels on CUDA, the generic one elsewhere.
    #[default]
    Auto,
    /// The CPU generator; an error on any other device.
    Cpu,
    /// Candle tensor ops on any device; forced here, it also runs on the CPU and on CUDA.
    Generic,
    /// The CUDA kernels of `src/cuda/tables.cu`, with the CPU generator's bits. On the CPU,
    /// their host build, with the `host-kernels` feature (the tests'); an error elsewhere.
    Kernel,
}

/// The generator a request gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Cpu,
    Kernel,
    Generic,
}

/// A plan, the backend that builds its tables, and the CPU generator's offset table (made on
/// first use).
#[derive(Debug)]
pub(crate) struct Generator {
    plan: Plan,
    backend: TableBackend,
    offsets: OnceLock<cpu::Offsets>,
    /// The kernels' frequency input on each device they ran on (with the rope kernel's M-RoPE
    /// axes, when given), uploaded once rather than at every call.
    on_devices: Mutex<Vec<OnDevice>>,
}

/// The kernels' frequency input ([`kernel::frequencies`]) on one device.
#[derive(Debug)]
struct OnDevice {
    device: Device,
    axes: Option<Vec<u32>>,
    w: Tensor,
}

impl Generator {
    pub fn new(plan: Plan, backend: TableBackend) -> Self {
        Self {
            plan,
            backend,
            offsets: OnceLock::new(),
            on_devices: Mutex::new(Vec::new()),
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn backend(&self) -> TableBackend {
        self.backend
    }

    /// Whether `device` gets the CPU generator.
    pub fn uses_cpu(&self, device: &Device) -> Result<bool> {
        Ok(self.route(device)? == Route::Cpu)
    }

    /// Whether `device` gets the kernels (CUDA, or their host build with `TableBackend::Kernel`)
    /// for `rows` rows (the kernels' `u32` counts must hold them).
    pub fn uses_kernels(&self, device: &Device, rows: usize) -> Result<bool> {
        Ok(self.route(device)? == Route::Kernel && kernel::fits(rows))
    }

    /// The generator that builds this backend's tables on `device`.
    fn route(&self, device: &Device) -> Result<Route> {
        let kernels = device.is_cuda() || cfg!(feature = "host-kernels") && device.is_cpu();
        match (self.backend, device) {
            (TableBackend::Auto | TableBackend::Cpu, Device::Cpu) => Ok(Route::Cpu),
            (TableBackend::Cpu, other) => Err(Error::CpuBackendOnDevice(other.location())),
            (TableBackend::Auto, other) if other.is_cuda() => Ok(Route::Kernel),
            (TableBackend::Kernel, _) if kernels => Ok(Route::Kernel),
            (TableBackend::Kernel, other) => Err(Error::KernelsUnavailable(other.location())),
            _ => Ok(Route::Generic),
        }
    }

    /// The route for `request`: the kernels' `u32` counts must hold it, else the generic ops.
    fn route_for(&self, request: &Request, device: &Device) -> Result<Route> {
        Ok(match self.route(device)? {
            Route::Kernel if !kernel::fits(request.n_rows()) => Route::Generic,
            route => route,
        })
    }

    pub fn offsets(&self) -> &cpu::Offsets {
        self.offsets.get_or_init(|| cpu::Offsets::new(&self.plan))
    }

    /// The plan's frequencies on `device` as the kernels read them ([`kernel::frequencies`]),
    /// uploaded on first use and kept.
    fn frequencies_on(&self, device: &Device, axes: Option<&[u32]>) -> Result<Tensor> {
        let mut kept = self.on_devices.lock().unwrap_or_else(|e| e.into_inner());
        let found = kept
            .iter()
            .find(|k| k.device.same_device(device) && k.axes.as_deref() == axes);
        if let Some(k) = found {
            return Ok(k.w.clone());
        }
        let w = kernel::frequencies(&self.plan, axes, device)?;
        kept.push(OnDevice {
            device: device.clone(),
            axes: axes.map(<[u32]>::to_vec),
            w: w.clone(),
        });
        Ok(w)
    }

    /// The table for `request` on `device`, shaped `request.lead + [width]`; dtype, angles,
    /// device and size are checked before anything is allocated.
    pub fn table(&self, request: &Request, dtype: DType, device: &Device) -> Result<Tensor> {
        check_dtype(dtype)?;
        self.plan.check_angles(request.largest)?;
        let (rows, width) = (request.n_rows(), self.plan.columns().width);
        let route = self.route_for(request, device)?;
        check_size(rows, width, dtype, device, working_set(route, width))?;
        let table = match route {
            _ if rows == 0 => Tensor::zeros((0, width), dtype, device)?,
            Route::Cpu => cpu::table(self, request, dtype)?,
            Route::Kernel => {
                let w = self.frequencies_on(device, None)?;
                kernel::table(&self.plan, &w, request, dtype)?
            }
            Route::Generic => generic::table(&self.plan, request, dtype, device)?,
        };
        let mut shape = request.lead.clone();
        shape.push(width);
        Ok(table.reshape(shape)?)
    }
}

impl Generator {
    /// `(cos, sin)` of a cos|sin plan (the rotary tables) for `request` on `device`, each
    /// shaped `request.lead + [width / 2]` and contiguous, written directly: by the CPU
    /// generator in one parallel pass, by the generic one as two half-width tables (no combined
    /// table, no copies). The bits are those of the two halves of [`Self::table`].
    pub fn halves(
        &self,
        request: &Request,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let cols = *self.plan.columns();
        debug_assert!(cols.layout == crate::ColumnLayout::CosSin && cols.n_sin == cols.n_cos);
        let h = cols.width / 2;
        check_dtype(dtype)?;
        self.plan.check_angles(request.largest)?;
        let (rows, route) = (request.n_rows(), self.route_for(request, device)?);
        check_size(
            rows,
            cols.width,
            dtype,
            device,
            working_set(route, cols.width),
        )?;
        let (cos, sin) = if rows == 0 {
            let empty = Tensor::zeros((0, h), dtype, device)?;
            (empty.clone(), empty)
        } else if route == Route::Cpu {
            cpu::halves(self, request, dtype)?
        } else if route == Route::Kernel {
            let w = self.frequencies_on(device, None)?;
            kernel::halves(&self.plan, &w, request, dtype)?
        } else {
            // A cos|sin layout of width h with h cosines is all cosines; with none, all sines.
            let half = |n_cos: usize| {
                let columns = crate::describe::freq::Columns {
                    width: h,
                    n_sin: h,
                    n_cos,
                    ..cols
                };
                generic::table(&self.plan.with_columns(columns), request, dtype, device)
            };
            (half(h)?, half(0)?)
        };
        let mut shape = request.lead.clone();
        shape.push(h);
        Ok((cos.reshape(shape.clone())?, sin.reshape(shape)?))
    }
}

impl Generator {
    /// `embedding_scale * weights[tokens[r]] + PE(position of row r)` for every token `r`,
    /// shape `(tokens.len(), width)`, in the dtype of `weights`, by the CPU generator in one
    /// pass (the fused embedding block). The caller has checked the tokens, the positions and
    /// that `device` gets the CPU generator.
    pub fn embed(
        &self,
        weights: &Tensor,
        tokens: &[usize],
        positions: RowPositions<'_>,
        zero_at: Option<u32>,
        embedding_scale: f64,
    ) -> Result<Tensor> {
        cpu::embed(self, weights, tokens, positions, zero_at, embedding_scale)
    }

    /// The same block by the kernels, in one launch on the weights' device: `tokens` flat, on
    /// that device, checked below the vocabulary, with a position for each.
    pub fn embed_kernel(
        &self,
        weights: &Tensor,
        tokens: &Tensor,
        rows: kernel::TokenRows,
        zero_at: Option<u32>,
        embedding_scale: f64,
    ) -> Result<Tensor> {
        let w = self.frequencies_on(weights.device(), None)?;
        kernel::embed(
            &self.plan,
            &w,
            weights,
            tokens,
            rows,
            zero_at,
            embedding_scale,
        )
    }

    /// Rope without tables by the rope kernel ([`kernel::rope`]) on x's device: x turned at
    /// `rows`, and k beside it in the same launch, each pair at the position row `axes` gives
    /// it with M-RoPE. The caller has checked the positions against x, the angles, and that
    /// the kernels take this many tokens.
    pub fn rope(
        &self,
        xs: (&Tensor, Option<&Tensor>),
        rows: kernel::TokenRows,
        axes: Option<&[u32]>,
        interleaved: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let w = self.frequencies_on(xs.0.device(), axes)?;
        kernel::rope(&self.plan, &w, xs, rows, axes.is_some(), interleaved, false)
    }

    /// A shift in this spectrum by the rope kernel on k's device ([`kernel::rope`] turning):
    /// each token of k turned by the exact angle of its distance `to - from` in `distances`
    /// (each pair by the distance of the row `axes` gives it with M-RoPE), with the bits of
    /// the shift tables of [`turns`](Self::turns) in one spectrum, in one launch and without
    /// them. The caller has checked the distances against k, the angles, and that the kernels
    /// take this many tokens.
    pub fn shift(
        &self,
        k: &Tensor,
        distances: kernel::TokenRows,
        axes: Option<&[u32]>,
        interleaved: bool,
    ) -> Result<Tensor> {
        let w = self.frequencies_on(k.device(), axes)?;
        let mrope = axes.is_some();
        let (k, _) = kernel::rope(
            &self.plan,
            &w,
            (k, None),
            distances,
            mrope,
            interleaved,
            true,
        )?;
        Ok(k)
    }
}

/// The bytes per row a route holds besides the table: the generic path up to three full-size
/// intermediates in f32 or f64, the kernels at most one anchor row in f64 (a request of
/// positions).
fn working_set(route: Route, width: usize) -> u128 {
    match route {
        Route::Cpu => 0,
        Route::Kernel => 8 * width as u128,
        Route::Generic => 3 * 8 * width as u128,
    }
}

/// `values` shaped `shape` on the CPU, each rounded once to `dtype`: f16 and bf16 as the CPU
/// generator rounds its tables, by [`round`](crate::exact::round) (candle's cast rounds them
/// through the `half` crate, which misrounds some).
pub(crate) fn host_table(
    values: Vec<f64>,
    shape: impl Into<candle_core::Shape>,
    dtype: DType,
) -> Result<Tensor> {
    /// Each value rounded as the CPU generator rounds its own (`Element::from_acc`).
    fn rounded<T: cpu::Element<Acc = f64>>(
        values: &[f64],
        shape: candle_core::Shape,
    ) -> Result<Tensor> {
        let values: Vec<T> = values.iter().map(|&v| T::from_acc(v)).collect();
        Ok(Tensor::from_vec(values, shape, &Device::Cpu)?)
    }
    let shape = shape.into();
    match dtype {
        DType::F16 => rounded::<half::f16>(&values, shape),
        DType::BF16 => rounded::<half::bf16>(&values, shape),
        _ => Ok(Tensor::from_vec(values, shape, &Device::Cpu)?.to_dtype(dtype)?),
    }
}

/// The dtype a table of `dtype` is combined in: f32 for f32, f64 otherwise (f32 carries an
/// absolute error of a few 1e-7, more than one f16 / bf16 ulp near zero).
pub(crate) fn work_dtype(dtype: DType) -> DType {
    if dtype == DType::F32 {
        DType::F32
    } else {
        DType::F64
    }
}

/// `rows` (`positions.dims() + [width]`) with each row at position `pad` all +0.0, as the
/// generators write it: selected, not multiplied by a mask, whose zeros would turn a row's
/// negative values into -0.0.
pub(crate) fn zero_rows_at(rows: &Tensor, positions: &Tensor, pad: u32) -> Result<Tensor> {
    let keep = positions
        .ne(f64::from(pad))?
        .unsqueeze(candle_core::D::Minus1)?
        .broadcast_as(rows.shape())?;
    let zero = Tensor::zeros((), rows.dtype(), rows.device())?.broadcast_as(rows.shape())?;
    Ok(keep.where_cond(rows, &zero)?)
}

/// Fails for an output dtype other than f32, f16, bf16 or f64.
pub(crate) fn check_dtype(dtype: DType) -> Result<()> {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 => Ok(()),
        other => Err(Error::UnsupportedDtype(other)),
    }
}

/// Tables below this size skip the available-memory check.
const SMALL_TABLE_BYTES: u128 = 256 << 20;

/// Fails before allocating when `rows` rows (plus `scratch_per_row` bytes each) cannot fit.
pub(crate) fn check_size(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::positions;
    use crate::exact::dd::Dd;
    use candle_core::D;

    /// The kernels' frequency input is uploaded once per device (and per set of M-RoPE axes),
    /// then reused: the same tensor, so the same bits, at every later call.
    #[cfg(feature = "host-kernels")]
    #[test]
    fn the_kernels_frequencies_are_uploaded_once_per_device() -> Result<()> {
        let w: Vec<Dd> = (0..4).map(|i| Dd::from(0.5f64.powi(i))).collect();
        let generator = Generator::new(Plan::from_frequencies(&w, 1.0)?, TableBackend::Kernel);
        let dev = Device::Cpu;
        let x = Tensor::arange(0f32, 3.0 * 8.0, &dev)?.reshape((3, 1, 8))?;
        let at = |start| kernel::TokenRows::Repeat { start, period: 3 };
        let first = generator.rope((&x, None), at(5), None, false)?.0;
        let again = generator.rope((&x, None), at(5), None, false)?.0;
        assert_eq!(generator.on_devices.lock().unwrap().len(), 1);
        let (a, b) = (
            first.flatten_all()?.to_vec1::<f32>()?,
            again.flatten_all()?.to_vec1::<f32>()?,
        );
        assert_eq!(a, b);
        generator.rope((&x, None), at(9), Some(&[0, 1, 2, 2]), false)?;
        generator.table(&positions::range(0, 10)?, DType::F32, &dev)?;
        assert_eq!(generator.on_devices.lock().unwrap().len(), 2);
        Ok(())
    }

    /// The rotary halves written directly are the bits of the two halves of the combined table
    /// (their plain twin), on both generators, for ranges and ids, every dtype, with the
    /// attention factor.
    #[test]
    fn halves_are_the_halves_of_the_table() -> Result<()> {
        let w: Vec<Dd> = (0..24).map(|i| Dd::from(0.9f64.powi(i) * 1.3)).collect();
        let plan = Plan::from_frequencies(&w, 1.1)?;
        let dev = Device::Cpu;
        for backend in [TableBackend::Cpu, TableBackend::Generic] {
            let generator = Generator::new(plan.clone(), backend);
            let ids = Tensor::new(&[[5u32, 900, 64], [63, 0, 4096]], &dev)?;
            for request in [
                positions::range(0, 1000)?,
                positions::range(77, 3)?,
                positions::range(1 << 30, 200)?,
                positions::ids(&positions::Positions::new(&ids)?)?,
            ] {
                for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
                    let (cos, sin) = generator.halves(&request, dtype, &dev)?;
                    let table = generator.table(&request, dtype, &dev)?;
                    let want_cos = table.narrow(D::Minus1, 0, 24)?;
                    let want_sin = table.narrow(D::Minus1, 24, 24)?;
                    for (got, want) in [(cos, want_cos), (sin, want_sin)] {
                        assert_eq!(got.dims(), want.dims());
                        let got = got.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
                        let want = want.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
                        assert!(got
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits()));
                    }
                }
            }
        }
        Ok(())
    }
}
