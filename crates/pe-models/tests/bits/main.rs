//! The standing bit check: the exact bits of every table the workspace builds, every rotation,
//! the embedding block and the reference models' logits, each hashed (`pe_testkit::bits_hash`:
//! 64-bit FNV-1a over dtype, shape and little-endian bytes) and compared with the golden file
//! `crates/pe-testkit/golden/bits.txt`. A refactor proves that it changed no bits by leaving
//! the file alone; the test fails naming every case whose hash changed (old and new), and every
//! case missing from or extra in the file.
//!
//! A deliberate change of bits rewrites the file, and commits it with the change:
//!
//! ```text
//! PE_BLESS=1 cargo test -p pe-models --test bits
//! ```
//!
//! Every input is fixed (a seeded LCG, literal ids), every object is fresh per case, and nothing
//! depends on the thread count: the library promises the same bits on any number of threads.
//! The model logits go through candle's matmuls: gemm picks its kernels by the CPU's vector
//! extensions at run time, and a one-row product (a decode step) sums in lanes of the vector
//! width, so the `model@CLASS/` and `gguf@CLASS/` hashes are kept per class of CPU
//! (`pe_testkit::machine_class`: avx512f, avx2, ...) and compared only on a machine of a class
//! the file records. The tables and rotations are pe-core's and pe-nn's own arithmetic, the same
//! on every x86-64 machine.

mod blocks;
mod inputs;
mod models;
mod tables;

use std::time::Instant;

use anyhow::Result;

use inputs::Cases;

/// The golden file's header.
const HEADER: &str = "\
# The standing bit check (crates/pe-models/tests/bits): one line per case, its name and the
# 64-bit FNV-1a hash of the dtype, shape and little-endian bytes of what it computes.
# A change that moves bits on purpose rewrites this file in the same commit:
#     PE_BLESS=1 cargo test -p pe-models --test bits";

/// A part of the check: adds its cases.
type Part = fn(&mut Cases) -> Result<()>;

#[test]
fn every_case_keeps_its_bits() -> Result<()> {
    let mut cases = Cases::default();
    let parts: [(&str, Part); 10] = [
        ("sinusoidal tables", tables::sinusoidal),
        ("rope fixtures", tables::rope_fixtures),
        ("rope GGUFs", tables::rope_ggufs),
        ("multi-axis ropes", tables::axes),
        ("sin-cos grids", tables::grids),
        ("ALiBi", tables::alibi),
        ("RotaryEmbedding", blocks::rotary),
        ("AxesRotaryEmbedding and SinusoidalEmbedding", |c| {
            blocks::axes_rotary(c)?;
            blocks::embedding(c)
        }),
        ("checkpoints", models::checkpoints),
        ("GGUF models", models::ggufs),
    ];
    for (what, part) in parts {
        let (start, before) = (Instant::now(), cases.0.len());
        part(&mut cases)?;
        eprintln!(
            "{what}: {} cases in {:.2} s",
            cases.0.len() - before,
            start.elapsed().as_secs_f64()
        );
    }
    cases.0.check(&pe_testkit::golden("bits.txt"), HEADER)
}
