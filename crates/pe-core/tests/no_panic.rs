//! No argument makes a front door of the engine panic: random descriptions (every preset and
//! option, every rope type with random parameters, multi-axis ropes, grids, ALiBi), built and
//! asked for tables with random sizes, offsets, positions, timesteps and tokens, each drawn from
//! the values where code goes wrong (zero, one past a limit, the edges of the integer types,
//! not a number). Each may be refused, with an error naming the argument; none may panic,
//! overflow or allocate what was not checked.
//!
//! Sizes are tiny or absurd (no request made with them fits in memory), never large and valid,
//! so that a case takes microseconds.
//! `PE_FUZZ_CASES` sets the number of cases (default 3,000), `PE_TEST_SEED` the seed; a failure
//! prints the case that made it ([`pe_testkit::no_panics`]).

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{
    cogvideox_coordinates, padding_aware_positions, patch_positions, video_patch_positions, Alibi,
    AxesRope, ColumnLayout, Dynamic, Frequencies, LinearScaling, Llama3, Longrope, MropeSlots,
    NtkAlpha, OddWidth, PairLayout, PeCache, PeSpec, Positions, Preset, Proportional, QueryScale,
    Rope, RopeCache, RopeConfig, RopeType, SincosGrid, SincosGrid3d, SinusoidalEncoding,
    TableBackend, TokenPositions, Yarn,
};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

/// A count or size: small, or so large that no request made with it fits in any memory
/// (2^50 and more: a large request that does fit would be built, and take the run's time).
fn size(rng: &mut StdRng) -> usize {
    let absurd = [1 << 50, 1 << 62, usize::MAX - 1, usize::MAX];
    if rng.random_bool(0.15) {
        *absurd.choose(rng).unwrap()
    } else {
        *[0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 33, 64]
            .choose(rng)
            .unwrap()
    }
}

/// A cache's row limit: small, or the default (a larger one would cache the rows up to a
/// position near 2^31, as asked).
fn limit(rng: &mut StdRng) -> usize {
    *[0, 1, 2, 64, 1 << 20].choose(rng).unwrap()
}

/// A width: small (odd ones too), just past the widest table, or absurd.
fn width(rng: &mut StdRng) -> usize {
    let absurd = [(1 << 24) + 1, 1 << 31, 1 << 50, usize::MAX];
    if rng.random_bool(0.15) {
        *absurd.choose(rng).unwrap()
    } else {
        *[0, 1, 2, 3, 4, 5, 6, 8, 12, 16, 18, 24, 64, 66, 128]
            .choose(rng)
            .unwrap()
    }
}

/// An offset or position: near 0, near 2^31, or past it.
fn offset(rng: &mut StdRng) -> usize {
    let far = [
        (1 << 31) - 70,
        (1 << 31) - 2,
        (1 << 31) - 1,
        1 << 31,
        1 << 32,
        1 << 53,
        usize::MAX,
    ];
    if rng.random_bool(0.3) {
        *far.choose(rng).unwrap()
    } else {
        rng.random_range(0..100)
    }
}

