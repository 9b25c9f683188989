//! No input makes a block panic: the rotary blocks (every rope type, M-RoPE, NoPE layers, the
//! multi-axis block), the embedding block and the ALiBi block, each given random q, k, ids,
//! scores and positions: every rank, zero-sized and mismatched dims, views that are not
//! contiguous, every dtype, offsets near and past 2^31, per-token and M-RoPE positions of any
//! sign and shape. Each may be refused, with an error naming the argument; none may panic.
//!
//! `PE_FUZZ_CASES` sets the number of cases (default 3,000), `PE_TEST_SEED` the seed; a failure
//! prints the case that made it ([`pe_testkit::no_panics`]).

use candle_core::{DType, Device, Tensor};
use candle_nn::{Module, VarBuilder, VarMap};
use candle_pe_core::{Dynamic, LinearScaling, MropeSlots, Yarn};
use candle_pe_nn::{
    layer_rotaries, sinusoidal_embedding, AlibiBias, At, AxesRotaryEmbedding, EmbeddingScale,
    PairLayout, PositionMode, Preset, RopeConfig, RopeConfigs, RopeType, RotaryEmbedding,
    SinusoidalEmbeddingConfig,
};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

/// A dim: small, zero, or odd.
fn dim(rng: &mut StdRng) -> usize {
    *[0, 1, 2, 3, 4, 5, 8, 16].choose(rng).unwrap()
}

/// A float dtype mostly, else one the blocks refuse.
fn dtype(rng: &mut StdRng) -> DType {
    let floats = [DType::F32, DType::BF16, DType::F16, DType::F64];
    if rng.random_bool(0.9) {
        *floats.choose(rng).unwrap()
    } else {
        *[DType::U8, DType::I64].choose(rng).unwrap()
    }
}

