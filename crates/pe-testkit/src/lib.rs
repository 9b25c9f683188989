//! The workspace's shared test code, a dev-dependency of every crate (never published, as
//! libm's `libm-test` holds libm's MPFR oracle):
//!
//! - the exact oracle: sinusoidal rows and frequencies in 256-bit arithmetic ([`oracle_rows`],
//!   [`Big`]);
//! - the tolerance every output dtype meets against it, and the table comparison
//!   ([`tolerance`], [`assert_matches`]);
//! - generators of random cases, seeded from `PE_TEST_SEED` ([`seeded_rng`],
//!   [`random_encoding`], [`random_offset`]) and the per-backend test runner
//!   ([`backend_tests!`]);
//! - the sweep that holds bad input to errors, never panics ([`no_panics`]), and mutations of
//!   the fixtures' config.json and GGUF files for it ([`ConfigMutator`], [`GgufMutator`]);
//! - the exactness check of multi-axis rotary tables ([`assert_axes_exact`]);
//! - the fixtures written by `scripts/make-fixtures.sh` ([`fixture`]) and the real GGUF
//!   files `scripts/real-models.sh` fetches ([`real_model`]);
//! - the standing bit check: a hash of a tensor's exact bits ([`bits_hash`]) and golden files
//!   of such hashes ([`BitCases`], [`golden`]);
//! - the f32 constructions the benchmarks and examples measure against ([`naive_f32_table`],
//!   [`naive_llama_rope`], ...);
//! - the one benchmark harness: interleaved rounds, medians and ratio rows ([`race`]).
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::{PeSpec, SinusoidalEncoding};
//! use pe_testkit::{assert_matches, oracle_rows};
//!
//! let spec = PeSpec::fairseq(8);
//! let table = SinusoidalEncoding::new(spec)?.range(1000, 2, DType::F32, &Device::Cpu)?;
//! assert_matches(&table, &oracle_rows(&spec, &[1000.0, 1001.0]), "fairseq(8)")?;
//! assert!(pe_testkit::fixture("rope/llama31.json").is_file());
//! # Ok::<(), anyhow::Error>(())
//! ```

mod axes;
mod baseline;
mod bits;
mod cases;
mod fixtures;
mod golden;
mod machine;
mod mutate;
mod no_panic;
mod oracle;
pub mod race;
mod real_models;
mod sweep;
mod tolerance;

pub use axes::{assert_axes_exact, axes_slots};
pub use baseline::{
    gather_rope, marian_table, naive_f32_table, naive_llama_rope, whisper_sinusoids,
};
pub use bits::{bits_hash, same_bits, BitHasher};
pub use cases::{
    encoding, random_encoding, random_mrope_config, random_offset, random_rope_config, seeded_rng,
    ORACLE_ROPE_TYPES,
};
pub use fixtures::{
    assert_sweep, fixture, fixture_entries, fixture_files, read_json, vision_patches,
};
pub use golden::{golden, machine_class, BitCases, BLESS_VAR};
pub use machine::{cpu_model, load, threads};
pub use mutate::{
    copy_content, extreme_json, fixture_configs, fixture_gguf_files, ConfigMutator, GgufFile,
    GgufMutator,
};
pub use no_panic::no_panics;
pub use oracle::{oracle_frequency, oracle_row, oracle_rows, to_f64, Big};
pub use real_models::{real_model, real_model_path, REAL_MODELS_VAR};
pub use sweep::{Sweep, SWEEP_AT, SWEEP_LENGTHS, SWEPT};
pub use tolerance::{assert_matches, tolerance};

/// The oracle's number type.
pub use astro_float::BigFloat;

/// The crates [`backend_tests!`] names, so a test crate needs none of them itself.
#[doc(hidden)]
pub mod __private {
    pub use anyhow;
    pub use candle_core;
    pub use candle_pe_core;
}

/// Runs a device-generic test function `fn(&Device, TableBackend) -> anyhow::Result<()>` once per
/// (device, backend): the CPU generator, the generic candle-op generator forced on the CPU, the
/// CUDA kernels' host build on the CPU (candle-pe-core's `host-kernels`, which this crate turns
/// on), and (with the calling crate's `cuda` feature) a GPU.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod cpu {
            $(#[test]
            fn $name() -> $crate::__private::anyhow::Result<()> {
                super::$name(
                    &$crate::__private::candle_core::Device::Cpu,
                    $crate::__private::candle_pe_core::TableBackend::Cpu,
                )
            })*
        }
        mod generic_on_cpu {
            $(#[test]
            fn $name() -> $crate::__private::anyhow::Result<()> {
                super::$name(
                    &$crate::__private::candle_core::Device::Cpu,
                    $crate::__private::candle_pe_core::TableBackend::Generic,
                )
            })*
        }
        mod kernel_on_cpu {
            $(#[test]
            fn $name() -> $crate::__private::anyhow::Result<()> {
                super::$name(
                    &$crate::__private::candle_core::Device::Cpu,
                    $crate::__private::candle_pe_core::TableBackend::Kernel,
                )
            })*
        }
        #[cfg(feature = "cuda")]
        mod cuda {
            $(#[test]
            #[ignore = "needs a CUDA GPU: cargo test --features cuda -- --ignored"]
            fn $name() -> $crate::__private::anyhow::Result<()> {
                super::$name(
                    &$crate::__private::candle_core::Device::new_cuda(0)?,
                    $crate::__private::candle_pe_core::TableBackend::Auto,
                )
            })*
        }
    };
}
