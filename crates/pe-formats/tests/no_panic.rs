//! No config.json and no GGUF file makes a reader, or what it builds, panic.
//!
//! - Every config of the fixtures (each model type's, each vision tower's, the tiny models', the
//!   rope fixtures'), mutated at random (a value made extreme, of another type, dropped, or
//!   taken from another config; a model type swapped), goes through every `FromHfConfig`
//!   reader and through a random `RopeOverride`.
//! - Every GGUF file of the fixtures, its metadata mutated likewise (a key's value of any GGUF
//!   type, dropped, or taken from another file; the architecture swapped) and its rope tensors'
//!   shapes, types and offsets too, goes through `GgufRope::from_gguf` and a random override.
//!
//! Each rope read is built and used: its tables near 0 and near 2^31, a rotation of q and k, a
//! shift; a vision tower's tables and rotation. A reader may refuse its input, with an error
//! naming what it refused; it may not panic, overflow or allocate what it did not check.
//!
//! `PE_FUZZ_CASES` sets the number of mutated inputs of each test (default 3,000, about a second
//! each), and `PE_TEST_SEED` the seed; a failure prints the inputs that made it
//! ([`pe_testkit::no_panics`]). The inputs the sweeps found panicking are held on their own
//! (`inputs_that_panicked_are_errors`), whatever the seed.

use std::io::Cursor;

use candle_core::quantized::gguf_file::{Content, Value as GgufValue};
use candle_core::{DType, Device, Shape, Tensor};
use candle_pe_core::{Rope, RopeConfig, RopeConfigs, MAX_POSITION};
use candle_pe_formats::{
    FromGguf, FromHfConfig, GgufRope, HfTextConfig, QwenVlConfig, RopeOverride, RopeScaling,
    VisionRopeConfig,
};
use candle_pe_nn::{RotaryEmbedding, SinusoidalEmbeddingConfig};
use pe_testkit::{extreme_json, ConfigMutator, GgufMutator};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;
use serde_json::{json, Value};

/// Uses a rope that was read: its tables at the start and near 2^31, and a rotation at both.
fn use_rope(config: &RopeConfig) {
    // Widths past a few thousand are the engine's tests' (tests/rope.rs); here the reader's
    // values are what is random.
    if config.head_dim > 4096 {
        return;
    }
    let Ok(rope) = Rope::new(config.clone()) else {
        return;
    };
    let dev = Device::Cpu;
    let far = MAX_POSITION as usize - 3;
    for start in [0, 1000, far] {
        let _ = rope.range(start, 3, DType::F32, &dev);
    }
    let _ = rope.range(0, 0, DType::BF16, &dev);
    let Ok(rotary) = RotaryEmbedding::new(config.clone()) else {
        return;
    };
    let d = config.head_dim;
    let (Ok(q), Ok(k)) = (
        Tensor::ones((1, 2, 3, d), DType::F32, &dev),
        Tensor::ones((1, 1, 3, d), DType::F32, &dev),
    ) else {
        return;
    };
    for offset in [0, far] {
        let _ = rotary.apply(&q, &k, offset);
    }
    let _ = rotary.shift(&k, 5, 0);
}

fn use_ropes(configs: &RopeConfigs) {
    let layers = configs.num_layers().unwrap_or(1).min(64);
    let mut seen: Vec<&RopeConfig> = Vec::new();
    for layer in 0..layers {
        let _ = configs.query_scale(layer);
        if let Ok(Some(config)) = configs.for_layer(layer) {
            if !seen.contains(&config) {
                seen.push(config);
                use_rope(config);
            }
        }
    }
}