/// A tensor of `dims` (random dims of a random rank, sometimes) in `dtype`, sometimes as a
/// view that is not contiguous.
fn tensor(rng: &mut StdRng, dims: &[usize], dtype: DType) -> Tensor {
    let dims: Vec<usize> = if rng.random_bool(0.85) {
        dims.to_vec()
    } else {
        let rank = *[1, 2, 3, 4, 5].choose(rng).unwrap();
        (0..rank).map(|_| dim(rng)).collect()
    };
    let t = Tensor::rand(-1f32, 1f32, dims.as_slice(), &Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap();
    if dims.len() >= 3 && rng.random_bool(0.2) {
        // The same values through a transposed copy: strides that are not contiguous.
        let d = dims.len();
        return t
            .transpose(d - 3, d - 2)
            .and_then(|t| t.contiguous())
            .and_then(|t| t.transpose(d - 3, d - 2))
            .unwrap();
    }
    t
}

/// q `(batch, q_heads, seq, d)` and k `(batch, k_heads, seq, d)` (each sometimes of other
/// dims), one dtype mostly, and the batch and seq they were drawn for.
fn qk(rng: &mut StdRng, d: usize) -> (Tensor, Tensor, usize, usize) {
    let (batch, seq) = (
        *[1, 2].choose(rng).unwrap(),
        *[0, 1, 3].choose(rng).unwrap(),
    );
    let (hq, hk) = (
        *[1, 2, 4].choose(rng).unwrap(),
        *[1, 2].choose(rng).unwrap(),
    );
    let dq = dtype(rng);
    let dk = if rng.random_bool(0.9) { dq } else { dtype(rng) };
    let q = tensor(rng, &[batch, hq, seq, d], dq);
    let k = tensor(rng, &[batch, hk, seq, d], dk);
    (q, k, batch, seq)
}

/// Integer positions for `batch` sequences of `seq` tokens: `(batch, seq)`, `(seq,)` or
/// M-RoPE's `(3, batch, seq)`, sometimes of another shape; mostly small, sometimes negative or
/// past 2^31; in any integer dtype, or a float one.
fn positions(rng: &mut StdRng, batch: usize, seq: usize) -> Tensor {
    let dims: Vec<usize> = match rng.random_range(0..8) {
        0 | 1 => vec![batch, seq],
        2 => vec![seq],
        3 | 4 => vec![3, batch, seq],
        5 => vec![batch * seq, 3],
        6 => vec![seq, 2],
        _ => (0..rng.random_range(0..4)).map(|_| dim(rng)).collect(),
    };
    let n = dims.iter().product::<usize>();
    let values: Vec<i64> = (0..n)
        .map(|_| {
            let far = [-1, (1 << 31) - 1, 1 << 31, i64::MAX, i64::MIN];
            if rng.random_bool(0.05) {
                *far.choose(rng).unwrap()
            } else {
                rng.random_range(0..40)
            }
        })
        .collect();
    let t = Tensor::from_vec(values, dims, &Device::Cpu).unwrap();
    let dtype = *[DType::I64, DType::I64, DType::U32, DType::U8, DType::F32]
        .choose(rng)
        .unwrap();
    t.to_dtype(dtype).unwrap_or(t)
}

fn offset(rng: &mut StdRng) -> usize {
    let far = [(1 << 31) - 3, (1 << 31) - 1, 1 << 31, usize::MAX];
    if rng.random_bool(0.2) {
        *far.choose(rng).unwrap()
    } else {
        rng.random_range(0..50)
    }
}

fn rope_config(rng: &mut StdRng) -> RopeConfig {
    let head_dim = *[2, 4, 6, 8, 16].choose(rng).unwrap();
    let rope_type = match rng.random_range(0..4) {
        0 => RopeType::Default,
        1 => RopeType::Linear(LinearScaling { factor: 4.0 }),
        2 => RopeType::Dynamic(Dynamic { factor: 2.0 }),
        _ => RopeType::Yarn(Yarn::new(4.0, 16)),
    };
    let mut config = RopeConfig::new(head_dim, 10_000.0).with_rope_type(rope_type);
    config.max_position_embeddings = Some(32);
    if rng.random_bool(0.3) && head_dim >= 6 {
        let half = head_dim / 2;
        config.mrope_section = Some(vec![half - 2, 1, 1]);
        if rng.random_bool(0.5) {
            config.mrope_slots = MropeSlots::Alternating;
        }
    }
    if rng.random_bool(0.3) {
        config.partial_rotary_factor = 0.5;
    }
    config
}

/// One case: which block, and a seed for everything it draws.
#[derive(Debug)]
enum Case {
    Rotary(RopeConfig, bool, u64),
    Layers(RopeConfig, u64),
    Axes(Vec<usize>, u64),
    Embedding(Preset, usize, usize, Option<u32>, bool, u64),
    Alibi(usize, u64),
}

fn case(rng: &mut StdRng) -> Case {
    let seed = rng.random();
    match rng.random_range(0..7) {
        0..=2 => Case::Rotary(rope_config(rng), rng.random_bool(0.3), seed),
        3 => Case::Layers(rope_config(rng), seed),
        4 => {
            let axes = (0..rng.random_range(1..4))
                .map(|_| *[2, 4, 6, 8].choose(rng).unwrap())
                .collect();
            Case::Axes(axes, seed)
        }
        5 => Case::Embedding(
            *Preset::ALL.choose(rng).unwrap(),
            dim(rng).max(1),
            *[2, 4, 6, 8].choose(rng).unwrap(),
            [None, Some(0), Some(1), Some(7)][rng.random_range(0..4)],
            rng.random_bool(0.5),
            seed,
        ),
        _ => Case::Alibi(*[1, 2, 3, 8].choose(rng).unwrap(), seed),
    }
}

/// Where the tokens sit: an offset, per-token or M-RoPE positions, or either with a tracked
/// length.
fn at_of<'a>(rng: &mut StdRng, positions: &'a Tensor) -> At<'a> {
    let at = match rng.random_range(0..3) {
        0 => At::from(offset(rng)),
        _ => At::from(positions),
    };
    if rng.random_bool(0.2) {
        at.with_tracked_len(offset(rng))
    } else {
        at
    }
}

