//! Generators of random cases: a generator seeded from `PE_TEST_SEED` (printed, so a failure
//! can be replayed), random valid encodings and offsets from the regions where errors hide, and
//! the encoding of a spec on a backend.
//!
//! ```
//! use candle_pe_core::{TableBackend, MAX_POSITION};
//! use pe_testkit::{random_encoding, random_offset, seeded_rng};
//!
//! let mut rng = seeded_rng("doc");
//! let pe = random_encoding(&mut rng, 300, TableBackend::Cpu);
//! assert!((1..=300).contains(&pe.width()));
//! assert!(random_offset(&mut rng, 8) + 8 <= MAX_POSITION as usize);
//! ```

use candle_pe_core::{
    ColumnLayout, Dynamic, LinearScaling, Llama3, Longrope, MropeSlots, NtkAlpha, PeSpec, Preset,
    Proportional, RopeConfig, RopeType, SinusoidalEncoding, TableBackend, Yarn, MAX_POSITION,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A generator seeded from `PE_TEST_SEED` (default 20171206); the seed is printed under `test`.
pub fn seeded_rng(test: &str) -> StdRng {
    let seed = std::env::var("PE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20171206);
    eprintln!("{test}: seed {seed} (set PE_TEST_SEED to change)");
    StdRng::seed_from_u64(seed)
}

/// A random valid encoding of width at most `max_width` (at least 257) on `backend`: any
/// preset, sometimes with another base, angle scale or layout.
pub fn random_encoding(
    rng: &mut StdRng,
    max_width: usize,
    backend: TableBackend,
) -> SinusoidalEncoding {
    loop {
        let preset = Preset::ALL[rng.random_range(0..Preset::ALL.len())];
        let width = match rng.random_range(0..3) {
            0 => rng.random_range(1..=16),
            1 => rng.random_range(17..=256),
            _ => rng.random_range(257..=max_width),
        };
        let mut spec = preset.spec(width);
        if rng.random_bool(0.3) {
            spec = spec.with_base(
                [100.0, 1e5, 1e6, rng.random_range(2.0..50_000.0)][rng.random_range(0..4)],
            );
        }
        if rng.random_bool(0.2) {
            spec = spec.with_angle_scale(rng.random_range(0.25..4.0));
        }
        if rng.random_bool(0.2) {
            spec = spec.with_layout(
                [
                    ColumnLayout::Interleaved,
                    ColumnLayout::SinCos,
                    ColumnLayout::CosSin,
                ][rng.random_range(0..3)],
            );
        }
        // Invalid combinations (odd widths rejected, h-1 at widths 2 and 3) are tested in
        // pe-core's errors.rs.
        if let Ok(pe) = SinusoidalEncoding::new(spec) {
            return pe.with_backend(backend);
        }
    }
}

/// An offset from one of the interesting regions, leaving room for `len` rows below 2^31.
pub fn random_offset(rng: &mut StdRng, len: usize) -> usize {
    let top = MAX_POSITION as usize - len;
    let near = |rng: &mut StdRng, x: usize| (x - 64 + rng.random_range(0..128)).min(top);
    match rng.random_range(0..6) {
        0 => rng.random_range(0..1000),
        1 => near(rng, 1 << 20),
        2 => near(rng, 1 << 24),
        3 => top - rng.random_range(0..64).min(top),
        4 => top,
        _ => rng.random_range(0..=top),
    }
}

/// The encoding of `spec` on `backend`; panics if `spec` is invalid.
pub fn encoding(spec: PeSpec, backend: TableBackend) -> SinusoidalEncoding {
    SinusoidalEncoding::new(spec)
        .unwrap_or_else(|e| panic!("{spec:?} is valid: {e}"))
        .with_backend(backend)
}

/// The rope types [`random_rope_config`] draws from (each one the oracle knows).
pub const ORACLE_ROPE_TYPES: usize = 8;

/// A random rope config of one of the types the oracle knows: head widths 4 to 256, bases
/// 10^4 to 10^6, partial rotary, every parameter of each type drawn.
pub fn random_rope_config(rng: &mut StdRng) -> RopeConfig {
    let head_dim = 2 * rng.random_range(2..=128);
    let base = [
        10_000.0,
        500_000.0,
        1_000_000.0,
        rng.random_range(10_000.0..1_000_000.0),
    ][rng.random_range(0..4)];
    let original = [2048, 4096, 8192][rng.random_range(0..3)];
    let factor = rng.random_range(1.5..40.0);
    // phi-style partial rotary; the rotated width stays even.
    let partial = rng.random_bool(0.2) && head_dim % 4 == 0 && head_dim >= 8;
    let half = if partial { head_dim / 4 } else { head_dim / 2 };
    let (rope_type, max) = random_rope_type(rng, factor, original, half);
    let mut c = RopeConfig::new(head_dim, base).with_rope_type(rope_type);
    c.max_position_embeddings = Some(max);
    if let RopeType::Proportional(_) = c.rope_type {
        c.partial_rotary_factor = [0.25, 0.5, 1.0][rng.random_range(0..3)];
        if (c.partial_rotary_factor * head_dim as f64 / 2.0) < 1.0 {
            c.partial_rotary_factor = 1.0;
        }
    } else if partial {
        c.partial_rotary_factor = 0.5;
    }
    c
}

/// A random M-RoPE config: [`random_rope_config`] with a random `mrope_section` (temporal,
/// height, width; height and width each up to a third of the frequencies) and slot layout.
pub fn random_mrope_config(rng: &mut StdRng) -> RopeConfig {
    let mut config = random_rope_config(rng);
    let h = config.rotary_dim() / 2;
    let a = rng.random_range(0..=h / 3);
    let b = rng.random_range(0..=h / 3);
    config.mrope_section = Some(vec![h - a - b, a, b]);
    config.mrope_slots = if rng.random_bool(0.5) {
        MropeSlots::Alternating
    } else {
        MropeSlots::Sections
    };
    config
}

/// A random rope type of [`random_rope_config`] (`half` frequencies, a scaling `factor`, an
/// original context `original`) and the context it reaches (longrope's is 32 times longer).
fn random_rope_type(
    rng: &mut StdRng,
    factor: f64,
    original: usize,
    half: usize,
) -> (RopeType, usize) {
    let factors =
        |rng: &mut StdRng| -> Vec<f64> { (0..half).map(|_| rng.random_range(1.0..64.0)).collect() };
    let mut max = original;
    let rope_type = match rng.random_range(0..ORACLE_ROPE_TYPES) {
        0 => RopeType::Default,
        1 => RopeType::Linear(LinearScaling { factor }),
        2 => RopeType::Dynamic(Dynamic { factor }),
        3 => RopeType::Llama3(Llama3 {
            factor,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: original,
        }),
        4 => RopeType::Yarn(Yarn {
            mscale: rng.random_bool(0.5).then_some(1.0),
            mscale_all_dim: rng.random_bool(0.5).then_some(0.707),
            truncate: rng.random_bool(0.5),
            ..Yarn::new(factor, original)
        }),
        5 => {
            max = original * 32;
            RopeType::Longrope(Longrope {
                short_factor: factors(rng),
                long_factor: factors(rng),
                factor: rng.random_bool(0.5).then_some(factor),
                original_max_position_embeddings: Some(original),
                attention_factor: rng.random_bool(0.2).then_some(1.25),
                short_mscale: None,
                long_mscale: None,
            })
        }
        6 => RopeType::Proportional(Proportional {
            factor: [1.0, factor][rng.random_range(0..2)],
        }),
        _ => RopeType::NtkAlpha(NtkAlpha {
            alpha: [1000.0, factor][rng.random_range(0..2)],
        }),
    };
    (rope_type, max)
}
