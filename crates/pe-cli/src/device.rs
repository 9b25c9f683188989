//! The `--dtype` and `--device` flags and the candle types they stand for.

use anyhow::Context;
use candle_core::{DType, Device};
use clap::ValueEnum;

/// `--dtype` values: the element types an encoding table can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DtypeArg {
    /// 32-bit float.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
    /// 64-bit float.
    F64,
}

impl From<DtypeArg> for DType {
    fn from(arg: DtypeArg) -> Self {
        match arg {
            DtypeArg::F32 => DType::F32,
            DtypeArg::F16 => DType::F16,
            DtypeArg::Bf16 => DType::BF16,
            DtypeArg::F64 => DType::F64,
        }
    }
}

/// `--device` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DeviceArg {
    /// The CPU.
    Cpu,
    /// The first CUDA GPU (needs a build with the `cuda` feature).
    Cuda,
}

impl DeviceArg {
    /// Opens the device, or says why it cannot be used.
    pub fn open(self) -> anyhow::Result<Device> {
        match self {
            DeviceArg::Cpu => Ok(Device::Cpu),
            DeviceArg::Cuda if !cfg!(feature = "cuda") => anyhow::bail!(
                "--device cuda: this pe was built without CUDA support; rebuild it with \
                 `cargo build -p candle-pe-cli --release --features cuda`, or use --device cpu"
            ),
            DeviceArg::Cuda => Device::new_cuda(0)
                .context("--device cuda: no usable CUDA GPU (device 0); use --device cpu"),
        }
    }
}