fn run(case: &Case) {
    let dev = &Device::Cpu;
    match case {
        Case::Rotary(config, interleaved, seed) => {
            let rng = &mut StdRng::seed_from_u64(*seed);
            let Ok(rotary) = RotaryEmbedding::new(config.clone()) else {
                return;
            };
            let rotary = if *interleaved {
                rotary.with_pair_layout(PairLayout::Interleaved)
            } else {
                rotary
            };
            let d = if rng.random_bool(0.9) {
                config.head_dim
            } else {
                dim(rng)
            };
            let (q, k, batch, seq) = qk(rng, d);
            let p = positions(rng, batch, seq);
            let _ = rotary.apply(&q, &k, at_of(rng, &p));
            let _ = rotary.apply_k(&k, at_of(rng, &p));
            let _ = rotary.apply_slow(&q, &k, at_of(rng, &p));
            let p2 = positions(rng, batch, seq);
            let _ = rotary.shift(&k, at_of(rng, &p), at_of(rng, &p2));
            let _ = rotary.shift_slow(&k, at_of(rng, &p), at_of(rng, &p2));
        }
        Case::Layers(config, seed) => {
            let rng = &mut StdRng::seed_from_u64(*seed);
            let types: Vec<String> = (0..3)
                .map(|i| ["full_attention", "sliding_attention"][i % 2].to_string())
                .collect();
            let nope: Vec<bool> = (0..3).map(|_| rng.random_bool(0.5)).collect();
            let configs = RopeConfigs::new(config.clone())
                .with_layer_types(types)
                .with_nope_layers(nope);
            let Ok(layers) = layer_rotaries(&configs) else {
                return;
            };
            let (q, k, batch, seq) = qk(rng, config.head_dim);
            let p = positions(rng, batch, seq);
            for layer in &layers {
                let _ = layer.apply(&q, &k, at_of(rng, &p));
            }
        }
        Case::Axes(axes, seed) => {
            let rng = &mut StdRng::seed_from_u64(*seed);
            let Ok(block) = AxesRotaryEmbedding::new(axes, 10_000.0) else {
                return;
            };
            let d: usize = axes.iter().sum();
            let block = match rng.random_range(0..4) {
                0 => block.with_pair_layout(PairLayout::Interleaved),
                1 => block.with_halves_per_axis(),
                2 => match block.clone().with_head_dim(d + dim(rng)) {
                    Ok(b) => b,
                    Err(_) => block,
                },
                _ => block,
            };
            let (q, k, _, seq) = qk(rng, d);
            let p = positions(rng, seq, axes.len());
            let _ = block.apply(&q, &k, &p);
            let coordinates = p.to_dtype(DType::F64).unwrap_or(p.clone());
            let _ = block.apply_at_coordinates(&q, &k, &coordinates);
            if let Ok(split) = block.with_split_heads(dim(rng)) {
                let _ = split.apply(&q, &k, &p);
            }
        }
        Case::Embedding(preset, vocab, width, padding, aware, seed) => {
            let rng = &mut StdRng::seed_from_u64(*seed);
            let cfg = SinusoidalEmbeddingConfig {
                padding_idx: *padding,
                positions: if *aware {
                    PositionMode::PaddingAware
                } else {
                    PositionMode::Plain
                },
                embedding_scale: EmbeddingScale::SqrtD,
                max_positions: [None, Some(4), Some(1 << 20)][rng.random_range(0..3)],
                ..SinusoidalEmbeddingConfig::for_preset(*preset)
            };
            let vb = VarBuilder::from_varmap(&VarMap::new(), DType::F32, dev);
            let Ok(block) = sinusoidal_embedding(*vocab, *width, cfg, vb) else {
                return;
            };
            let (batch, seq) = (dim(rng), dim(rng));
            let ids = positions(rng, batch, seq);
            let _ = block.forward(&ids);
            let _ = block.forward_with_offset(&ids, offset(rng));
            let _ = block.forward_at(&ids, &positions(rng, batch, seq));
        }
        Case::Alibi(heads, seed) => {
            let rng = &mut StdRng::seed_from_u64(*seed);
            let Ok(block) = AlibiBias::new(*heads) else {
                return;
            };
            let (queries, keys) = (dim(rng), dim(rng));
            let dtype = dtype(rng);
            let scores = tensor(rng, &[1, *heads, queries, keys], dtype);
            let _ = block.add_causal(&scores);
            let _ = block.add_symmetric(&scores, offset(rng));
        }
    }
}

#[test]
fn no_input_makes_a_block_panic() {
    pe_testkit::no_panics(
        "no_input_makes_a_block_panic",
        |rng, _| case(rng),
        run,
        |case| format!("{case:?}"),
    );
}
