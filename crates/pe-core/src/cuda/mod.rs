//! The workspace's one home for CUDA: every kernel is a `.cu` file of this folder, which
//! `build.rs` compiles to PTX (nvcc, `--fmad=false`, compute 7.5) into a `Ptx` constant named
//! after the file (`tables.cu` is `TABLES`), with one loader (`Ptx::function`) and one
//! launch shape (`grid`). A kernel's per-element math lives in `.cuh` headers of
//! `__host__ __device__` functions (`exact.cuh`, `tables.cuh`, `rope.cuh`), which `host.cpp`
//! also builds for the host (the `host-kernels` feature, `host`), so that `cargo test` runs the
//! kernels' arithmetic without a GPU and holds it to the CPU engine bit for bit.
//!
//! Not a public API: candle-pe-nn launches its rotation kernel (`turn.cu`) through it.

#[cfg(feature = "cuda")]
mod device {
    use candle_core::cuda_backend::cudarc::driver::{
        CudaFunction, CudaSlice, CudaView, LaunchConfig,
    };
    use candle_core::{bail, CudaDevice, Layout, Result};

    /// One PTX module, compiled by `build.rs` from a `.cu` file of `src/cuda/`.
    #[derive(Clone, Copy, Debug)]
    pub struct Ptx {
        /// The module's name in candle's cache of loaded modules.
        pub module: &'static str,
        /// The PTX text.
        pub text: &'static str,
    }

    impl Ptx {
        /// Kernel `name` of this module on `dev`, loaded on first use; launch it on
        /// `dev.cuda_stream()` with [`grid`].
        pub fn function(&self, dev: &CudaDevice, name: &str) -> Result<CudaFunction> {
            Ok(dev
                .get_or_load_custom_func(name, self.module, self.text)?
                .into_cuda_function())
        }
    }