fn use_vision(config: &VisionRopeConfig) {
    if config.head_dim > 4096 {
        return;
    }
    let dev = Device::Cpu;
    let axes = config.layout.axes();
    let Ok(positions) =
        Tensor::new(&[[0i64; 3], [1, 2, 3], [7, 0, 5]], &dev).and_then(|p| p.narrow(1, 0, axes))
    else {
        return;
    };
    if let Ok(rope) = config.rope() {
        let _ = rope.at(&positions, DType::F32);
    }
    if let Ok(rotary) = config.rotary() {
        let d = config.head_dim;
        if let (Ok(q), Ok(k)) = (
            Tensor::ones((1, 2, 3, d), DType::F32, &dev),
            Tensor::ones((1, 2, 3, d), DType::F32, &dev),
        ) {
            let _ = rotary.apply(&q, &k, &positions);
        }
    }
}

/// Every reader of config.json, and what each reading builds.
fn read_all(config: &Value) {
    if let Ok(configs) = RopeConfigs::from_hf_config(config) {
        use_ropes(&configs);
    }
    if let Ok(rope) = RopeConfig::from_hf_config(config) {
        use_rope(&rope);
    }
    if let Ok(vision) = VisionRopeConfig::from_hf_config(config) {
        use_vision(&vision);
    }
    if let Ok(memory) = VisionRopeConfig::memory_attention_from_hf_config(config) {
        use_vision(&memory);
    }
    let _ = QwenVlConfig::from_hf_config(config);
    let _ = SinusoidalEmbeddingConfig::from_hf_config(config);
    let _ = HfTextConfig::from_hf_config(config);
}

/// A number an override may be given: usual, extreme, or not a number at all.
fn override_number(rng: &mut StdRng) -> Option<f64> {
    let pick = [
        0.5,
        1.0,
        2.0,
        4.0,
        32.0,
        1e-300,
        1e300,
        f64::MAX,
        0.0,
        -1.0,
        f64::NAN,
        f64::INFINITY,
    ];
    rng.random_bool(0.3).then(|| *pick.choose(rng).unwrap())
}

/// No override most of the time, else some fields of one at random.
fn random_override(rng: &mut StdRng) -> RopeOverride {
    if rng.random_bool(0.6) {
        return RopeOverride::default();
    }
    let contexts = [0, 1, 4096, 1 << 31, (1 << 31) + 1, usize::MAX];
    RopeOverride {
        rope_scaling: rng
            .random_bool(0.7)
            .then(|| RopeScaling::NAMES.choose(rng).unwrap().0),
        rope_scale: override_number(rng),
        rope_freq_base: override_number(rng),
        yarn_orig_ctx: rng.random_bool(0.3).then(|| *contexts.choose(rng).unwrap()),
        yarn_ext_factor: override_number(rng),
        yarn_attn_factor: override_number(rng),
        yarn_beta_fast: override_number(rng),
        yarn_beta_slow: override_number(rng),
    }
}

#[test]
fn no_config_makes_a_reader_panic() {
    let mutator = ConfigMutator::from_fixtures();
    pe_testkit::no_panics(
        "no_config_makes_a_reader_panic",
        |rng, case| (mutator.mutated(rng, case), random_override(rng)),
        |(config, over)| {
            read_all(config);
            if let Ok(overlaid) = over.apply_to_config(config) {
                read_all(&overlaid);
            }
        },
        |(config, over)| format!("{config}\n  with {over:?}"),
    );
}

#[test]
fn no_gguf_file_makes_a_reader_panic() {
    let mutator = GgufMutator::from_fixtures();
    let files = mutator.files();
    pe_testkit::no_panics(
        "no_gguf_file_makes_a_reader_panic",
        |rng, case| {
            let (file, content) = mutator.mutated(rng, case, true);
            (file, content, random_override(rng))
        },
        |(file, content, over)| {
            let mut reader = Cursor::new(&files[*file].bytes);
            if let Ok(rope) = GgufRope::from_gguf(content, &mut reader) {
                use_ropes(&rope.configs);
            }
            if let Ok(rope) = over.apply_to_gguf(content, &mut reader) {
                use_ropes(&rope.configs);
            }
        },
        |(file, content, over)| {
            let mut meta: Vec<_> = content.metadata.iter().collect();
            meta.sort_by(|a, b| a.0.cmp(b.0));
            let tensors: Vec<_> = content
                .tensor_infos
                .iter()
                .filter(|(n, _)| n.starts_with("rope"))
                .collect();
            format!(
                "{} mutated: {meta:?}\n  rope tensors {tensors:?}\n  with {over:?}",
                files[*file].name
            )
        },
    );
}

