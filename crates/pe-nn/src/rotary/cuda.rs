//! The one-pass rotation of f16 and bf16 queries and keys by f32 tables on CUDA
//! (`turn.cu` of candle-pe-core's kernels folder, `src/cuda/`, loaded through its
//! [`TURN`] module): each pair is widened to f32, turned with
//! candle-nn's formula and order without fused multiply-adds, and rounded once, the CPU's
//! arithmetic. Without it a half-precision input is widened to f32 by a copy, turned by
//! candle-nn's f32 kernel and narrowed by another copy: three passes over q and k where one
//! will do. The plain twin is [`RotaryEmbedding::rotate`](crate::RotaryEmbedding)'s slow path,
//! which the GPU check holds it to.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, DeviceRepr, PushKernelArg};
use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
use candle_core::{
    bail, CpuStorage, CudaDevice, CudaStorage, CustomOp3, DType, Layout, Result, Shape, Tensor,
    WithDType,
};
use candle_pe_core::cuda::{grid, part, TURN};

/// x `(rows, 2 * half)` with rows = batch * heads * seq, turned by the table row at
/// `b * tab_b + t * tab_t` for its batch `b` and position `t`.
struct Turn {
    heads: usize,
    seq: usize,
    tab_b: usize,
    tab_t: usize,
    interleaved: bool,
}

/// `x` turned in one pass, where the kernel takes it: a contiguous f16 or bf16 x on a CUDA
/// device, contiguous f32 tables, fewer than 2^32 pairs. `heads` and `seq` are x's, the table
/// row of batch `b` and position `t` starts at `b * tab_b + t * tab_t`. `None` elsewhere.
#[allow(clippy::too_many_arguments)]
pub(crate) fn turn(
    x: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    heads: usize,
    seq: usize,
    tab_b: usize,
    tab_t: usize,
    interleaved: bool,
) -> Result<Option<Tensor>> {
    let fits = x.device().is_cuda()
        && matches!(x.dtype(), DType::F16 | DType::BF16)
        && cos.dtype() == DType::F32
        && sin.dtype() == DType::F32
        && x.is_contiguous()
        && x.elem_count() / 2 < u32::MAX as usize
        && cos.elem_count() < u32::MAX as usize;
    if !fits {
        return Ok(None);
    }
    let (cos, sin) = (cos.contiguous()?, sin.contiguous()?);
    let op = Turn {
        heads,
        seq,
        tab_b,
        tab_t,
        interleaved,
    };
    Ok(Some(x.apply_op3_no_bwd(&cos, &sin, &op)?))
}

impl Turn {
    fn launch<T: DeviceRepr + WithDType>(
        &self,
        name: &str,
        x: &CudaSlice<T>,
        lx: &Layout,
        (cos, lc): (&CudaSlice<f32>, &Layout),
        (sin, ls): (&CudaSlice<f32>, &Layout),
        dev: &CudaDevice,
    ) -> Result<CudaSlice<T>> {
        let (x, cos, sin) = (
            part(x, lx, "x")?,
            part(cos, lc, "cos")?,
            part(sin, ls, "sin")?,
        );
        let el = lx.shape().elem_count();
        let d = lx.shape().dims().last().copied().unwrap_or(0);
        let (pairs, half) = (el / 2, d / 2);
        let func = TURN.function(dev, name)?;
        // SAFETY: every element is written by the kernel below.
        let y = unsafe { dev.alloc::<T>(el)? };
        let stream = dev.cuda_stream();
        let mut builder = stream.launch_builder(&func);
        builder.arg(&x);
        builder.arg(&cos);
        builder.arg(&sin);
        builder.arg(&y);
        candle_core::builder_arg!(
            builder,
            pairs as u32,
            self.heads as u32,
            self.seq as u32,
            half as u32,
            self.tab_b as u32,
            self.tab_t as u32,
            self.interleaved as u32
        );
        // SAFETY: the kernel reads `pairs` pairs of x and the table rows the checks above
        // bound, and writes each element of y once.
        unsafe { builder.launch(grid(pairs as u64)) }.w()?;
        Ok(y)
    }
}

impl CustomOp3 for Turn {
    fn name(&self) -> &'static str {
        "pe-turn"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        bail!("pe-turn is the CUDA kernel; the CPU turns rows with its own one-pass loop")
    }

    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        lx: &Layout,
        cos: &CudaStorage,
        lc: &Layout,
        sin: &CudaStorage,
        ls: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let dev = x.device();
        let (cos, sin) = match (&cos.slice, &sin.slice) {
            (CudaStorageSlice::F32(c), CudaStorageSlice::F32(s)) => (c, s),
            _ => bail!("pe-turn: the tables must be f32"),
        };
        let slice = match &x.slice {
            CudaStorageSlice::BF16(x) => CudaStorageSlice::BF16(self.launch(
                "pe_turn_bf16",
                x,
                lx,
                (cos, lc),
                (sin, ls),
                dev,
            )?),
            CudaStorageSlice::F16(x) => CudaStorageSlice::F16(self.launch(
                "pe_turn_f16",
                x,
                lx,
                (cos, lc),
                (sin, ls),
                dev,
            )?),
            _ => bail!("pe-turn: x must be f16 or bf16, got {:?}", x.dtype()),
        };
        let y = CudaStorage {
            slice,
            device: dev.clone(),
        };
        Ok((y, lx.shape().clone()))
    }
}