    /// The contiguous part of `slice` that `layout` covers (`what` names it in the error).
    pub fn part<'a, T>(
        slice: &'a CudaSlice<T>,
        layout: &Layout,
        what: &str,
    ) -> Result<CudaView<'a, T>> {
        match layout.contiguous_offsets() {
            Some((a, b)) => Ok(slice.slice(a..b)),
            None => bail!("candle-pe kernel: {what} must be contiguous"),
        }
    }

    /// Threads for `n` items: one each up to 2^16 blocks of 256, a grid-stride loop beyond.
    pub fn grid(n: u64) -> LaunchConfig {
        const THREADS: u64 = 256;
        let blocks = n.div_ceil(THREADS).clamp(1, 1 << 16);
        LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (THREADS as u32, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    include!(concat!(env!("OUT_DIR"), "/ptx.rs"));
}

#[cfg(feature = "cuda")]
pub use device::*;

/// The host build of `tables.cu`'s and `rope.cu`'s kernels (`host.cpp`): the same functions of
/// `tables.cuh` and `rope.cuh`, looped over the kernels' indices. The argument structs are
/// those headers'.
#[cfg(feature = "host-kernels")]
pub(crate) mod host {
    use super::{FactorArgs, RopeArgs, RowArgs, TurnArgs};

    extern "C" {
        pub fn pe_host_factors_f32(
            f: &FactorArgs,
            w: *const f64,
            values: *const f64,
            out: *mut f32,
            backward: u32,
        );
        pub fn pe_host_factors_f64(
            f: &FactorArgs,
            w: *const f64,
            values: *const f64,
            out: *mut f64,
            backward: u32,
        );
        pub fn pe_host_rows_f32(
            t: &RowArgs,
            rows: u64,
            anchors: *const f32,
            offsets: *const f32,
            values: *const f64,
            out: *mut f32,
            backward: u32,
        );
        pub fn pe_host_rows_f64(
            t: &RowArgs,
            rows: u64,
            anchors: *const f64,
            offsets: *const f64,
            values: *const f64,
            out: *mut f64,
            backward: u32,
        );
        pub fn pe_host_rows_f16(
            t: &RowArgs,
            rows: u64,
            anchors: *const f64,
            offsets: *const f64,
            values: *const f64,
            out: *mut u16,
            backward: u32,
        );
        pub fn pe_host_rows_bf16(
            t: &RowArgs,
            rows: u64,
            anchors: *const f64,
            offsets: *const f64,
            values: *const f64,
            out: *mut u16,
            backward: u32,
        );
        pub fn pe_host_embed_f32(
            t: &RowArgs,
            rows: u64,
            anchors: *const f32,
            offsets: *const f32,
            info: *const f64,
            weights: *const f32,
            out: *mut f32,
            backward: u32,
        );
        pub fn pe_host_embed_f64(
            t: &RowArgs,
            rows: u64,
            anchors: *const f64,
            offsets: *const f64,
            info: *const f64,
            weights: *const f64,
            out: *mut f64,
            backward: u32,
        );
        pub fn pe_host_embed_f16(
            t: &RowArgs,
            rows: u64,
            anchors: *const f64,
            offsets: *const f64,
            info: *const f64,
            weights: *const u16,
            out: *mut u16,
            backward: u32,
        );
        pub fn pe_host_embed_bf16(
            t: &RowArgs,
            rows: u64,
            anchors: *const f64,
            offsets: *const f64,
            info: *const f64,
            weights: *const u16,
            out: *mut u16,
            backward: u32,
        );
        pub fn pe_host_turns_f32(
            t: &TurnArgs,
            w_old: *const f64,
            w_new: *const f64,
            keys: *const f64,
            axis: *const u32,
            out: *mut f32,
            backward: u32,
        );
        pub fn pe_host_turns_f64(
            t: &TurnArgs,
            w_old: *const f64,
            w_new: *const f64,
            keys: *const f64,
            axis: *const u32,
            out: *mut f64,
            backward: u32,
        );
        pub fn pe_host_turns_f16(
            t: &TurnArgs,
            w_old: *const f64,
            w_new: *const f64,
            keys: *const f64,
            axis: *const u32,
            out: *mut u16,
            backward: u32,
        );
        pub fn pe_host_turns_bf16(
            t: &TurnArgs,
            w_old: *const f64,
            w_new: *const f64,
            keys: *const f64,
            axis: *const u32,
            out: *mut u16,
            backward: u32,
        );
        pub fn pe_host_rope_f32(
            r: &RopeArgs,
            tokens: u64,
            w: *const f64,
            values: *const f64,
            x: *const f32,
            xk: *const f32,
            y: *mut f32,
            backward: u32,
        );
        pub fn pe_host_rope_f64(
            r: &RopeArgs,
            tokens: u64,
            w: *const f64,
            values: *const f64,
            x: *const f64,
            xk: *const f64,
            y: *mut f64,
            backward: u32,
        );
        pub fn pe_host_rope_f16(
            r: &RopeArgs,
            tokens: u64,
            w: *const f64,
            values: *const f64,
            x: *const u16,
            xk: *const u16,
            y: *mut u16,
            backward: u32,
        );
        pub fn pe_host_rope_bf16(
            r: &RopeArgs,
            tokens: u64,
            w: *const f64,
            values: *const f64,
            x: *const u16,
            xk: *const u16,
            y: *mut u16,
            backward: u32,
        );
        #[cfg(test)]
        pub fn pe_host_round_f16(v: f64) -> u16;
        #[cfg(test)]
        pub fn pe_host_round_bf16(v: f64) -> u16;
        #[cfg(test)]
        pub fn pe_host_round32_f16(v: f32) -> u16;
        #[cfg(test)]
        pub fn pe_host_round32_bf16(v: f32) -> u16;
        #[cfg(test)]
        pub fn pe_host_widen32_f16(h: u16) -> f32;
        #[cfg(test)]
        pub fn pe_host_widen32_bf16(b: u16) -> f32;
        #[cfg(test)]
        pub fn pe_host_rows_threads(t: &RowArgs, rows: u64) -> u64;
        #[cfg(test)]
        pub fn pe_host_rope_threads(r: &RopeArgs, tokens: u64) -> u64;
    }
}

/// `pe_factors` of `tables.cuh`: factor row `k` at `values[k]`'s anchor (with `has_values`) or
/// at `base + step * k`, `n` pairs, `count` rows; `anchors` makes position 0 exactly (0, 1).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct FactorArgs {
    pub base: f64,
    pub step: f64,
    pub amplitude: f64,
    pub n: u32,
    pub count: u32,
    pub anchors: u32,
    pub has_values: u32,
}