/// A Qwen-VL call: the config, the input ids (with runs of image and video tokens), the grids,
/// the seconds per video grid and the attention mask.
struct QwenVlCall {
    config: QwenVlConfig,
    ids: Vec<Vec<i64>>,
    images: Vec<[usize; 3]>,
    videos: Vec<[usize; 3]>,
    seconds: Option<Vec<f64>>,
    mask: Option<Vec<Vec<u8>>>,
}

/// A grid size: usual, zero, not a multiple of the merge size, or too large for any input.
fn grid_size(rng: &mut StdRng) -> usize {
    let pick = [1, 2, 3, 4, 6, 0, 1 << 20, 1 << 32, 1 << 62, usize::MAX];
    match rng.random_range(0..4) {
        0 => *pick.choose(rng).unwrap(),
        _ => 2 * rng.random_range(1..4),
    }
}

fn random_qwen_vl_call(rng: &mut StdRng, configs: &[Value]) -> Option<QwenVlCall> {
    let mut json = configs.choose(rng).unwrap().clone();
    if rng.random_bool(0.3) {
        let field = ["spatial_merge_size", "tokens_per_second"]
            .choose(rng)
            .unwrap();
        json["vision_config"][*field] = extreme_json(rng);
    }
    let config = QwenVlConfig::from_hf_config(&json).ok()?;
    let grid = |rng: &mut StdRng| [grid_size(rng), grid_size(rng), grid_size(rng)];
    let images: Vec<_> = (0..rng.random_range(0..3)).map(|_| grid(rng)).collect();
    let videos: Vec<_> = (0..rng.random_range(0..3)).map(|_| grid(rng)).collect();
    let m = config.spatial_merge_size.max(1);
    // Each grid's tokens, as many as it holds where that is small, else a few.
    let tokens = |g: &[usize; 3]| {
        let n = g[0]
            .checked_mul(g[1] / m)
            .and_then(|n| n.checked_mul(g[2] / m));
        n.filter(|&n| n <= 64).unwrap_or(3)
    };
    let batch = rng.random_range(1..3);
    let mut ids = vec![Vec::new(); batch];
    let mut take = |kind: i64, n: usize, rng: &mut StdRng| {
        let b = rng.random_range(0..batch);
        ids[b].push(7);
        ids[b].extend(std::iter::repeat_n(kind, n));
        ids[b].push(8);
    };
    for g in &images {
        take(config.image_token_id, tokens(g), rng);
    }
    for g in &videos {
        take(config.video_token_id, tokens(g), rng);
    }
    let seq = ids.iter().map(Vec::len).max().unwrap_or(0);
    for row in &mut ids {
        row.resize(seq, 0);
    }
    let seconds = rng.random_bool(0.5).then(|| {
        let pick = [
            1.0,
            0.5,
            2.0,
            0.0,
            -1.0,
            1e30,
            f64::MAX,
            f64::NAN,
            f64::INFINITY,
        ];
        let n = videos.len() + usize::from(rng.random_bool(0.1));
        (0..n).map(|_| *pick.choose(rng).unwrap()).collect()
    });
    let mask = rng.random_bool(0.3).then(|| {
        ids.iter()
            .map(|row| row.iter().map(|_| u8::from(rng.random_bool(0.9))).collect())
            .collect()
    });
    Some(QwenVlCall {
        config,
        ids,
        images,
        videos,
        seconds,
        mask,
    })
}