/// A float parameter: usual, edge, or not a number.
fn float(rng: &mut StdRng) -> f64 {
    let pick = [
        1.0,
        2.0,
        0.5,
        8.0,
        32.0,
        10_000.0,
        500_000.0,
        1e-5,
        0.0,
        -0.0,
        -1.0,
        1e-300,
        f64::MIN_POSITIVE,
        1e300,
        f64::MAX,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    *pick.choose(rng).unwrap()
}

fn maybe<T>(rng: &mut StdRng, value: impl FnOnce(&mut StdRng) -> T) -> Option<T> {
    rng.random_bool(0.5).then(|| value(rng))
}

fn dtype(rng: &mut StdRng) -> DType {
    *[
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::U8,
        DType::I64,
    ]
    .choose(rng)
    .unwrap()
}

fn backend(rng: &mut StdRng) -> TableBackend {
    *[TableBackend::Auto, TableBackend::Cpu, TableBackend::Generic]
        .choose(rng)
        .unwrap()
}

/// Integer positions of any sign and reach, as any integer dtype (or a float one), shaped
/// `(n,)` or `(n, axes)`.
fn positions(rng: &mut StdRng, axes: Option<usize>) -> Tensor {
    let n = rng.random_range(0..5);
    let columns = axes.unwrap_or(1);
    let values: Vec<i64> = (0..n * columns)
        .map(|_| {
            let pick = [
                0,
                1,
                7,
                -1,
                -(1 << 31),
                (1 << 31) - 1,
                1 << 31,
                i64::MAX,
                i64::MIN,
            ];
            if rng.random_bool(0.5) {
                *pick.choose(rng).unwrap()
            } else {
                rng.random_range(0..50)
            }
        })
        .collect();
    let dims: Vec<usize> = match axes {
        Some(a) => vec![n, a],
        None => vec![n],
    };
    let t = Tensor::from_vec(values, dims, &Device::Cpu).unwrap();
    let to = *[DType::I64, DType::U32, DType::U8, DType::F32, DType::I16]
        .choose(rng)
        .unwrap();
    t.to_dtype(to).unwrap_or(t)
}

fn spec(rng: &mut StdRng) -> PeSpec {
    let mut spec = Preset::ALL.choose(rng).unwrap().spec(width(rng));
    if rng.random_bool(0.3) {
        spec = spec.with_base(float(rng));
    }
    if rng.random_bool(0.3) {
        spec = spec.with_angle_scale(float(rng));
    }
    if rng.random_bool(0.3) {
        let frequencies = *[
            Frequencies::Paper,
            Frequencies::HalfMinusOne { guarded: true },
            Frequencies::HalfMinusOne { guarded: false },
            Frequencies::HalfShift { shift: float(rng) },
        ]
        .choose(rng)
        .unwrap();
        spec = spec.with_frequencies(frequencies);
    }
    if rng.random_bool(0.3) {
        let layout = [
            ColumnLayout::Interleaved,
            ColumnLayout::SinCos,
            ColumnLayout::CosSin,
        ];
        spec = spec.with_layout(*layout.choose(rng).unwrap());
    }
    if rng.random_bool(0.3) {
        let odd = [OddWidth::Split, OddWidth::ZeroPad, OddWidth::Reject];
        spec = spec.with_odd_width(*odd.choose(rng).unwrap());
    }
    spec
}

fn rope_type(rng: &mut StdRng) -> RopeType {
    let factors = |rng: &mut StdRng| -> Vec<f64> {
        let n = *[0, 1, 2, 4, 8, 32, 64].choose(rng).unwrap();
        (0..n).map(|_| float(rng)).collect()
    };
    match rng.random_range(0..8) {
        0 => RopeType::Default,
        1 => RopeType::Linear(LinearScaling { factor: float(rng) }),
        2 => RopeType::Dynamic(Dynamic { factor: float(rng) }),
        3 => RopeType::NtkAlpha(NtkAlpha { alpha: float(rng) }),
        4 => RopeType::Llama3(Llama3 {
            factor: float(rng),
            low_freq_factor: float(rng),
            high_freq_factor: float(rng),
            original_max_position_embeddings: size(rng),
        }),
        5 => RopeType::Yarn(Yarn {
            factor: float(rng),
            original_max_position_embeddings: maybe(rng, size),
            beta_fast: float(rng),
            beta_slow: float(rng),
            attention_factor: maybe(rng, float),
            mscale: maybe(rng, float),
            mscale_all_dim: maybe(rng, float),
            truncate: rng.random_bool(0.5),
        }),
        6 => RopeType::Longrope(Longrope {
            short_factor: factors(rng),
            long_factor: factors(rng),
            factor: maybe(rng, float),
            original_max_position_embeddings: maybe(rng, size),
            attention_factor: maybe(rng, float),
            short_mscale: maybe(rng, float),
            long_mscale: maybe(rng, float),
        }),
        _ => RopeType::Proportional(Proportional { factor: float(rng) }),
    }
}

fn rope_config(rng: &mut StdRng) -> RopeConfig {
    let head_dim = width(rng);
    let mut config = RopeConfig::new(head_dim, float(rng)).with_rope_type(rope_type(rng));
    if rng.random_bool(0.5) {
        config.rope_theta = 10_000.0;
    }
    if rng.random_bool(0.3) {
        config.partial_rotary_factor = *[0.25, 0.5, 1.0, 0.3, 0.0, 2.0, f64::NAN]
            .choose(rng)
            .unwrap();
    }
    config.max_position_embeddings = maybe(rng, size);
    if rng.random_bool(0.2) {
        let n = *[2, 3, 4].choose(rng).unwrap();
        config.mrope_section = Some((0..n).map(|_| size(rng)).collect());
        if rng.random_bool(0.5) {
            config.mrope_slots = MropeSlots::Alternating;
        }
    }
    if rng.random_bool(0.3) {
        config.pair_layout = PairLayout::Interleaved;
    }
    if rng.random_bool(0.2) {
        config.query_scale = Some(if rng.random_bool(0.5) {
            QueryScale::Llama4Scaling {
                beta: float(rng),
                original_max_position_embeddings: size(rng),
            }
        } else {
            QueryScale::AttnTemperature {
                floor_scale: size(rng),
                attn_scale: float(rng),
            }
        });
    }
    config
}

/// One random call of a front door.
#[derive(Debug)]
enum Case {
    Table(PeSpec, TableBackend, usize, usize, DType),
    Cached(PeSpec, usize, usize, usize, DType),
    Padding(PeSpec, Vec<u32>, u32, usize),
    Timesteps(PeSpec, Vec<f64>),
    Embed(PeSpec, usize, Vec<u32>, usize, f64),
    Rope(RopeConfig, TableBackend, usize, usize, DType),
    Axes(Vec<usize>, f64, usize),
    Grid(usize, f64, f64, usize, usize, usize),
    Grid3d(usize, f64, f64, usize, usize, usize),
    Alibi(usize, f64, usize, usize, usize),
    Patches(usize, usize, usize),
}

fn case(rng: &mut StdRng) -> Case {
    let tokens = |rng: &mut StdRng| -> Vec<u32> {
        let pick = [0, 1, 2, 5, 999, u32::MAX];
        (0..rng.random_range(0..6))
            .map(|_| *pick.choose(rng).unwrap())
            .collect()
    };
    match rng.random_range(0..11) {
        0 => Case::Table(spec(rng), backend(rng), offset(rng), size(rng), dtype(rng)),
        1 => Case::Cached(spec(rng), limit(rng), offset(rng), size(rng), dtype(rng)),
        2 => Case::Padding(
            spec(rng),
            tokens(rng),
            *[0, 1, 5, u32::MAX].choose(rng).unwrap(),
            offset(rng),
        ),
        3 => {
            let t = (0..rng.random_range(0..4)).map(|_| float(rng)).collect();
            Case::Timesteps(spec(rng), t)
        }
        4 => Case::Embed(spec(rng), size(rng), tokens(rng), offset(rng), float(rng)),
        5 | 6 => Case::Rope(
            rope_config(rng),
            backend(rng),
            offset(rng),
            size(rng),
            dtype(rng),
        ),
        7 => {
            let axes = (0..rng.random_range(0..4)).map(|_| width(rng)).collect();
            Case::Axes(axes, float(rng), rng.random_range(0..5))
        }
        8 => {
            let args = (
                width(rng),
                float(rng),
                float(rng),
                size(rng),
                size(rng),
                size(rng),
            );
            if rng.random_bool(0.5) {
                Case::Grid(args.0, args.1, args.2, args.3, args.4, args.5)
            } else {
                Case::Grid3d(args.0, args.1, args.2, args.3, args.4, args.5)
            }
        }
        9 => Case::Alibi(size(rng), float(rng), size(rng), offset(rng), size(rng)),
        _ => Case::Patches(size(rng), size(rng), size(rng)),
    }
}

fn run(case: &Case, rng: &mut StdRng) {
    let dev = &Device::Cpu;
    match case {
        Case::Table(spec, backend, start, len, dtype) => {
            let Ok(pe) = SinusoidalEncoding::new(*spec) else {
                return;
            };
            let pe = pe.with_backend(*backend);
            let _ = pe.range(*start, *len, *dtype, dev);
            let _ = pe.at(&positions(rng, None), *dtype);
            let _ = pe.column(*len);
        }
        Case::Cached(spec, limit, start, len, dtype) => {
            let Ok(pe) = SinusoidalEncoding::new(*spec) else {
                return;
            };
            let cache = PeCache::new(pe).with_limit(*limit);
            let _ = cache.range(*start, *len, *dtype, dev);
            let _ = cache.range_owned(*start, *len, *dtype, dev);
            let _ = cache.at(&positions(rng, None), *dtype);
            let _ = cache.cached_rows(*dtype, dev);
        }
        Case::Padding(spec, tokens, padding, past) => {
            let Ok(pe) = SinusoidalEncoding::new(*spec) else {
                return;
            };
            let tokens = Tensor::new(tokens.as_slice(), dev).unwrap();
            let tokens = tokens.unsqueeze(0).unwrap();
            let _ = pe.padding_aware(&tokens, *padding, *past, DType::F32);
            if let Ok(ids) = padding_aware_positions(&tokens, *padding, *past) {
                let _ = pe.padding_rows(&ids, *padding, DType::F32);
            }
            let cache = PeCache::new(pe);
            let _ = cache.padding_aware(&tokens, *padding, *past, DType::F32);
        }
        Case::Timesteps(spec, timesteps) => {
            let Ok(pe) = SinusoidalEncoding::new(*spec) else {
                return;
            };
            for dtype in [DType::F32, DType::F64] {
                let t = Tensor::new(timesteps.as_slice(), dev).unwrap();
                let _ = pe.timesteps(&t.to_dtype(dtype).unwrap(), DType::F32);
            }
        }
        Case::Embed(spec, vocab, tokens, start, scale) => {
            let Ok(pe) = SinusoidalEncoding::new(*spec) else {
                return;
            };
            let cache = PeCache::new(pe);
            let (vocab, width) = ((*vocab).min(64), cache.encoding().width().min(64));
            let Ok(weights) = Tensor::ones((vocab, width), DType::F32, dev) else {
                return;
            };
            let tokens = Tensor::new(tokens.as_slice(), dev).unwrap();
            let _ = cache.embed(&weights, &tokens, TokenPositions::Offset(*start), *scale);
            if let Ok(ids) = Positions::new(&positions(rng, None)) {
                let _ = cache.embed(&weights, &tokens, TokenPositions::Ids(&ids), *scale);
            }
        }
        Case::Rope(config, backend, start, len, dtype) => {
            let Ok(rope) = Rope::new(config.clone()) else {
                return;
            };
            let rope = rope.with_backend(*backend);
            let _ = rope.range(*start, *len, *dtype, dev);
            let _ = rope.at(&positions(rng, None), *dtype);
            let ids = positions(rng, Some(3));
            if let Ok(ids) = ids.t() {
                let _ = rope.at(&ids, *dtype);
            }
            let _ = rope.inv_freq(*len);
            let _ = rope.next_tracked_len(*start, *len);
            let _ = rope.at_shift(*start, *len, *dtype);
            let cache = RopeCache::new(rope).with_limit(limit(rng));
            let _ = cache.range(*start, 3, *dtype, dev);
            let _ = cache.range_owned(*start, 3, *dtype, dev);
        }
        Case::Axes(axes, theta, n_axes) => {
            let ropes = [
                AxesRope::new(axes, *theta),
                AxesRope::split_spectrum(axes.first().copied().unwrap_or(0), *n_axes, *theta),
                AxesRope::wan(axes.first().copied().unwrap_or(0)),
                AxesRope::cogvideox(axes.first().copied().unwrap_or(0)),
                AxesRope::ltx(axes.first().copied().unwrap_or(0), *n_axes, *theta),
            ];
            for rope in ropes.into_iter().flatten() {
                let axes = rope.axes_dim().len();
                let _ = rope.at(&positions(rng, Some(axes)), DType::F32);
                let _ = rope.at(&positions(rng, Some(*n_axes)), DType::F32);
                let order: Vec<usize> = (0..rope.half_dim()).rev().collect();
                let _ = rope.with_column_order(&order);
            }
            let _ = cogvideox_coordinates(*n_axes, 2, 2, 2, 2, dev);
        }
        Case::Grid(width, base, scale, extra, h, w) => {
            if let Ok(grid) = SincosGrid::new(*width) {
                let grid = grid
                    .with_base_size(*base)
                    .with_interpolation_scale(*scale)
                    .with_extra_tokens(*extra);
                let _ = grid.table(*h, *w, DType::F32, dev);
            }
        }
        Case::Grid3d(width, spatial, temporal, frames, h, w) => {
            if let Ok(grid) = SincosGrid3d::new(*width) {
                let grid = grid
                    .with_spatial_interpolation_scale(*spatial)
                    .with_temporal_interpolation_scale(*temporal);
                let _ = grid.table(*frames, *h, *w, DType::F32, dev);
            }
        }
        Case::Alibi(heads, max_bias, keys, offset, queries) => {
            let heads = if *heads > 64 { *heads } else { *heads % 17 };
            let Ok(alibi) = Alibi::new(heads) else {
                return;
            };
            let Ok(alibi) = alibi.with_max_bias(*max_bias) else {
                return;
            };
            let _ = alibi.slopes_tensor(DType::F32, dev);
            let _ = alibi.causal_bias(*keys, DType::F32, dev);
            let _ = alibi.symmetric_factors(*queries, *offset, *keys, DType::F32, dev);
        }
        Case::Patches(frames, h, w) => {
            let _ = patch_positions(*h, *w, dev);
            let _ = video_patch_positions(*frames, *h, *w, dev);
            let _ = cogvideox_coordinates(*frames, *h, *w, *h, *w, dev);
        }
    }
}

#[test]
fn no_argument_makes_a_front_door_panic() {
    pe_testkit::no_panics(
        "no_argument_makes_a_front_door_panic",
        // The case, and a seed for the positions its calls draw.
        |rng, _| (case(rng), rng.random::<u64>()),
        |(case, seed)| run(case, &mut StdRng::seed_from_u64(*seed)),
        |(case, seed)| format!("{case:?} (positions' seed {seed})"),
    );
}

/// The arguments the sweep found panicking or running for minutes, each now refused (or, where
/// valid, served): they hold whatever the seed.
#[test]
fn arguments_that_panicked_are_errors() -> anyhow::Result<()> {
    let dev = &Device::Cpu;
    // LTX's frequencies were computed for a width past the widest table before it was checked
    // (2^30 of them in double-double).
    let ltx = AxesRope::ltx(1 << 31, 1, 10_000.0);
    assert!(
        matches!(ltx, Err(candle_pe_core::Error::InvalidWidth { .. })),
        "{ltx:?}"
    );
    // M-RoPE sections whose sum overflows.
    let config = RopeConfig {
        mrope_section: Some(vec![2, usize::MAX, 1]),
        ..RopeConfig::new(8, 10_000.0)
    };
    let err = Rope::new(config).unwrap_err().to_string();
    assert!(err.contains("mrope_section"), "{err}");
    // A LongRoPE whose original context is usize::MAX: its long spectrum's first length
    // overflowed. A valid rope: its cache serves.
    let longrope = Longrope {
        short_factor: vec![1.0; 4],
        long_factor: vec![2.0; 4],
        factor: Some(4.0),
        original_max_position_embeddings: Some(usize::MAX),
        attention_factor: None,
        short_mscale: None,
        long_mscale: None,
    };
    let config = RopeConfig::new(8, 10_000.0).with_rope_type(RopeType::Longrope(longrope));
    let cache = RopeCache::new(Rope::new(config)?);
    let (cos, _) = cache.range(1000, 2, DType::F32, dev)?;
    assert_eq!(cos.dims(), [2, 4]);
    Ok(())
}