/// `pe_rows` of `tables.cuh`: where each row's position, sines and cosines go.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowArgs {
    pub start: f64,
    pub base: f64,
    pub zero_at: f64,
    pub sin_plane: u64,
    pub scale: f64,
    pub has_zero: u32,
    pub has_values: u32,
    pub n: u32,
    pub n_cos: u32,
    pub anchors: u32,
    pub stride: u32,
    pub sin0: u32,
    pub sin_step: u32,
    pub cos0: u32,
    pub cos_step: u32,
    pub zero_col: u32,
    pub period: u32,
}

/// `pe_turns` of `tables.cuh`: a shift's turn rows.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct TurnArgs {
    pub ratio: f64,
    pub h: u32,
    pub same: u32,
    pub rows: u32,
    pub _pad: u32,
}

/// `pe_rope` of `rope.cuh`: rope without tables, where each token sits and what turns.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct RopeArgs {
    pub start: f64,
    pub amplitude: f64,
    pub n: u32,
    pub d: u32,
    pub heads: u32,
    pub seq: u32,
    pub period: u32,
    pub has_values: u32,
    pub interleaved: u32,
    pub axes: u32,
    /// Heads of the second input (k beside q), 0 without one.
    pub heads_k: u32,
    /// Whether the tokens' values are a shift's distances (`to - from`), not positions.
    pub turn: u32,
    /// Threads per (token, slot), each turning every `groups`-th head (`rope_groups`).
    pub groups: u32,
}

#[cfg(feature = "cuda")]
// SAFETY: as below.
unsafe impl candle_core::cuda_backend::cudarc::driver::DeviceRepr for TurnArgs {}
#[cfg(feature = "cuda")]
// SAFETY: as below.
unsafe impl candle_core::cuda_backend::cudarc::driver::DeviceRepr for RopeArgs {}
#[cfg(feature = "cuda")]
// SAFETY: plain `repr(C)` data, passed by value as `tables.cuh`'s structs of the same layout.
unsafe impl candle_core::cuda_backend::cudarc::driver::DeviceRepr for FactorArgs {}
#[cfg(feature = "cuda")]
// SAFETY: as above.
unsafe impl candle_core::cuda_backend::cudarc::driver::DeviceRepr for RowArgs {}

#[cfg(all(test, feature = "host-kernels"))]
mod tests {
    use super::host::{pe_host_round32_bf16, pe_host_round32_f16};
    use super::host::{pe_host_round_bf16, pe_host_round_f16};
    use super::host::{pe_host_widen32_bf16, pe_host_widen32_f16};
    use crate::exact::round::{check_rounding, check_rounding_f32};

    /// The kernels' roundings (`exact.cuh`, built for the host) pass `exact/round.rs`'s
    /// exhaustive cases: every value, midpoint, and a hair either side of each.
    #[test]
    fn the_kernels_round_as_the_engine_does() {
        // SAFETY: pure functions of one f64.
        check_rounding(true, |v| unsafe { pe_host_round_f16(v) });
        check_rounding(false, |v| unsafe { pe_host_round_bf16(v) });
    }

    /// The kernels' rounding of f32 (a rotation's result) gives the engine's rounding of the
    /// same value at every f32 near each value and midpoint of the formats.
    #[test]
    fn the_kernels_round_f32_as_the_engine_does() {
        // SAFETY: pure functions of one f32.
        check_rounding_f32(true, |v| unsafe { pe_host_round32_f16(v) });
        check_rounding_f32(false, |v| unsafe { pe_host_round32_bf16(v) });
    }

    /// The kernels' widening of f16 and bf16 to f32 (a rotation's inputs) is exact, at every
    /// bit pattern: the `half` crate's conversions, which are exact too, give the same f32.
    #[test]
    fn the_kernels_widen_half_precision_exactly() {
        for bits in 0..=u16::MAX {
            // SAFETY: pure functions of 16 bits.
            let got = unsafe { [pe_host_widen32_f16(bits), pe_host_widen32_bf16(bits)] };
            let want = [
                half::f16::from_bits(bits).to_f32(),
                half::bf16::from_bits(bits).to_f32(),
            ];
            for (got, want) in got.into_iter().zip(want) {
                let same = got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan();
                assert!(same, "{bits:#06x}: {got:e}, where {want:e}");
            }
        }
    }
}