#[test]
fn no_qwen_vl_input_makes_positions_panic() {
    let configs: Vec<Value> = pe_testkit::fixture_entries("qwen_vl")
        .iter()
        .map(|dir| pe_testkit::read_json(dir.join("config.json")))
        .collect();
    pe_testkit::no_panics(
        "no_qwen_vl_input_makes_positions_panic",
        |rng, _| random_qwen_vl_call(rng, &configs),
        |call| {
            let Some(call) = call else { return };
            let dev = Device::Cpu;
            let Ok(ids) = Tensor::new(call.ids.clone(), &dev) else {
                return;
            };
            let mask = call
                .mask
                .as_ref()
                .and_then(|m| Tensor::new(m.clone(), &dev).ok());
            let positions = call.config.positions(
                &ids,
                &call.images,
                &call.videos,
                call.seconds.as_deref(),
                mask.as_ref(),
            );
            if let Ok(positions) = positions {
                let batch = call.ids.len();
                for (attended, len) in [
                    (vec![0; batch], 2),
                    (vec![usize::MAX; batch], 1),
                    (vec![3; batch], 1 << 31),
                    (vec![1; batch], usize::MAX),
                    (vec![1; batch + 1], 1),
                ] {
                    let _ = positions.decode(&attended, len);
                    let _ = positions.decode_from_last(&attended, len);
                }
            }
        },
        |call| match call {
            Some(c) => format!(
                "{:?} ids {:?} images {:?} videos {:?} seconds {:?} mask {:?}",
                c.config, c.ids, c.images, c.videos, c.seconds, c.mask
            ),
            None => "no config".into(),
        },
    );
}

