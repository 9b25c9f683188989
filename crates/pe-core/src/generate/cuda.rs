//! The generic generator's last step on CUDA in one pass (`cuda/combine.cu`, compiled to PTX
//! by `build.rs`): each row of a block is `x1 * y1 + x2 * y2` of its anchor's factors and its
//! offset's, with each product and the sum rounded as candle's broadcast multiplies and add
//! round them. The same bits as those three full-size passes, written once. The plain twin is
//! [`generic::blocks_table`](super::generic)'s candle ops, which run everywhere else and which
//! the GPU check holds it to.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaSlice, CudaView, DeviceRepr, LaunchConfig, PushKernelArg,
};
use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
use candle_core::{
    bail, CpuStorage, CudaDevice, CudaStorage, CustomOp2, DType, Layout, Shape, Tensor, WithDType,
};

use crate::Result;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/combine.ptx"));

/// The rows of every block, `(anchors * span, width)`, from the anchor factors `x1`, `x2`
/// (`(anchors, width)`) and the offset factors `y1`, `y2` (`(span, width)`), all f32 or all
/// f64; `None` off CUDA or past the kernel's 32-bit indices.
pub(crate) fn combine(
    x1: &Tensor,
    x2: &Tensor,
    y1: &Tensor,
    y2: &Tensor,
) -> Result<Option<Tensor>> {
    let fits = x1.device().is_cuda()
        && matches!(x1.dtype(), DType::F32 | DType::F64)
        && x1.elem_count() * y1.dim(0)? < u32::MAX as usize;
    if !fits {
        return Ok(None);
    }
    let x = Tensor::stack(&[x1, x2], 0)?;
    let y = Tensor::stack(&[y1, y2], 0)?;
    Ok(Some(x.apply_op2_no_bwd(&y, &Combine)?))
}

struct Combine;

fn part<'a, T>(slice: &'a CudaSlice<T>, layout: &Layout) -> candle_core::Result<CudaView<'a, T>> {
    match layout.contiguous_offsets() {
        Some((a, b)) => Ok(slice.slice(a..b)),
        None => bail!("pe-combine: the factors must be contiguous"),
    }
}

impl Combine {
    fn launch<T: DeviceRepr + WithDType>(
        name: &str,
        (x, lx): (&CudaSlice<T>, &Layout),
        (y, ly): (&CudaSlice<T>, &Layout),
        dev: &CudaDevice,
    ) -> candle_core::Result<(CudaSlice<T>, Shape)> {
        let (_, anchors, width) = lx.shape().dims3()?;
        let (_, span, _) = ly.shape().dims3()?;
        let (x, y) = (part(x, lx)?, part(y, ly)?);
        let n = anchors * span * width;
        let func = dev.get_or_load_custom_func(name, "candle_pe_combine", PTX)?;
        // SAFETY: every element is written by the kernel below.
        let out = unsafe { dev.alloc::<T>(n)? };
        let mut builder = func.builder();
        builder.arg(&x);
        builder.arg(&y);
        builder.arg(&out);
        candle_core::builder_arg!(builder, anchors as u32, span as u32, width as u32);
        // SAFETY: the kernel reads within x (2 * anchors * width) and y (2 * span * width), and
        // writes each of the n elements of out once.
        unsafe { builder.launch(LaunchConfig::for_num_elems(n as u32)) }.w()?;
        Ok((out, Shape::from((anchors * span, width))))
    }
}

impl CustomOp2 for Combine {
    fn name(&self) -> &'static str {
        "pe-combine"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        bail!("pe-combine is the CUDA kernel; elsewhere the candle ops build the blocks")
    }

    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        lx: &Layout,
        y: &CudaStorage,
        ly: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let dev = x.device();
        let (slice, shape) = match (&x.slice, &y.slice) {
            (CudaStorageSlice::F32(x), CudaStorageSlice::F32(y)) => {
                let (out, shape) = Self::launch("pe_combine_f32", (x, lx), (y, ly), dev)?;
                (CudaStorageSlice::F32(out), shape)
            }
            (CudaStorageSlice::F64(x), CudaStorageSlice::F64(y)) => {
                let (out, shape) = Self::launch("pe_combine_f64", (x, lx), (y, ly), dev)?;
                (CudaStorageSlice::F64(out), shape)
            }
            _ => bail!("pe-combine: the factors must be all f32 or all f64"),
        };
        let out = CudaStorage {
            slice,
            device: dev.clone(),
        };
        Ok((out, shape))
    }
}