/// The inputs the sweeps above found panicking, each now an error naming what it refused (or,
/// where the input is valid, read): they hold whatever the seed.
#[test]
fn inputs_that_panicked_are_errors() -> anyhow::Result<()> {
    fn refused<T, E: std::fmt::Display>(result: Result<T, E>, names: &str) {
        match result {
            Err(e) if e.to_string().contains(names) => {}
            Err(e) => panic!("expected an error naming {names}, got {e}"),
            Ok(_) => panic!("expected an error naming {names}, got a value"),
        }
    }
    // A memory attention 2^42 wide: the column order was made before the width was checked.
    let wide = json!({"model_type": "sam2_video", "memory_attention_hidden_size": 1u64 << 42,
        "memory_attention_num_attention_heads": 1});
    let read = VisionRopeConfig::memory_attention_from_hf_config(&wide);
    refused(read, "16777216");
    // M-RoPE sections whose sum overflows.
    let mut qwen3_vl = pe_testkit::read_json(pe_testkit::fixture("models/qwen3_vl/config.json"));
    qwen3_vl["text_config"]["rope_parameters"]["mrope_section"] = json!([6, u64::MAX, 5]);
    let configs = RopeConfigs::from_hf_config(&qwen3_vl)?;
    let config = configs.for_layer(0)?.unwrap().clone();
    refused(Rope::new(config), "mrope_section");
    // EfficientLoFTR's factor times its head overflows.
    let loftr = json!({"hidden_size": 256, "model_type": "efficientloftr",
        "num_attention_heads": 8, "rope_parameters": {"partial_rotary_factor": 1e300}});
    refused(VisionRopeConfig::from_hf_config(&loftr), "hidden_size");

    let gguf = |name: &str| {
        let bytes = std::fs::read(pe_testkit::fixture("gguf").join(name)).unwrap();
        let content = Content::read(&mut Cursor::new(&bytes)).unwrap();
        (bytes, content)
    };
    // A rope_freqs of no elements (candle reads it through a misaligned empty slice), and one
    // whose shape overflows: refused before it is read.
    let (bytes, mut content) = gguf("llama31_8b_rope.gguf");
    for dims in [vec![0], vec![1 << 32, 1 << 32]] {
        content
            .tensor_infos
            .get_mut("rope_freqs.weight")
            .unwrap()
            .shape = Shape::from(dims);
        let read = GgufRope::from_gguf(&content, &mut Cursor::new(&bytes));
        refused(read, "rope_freqs.weight");
    }
    // M-RoPE sections (stored as u64) whose sum overflows.
    let (bytes, mut content) = gguf("arch_qwen35.gguf");
    let sections = [u64::MAX, 2, 2, 0].map(GgufValue::U64).to_vec();
    let key = "qwen35.rope.dimension_sections";
    content
        .metadata
        .insert(key.into(), GgufValue::Array(sections));
    refused(GgufRope::from_gguf(&content, &mut Cursor::new(&bytes)), key);
    // 2^40 layers of Gemma 3's sliding pattern: the layer types were made before the count
    // was checked.
    let (bytes, mut content) = gguf("gemma3_f32.gguf");
    let layers = GgufValue::U64(1 << 40);
    content.metadata.insert("gemma3.block_count".into(), layers);
    let read = GgufRope::from_gguf(&content, &mut Cursor::new(&bytes));
    refused(read, "gemma3.block_count");
    let mut gemma3 = pe_testkit::read_json(pe_testkit::fixture("models/gemma3/config.json"));
    gemma3.as_object_mut().unwrap().remove("layer_types");
    gemma3["num_hidden_layers"] = json!(1u64 << 40);
    refused(RopeConfigs::from_hf_config(&gemma3), "num_hidden_layers");
    // A LongRoPE whose original context is u64::MAX: its long spectrum's first length
    // overflowed. A valid rope: its tables are built.
    let (bytes, mut content) = gguf("phi3_longrope_f32.gguf");
    let original = GgufValue::U64(u64::MAX);
    content
        .metadata
        .insert("phi3.rope.scaling.original_context_length".into(), original);
    let rope = GgufRope::from_gguf(&content, &mut Cursor::new(&bytes))?;
    let config = rope.configs.for_layer(0)?.unwrap();
    let rotary = RotaryEmbedding::new(config.clone())?;
    let (cos, _) = rotary.cache().range(1000, 2, DType::F32, &Device::Cpu)?;
    assert_eq!(cos.dims(), [2, config.rotary_dim() / 2]);

    // Qwen-VL: grids whose tokens overflow, Qwen3-VL's 2^40 frames, a video's seconds not a
    // number or stretching its time past every position, and more decoded tokens than positions
    // (their ids were allocated first).
    let dev = Device::Cpu;
    let qwen = |name: &str| {
        let path = pe_testkit::fixture("qwen_vl")
            .join(name)
            .join("config.json");
        QwenVlConfig::from_hf_config(&pe_testkit::read_json(path)).unwrap()
    };
    let (qwen2, qwen25, qwen3) = (qwen("qwen2_vl"), qwen("qwen2_5_vl_tps2"), qwen("qwen3_vl"));
    let video = |config: &QwenVlConfig, n: usize| {
        let mut ids = vec![1i64];
        ids.extend(std::iter::repeat_n(config.video_token_id, n));
        Tensor::new(vec![ids], &dev).unwrap()
    };
    let huge = [1 << 62, 1 << 32, 1 << 32];
    refused(
        qwen2.positions(&video(&qwen2, 4), &[], &[huge], None, None),
        "video_grid_thw",
    );
    refused(
        qwen3.positions(&video(&qwen3, 4), &[], &[[1 << 40, 2, 2]], None, None),
        "grids give 1099511627776",
    );
    for (seconds, names) in [
        (f64::NAN, "second_per_grid_ts"),
        (1e30, "temporal position"),
    ] {
        let read = qwen25.positions(
            &video(&qwen25, 2),
            &[],
            &[[2, 2, 2]],
            Some(&[seconds]),
            None,
        );
        refused(read, names);
    }
    let ids = Tensor::new(&[[1i64, 2, 3]], &dev)?;
    let positions = qwen2.positions(&ids, &[], &[], None, None)?;
    refused(positions.decode(&[3], usize::MAX), "decoded position");
    Ok(())
}
