//! Rope read from GGUF files (`GgufRope::from_gguf`) against the same model's `config.json`
//! (`from_hf_config`): the files are written by llama.cpp's own writer the way its converter
//! writes them (`scripts/fixtures/gguf_files.py`), and hand-built files hold every layout and quirk.

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::{DType, Device};
use candle_pe_core::{Llama3, PairLayout, QueryScale, Rope, RopeConfig, RopeConfigs, RopeType};
use candle_pe_formats::{Error, FreqFactors, FromGguf, FromHfConfig, GgufRope};

mod common;
use common::{file, head, read};

fn gguf_fixture(name: &str) -> anyhow::Result<(Content, std::fs::File)> {
    let path = pe_testkit::fixture("gguf").join(format!("{name}.gguf"));
    let mut file = std::fs::File::open(path)?;
    let content = Content::read(&mut file)?;
    Ok((content, file))
}

fn hf_config(path: std::path::PathBuf) -> anyhow::Result<RopeConfig> {
    let json: serde_json::Value = pe_testkit::read_json(path);
    Ok(RopeConfig::from_hf_config(&json)?)
}

fn model_config(model: &str) -> anyhow::Result<RopeConfig> {
    hf_config(
        pe_testkit::fixture("models")
            .join(model)
            .join("config.json"),
    )
}

/// The f64 tables of `config` at `offset .. offset + len`, flattened (cos then sin).
fn tables(config: &RopeConfig, offset: usize, len: usize) -> anyhow::Result<Vec<f64>> {
    let (cos, sin) = Rope::new(config.clone())?.range(offset, len, DType::F64, &Device::Cpu)?;
    let mut v = cos.flatten_all()?.to_vec1::<f64>()?;
    v.extend(sin.flatten_all()?.to_vec1::<f64>()?);
    Ok(v)
}

/// The f32 tables' bits.
fn bits(config: &RopeConfig, offset: usize, len: usize) -> anyhow::Result<Vec<u32>> {
    let (cos, sin) = Rope::new(config.clone())?.range(offset, len, DType::F32, &Device::Cpu)?;
    let mut v = cos.flatten_all()?.to_vec1::<f32>()?;
    v.extend(sin.flatten_all()?.to_vec1::<f32>()?);
    Ok(v.into_iter().map(f32::to_bits).collect())
}

const RANGES: [(usize, usize); 4] = [(0, 64), (8_000, 400), (20_000, 32), (131_000, 72)];

/// The same tables, bit for bit, in f32 and f64.
fn assert_same_tables(ours: &RopeConfig, theirs: &RopeConfig, what: &str) -> anyhow::Result<()> {
    for (offset, len) in RANGES {
        assert_eq!(
            bits(ours, offset, len)?,
            bits(theirs, offset, len)?,
            "{what} f32 at {offset}"
        );
        let (a, b) = (tables(ours, offset, len)?, tables(theirs, offset, len)?);
        let same = a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "{what} f64 at {offset}");
    }
    Ok(())
}

#[test]
fn converted_models_give_the_tables_of_their_config() -> anyhow::Result<()> {
    for (model, layout) in [
        ("llama31", PairLayout::Interleaved),
        ("qwen25_yarn", PairLayout::Halves),
    ] {
        let theirs = model_config(model)?;
        for weights in ["f32", "q8_0"] {
            let (content, mut file) = gguf_fixture(&format!("{model}_{weights}"))?;
            let rope = GgufRope::from_gguf(&content, &mut file)?;
            assert_eq!(rope.layout, layout, "{model}");
            let ours = RopeConfig::from_gguf(&content, &mut file)?;
            assert_eq!(ours.rope_type, theirs.rope_type, "{model} {weights}");
            assert_same_tables(&ours, &theirs, model)?;
        }
    }
    Ok(())
}

#[test]
fn llama3_is_recovered_from_the_converters_rope_freqs() -> anyhow::Result<()> {
    for name in [
        "llama31_f32",
        "llama31_8b_rope",
        "llama32_3b_rope",
        "llama3_head96_rope",
        "llama3_head112_rope",
    ] {
        let (content, mut file) = gguf_fixture(name)?;
        let rope = GgufRope::from_gguf(&content, &mut file)?;
        let Some(FreqFactors::Llama3(p)) = rope.freq_factors else {
            panic!(
                "{name}: rope_freqs not recovered as llama3: {:?}",
                rope.freq_factors
            );
        };
        let ours = rope.configs.single().expect("one rope").clone();
        let theirs = if name == "llama31_f32" {
            model_config("llama31")?
        } else {
            hf_config(pe_testkit::fixture("gguf").join(format!("{name}.config.json")))?
        };
        assert_eq!(RopeType::Llama3(p), theirs.rope_type, "{name}");
        let type_sources: Vec<&str> = rope
            .sources
            .iter()
            .filter(|s| s.value == "rope_type")
            .map(|s| s.source.as_str())
            .collect();
        assert_eq!(type_sources.len(), 1, "{type_sources:?}");
        assert!(
            type_sources[0].starts_with("tensor rope_freqs.weight"),
            "{type_sources:?}"
        );
        assert_eq!(ours, theirs, "{name}");
        assert_same_tables(&ours, &theirs, name)?;
    }
    Ok(())
}

/// Phi-3's factors are f32 in the file: the tables agree with the config's within the angle
/// error that rounding implies, `position * w_i * |f32(f_i) - f_i| / f_i` (times the attention
/// factor), which is printed.
#[test]
fn longrope_agrees_within_the_error_of_its_f32_factors() -> anyhow::Result<()> {
    let theirs = model_config("phi3_longrope")?;
    let RopeType::Longrope(hf) = &theirs.rope_type else {
        panic!("phi3 config is longrope")
    };
    for weights in ["f32", "q8_0"] {
        let (content, mut file) = gguf_fixture(&format!("phi3_longrope_{weights}"))?;
        let rope = GgufRope::from_gguf(&content, &mut file)?;
        assert_eq!(rope.layout, PairLayout::Halves);
        let ours = rope.configs.single().expect("one rope").clone();
        let RopeType::Longrope(read) = &ours.rope_type else {
            panic!("phi3 gguf is longrope: {:?}", ours.rope_type)
        };
        // The file holds the config's factors rounded to f32, each list under its own name.
        for (read, hf) in [
            (&read.short_factor, &hf.short_factor),
            (&read.long_factor, &hf.long_factor),
        ] {
            let rounded: Vec<f64> = hf.iter().map(|&f| f as f32 as f64).collect();
            assert_eq!(read, &rounded);
        }
        // The stored attention factor is f32 of the default: the formula is used.
        assert_eq!(read.attention_factor, None);
        assert_eq!(
            Rope::new(ours.clone())?.attention_scaling(),
            Rope::new(theirs.clone())?.attention_scaling()
        );
        let attention = Rope::new(theirs.clone())?.attention_scaling();
        for (offset, len) in [(0, 64), (4_000, 96), (20_000, 32), (131_000, 72)] {
            // The factors the tables of this range use (transformers' rule: long past 4096).
            let long = offset + len > 4096;
            let (f32s, f64s) = if long {
                (&read.long_factor, &hf.long_factor)
            } else {
                (&read.short_factor, &hf.short_factor)
            };
            let w = Rope::new(theirs.clone())?.inv_freq(offset + len);
            let per_pair: Vec<f64> = f32s
                .iter()
                .zip(f64s)
                .zip(&w)
                .map(|((a, b), w)| w * ((a - b) / a).abs())
                .collect();
            let last = (offset + len - 1) as f64;
            let bound = attention * last * per_pair.iter().cloned().fold(0.0, f64::max) + 1e-15;
            let (a, b) = (tables(&ours, offset, len)?, tables(&theirs, offset, len)?);
            let seen = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max);
            println!(
                "phi3 longrope {weights} positions {offset}..{}: largest table difference {seen:.3e}, \
                 bound from the f32 factors {bound:.3e}",
                offset + len
            );
            assert!(seen <= bound, "{seen} > {bound} at {offset}");
        }
    }
    Ok(())
}

// ---- hand-built files ----

#[test]
fn each_architecture_has_llama_cpps_layout() {
    let interleaved = [
        "llama",
        "mistral3",
        "deepseek2",
        "glm4",
        "granite",
        "command-r",
    ];
    let halves = [
        "qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi3", "gemma", "gemma2", "gemma3", "glm4moe",
    ];
    for arch in interleaved.iter().chain(&halves) {
        let mut keys = head(256, 4);
        keys.push(("rope.dimension_count", Value::U32(64)));
        let rope = read(arch, &keys, &[]).unwrap_or_else(|e| panic!("{arch}: {e}"));
        let expected = if interleaved.contains(arch) {
            PairLayout::Interleaved
        } else {
            PairLayout::Halves
        };
        assert_eq!(rope.layout, expected, "{arch}");
        let config = rope
            .configs
            .for_layer_type("full_attention")
            .unwrap()
            .unwrap();
        assert_eq!(config.mrope_section, None, "{arch}");
    }
}

/// A rotary width below the head is `partial_rotary_factor * head_dim`, whatever the ratio.
#[test]
fn partial_rotary_widths_come_back_whole() {
    for head_dim in [48u32, 80, 96, 100, 112, 160, 192, 200, 224, 256] {
        for rotary in (2..=head_dim).step_by(6) {
            let rotary = rotary & !1;
            let mut keys = head(head_dim * 4, 4);
            keys.push(("rope.dimension_count", Value::U32(rotary)));
            let rope = read("phi2", &keys, &[]).unwrap();
            let config = rope.configs.single().unwrap();
            assert_eq!(
                config.rotary_dim(),
                rotary as usize,
                "{rotary} of {head_dim}"
            );
        }
    }
}

#[test]
fn mrope_sections_come_from_dimension_sections() {
    let sections = Value::Array(vec![
        Value::I32(16),
        Value::I32(24),
        Value::I32(24),
        Value::I32(0),
    ]);
    for (arch, interleaved) in [
        ("qwen2vl", false),
        ("qwen3vl", true),
        ("qwen3vlmoe", true),
        ("glm4", false),
    ] {
        let mut keys = head(1024, 8);
        keys.push(("rope.dimension_sections", sections.clone()));
        let rope = read(arch, &keys, &[]).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(rope.layout, PairLayout::Halves, "{arch}");
        let config = rope.configs.single().unwrap();
        assert_eq!(config.mrope_section, Some(vec![16, 24, 24]), "{arch}");
        assert_eq!(config.mrope_slots.is_alternating(), interleaved, "{arch}");
    }
    // Without sections an M-RoPE architecture is an error naming the key.
    let err = read("qwen2vl", &head(1024, 8), &[]).unwrap_err();
    assert!(
        matches!(&err, Error::GgufMissing { key, .. } if key == "qwen2vl.rope.dimension_sections"),
        "{err}"
    );
    // Sections that do not add up to rotary_dim / 2.
    let mut keys = head(1024, 8);
    keys.push((
        "rope.dimension_sections",
        Value::Array(vec![
            Value::I32(16),
            Value::I32(24),
            Value::I32(20),
            Value::I32(0),
        ]),
    ));
    let err = read("qwen2vl", &keys, &[]).unwrap_err();
    assert!(
        matches!(&err, Error::GgufConflict { key, .. } if key == "qwen2vl.rope.dimension_sections"),
        "{err}"
    );
}

#[test]
fn missing_keys_take_llama_cpps_defaults() {
    let rope = read("llama", &head(512, 8), &[]).unwrap();
    let config = rope.configs.single().unwrap();
    assert_eq!(config, &RopeConfig::new(64, 10_000.0));
    assert!(rope
        .sources
        .iter()
        .any(|s| s.value == "rope_theta" && s.source.starts_with("default")));
    // A factor without a type is llama.cpp's default type, linear; the legacy scale_linear too.
    for key in ["rope.scaling.factor", "rope.scale_linear"] {
        let mut keys = head(512, 8);
        keys.push((key, Value::F32(4.0)));
        let config = read("llama", &keys, &[])
            .unwrap()
            .configs
            .single()
            .unwrap()
            .clone();
        assert_eq!(config.rope_type.name(), "linear", "{key}");
    }
}

/// The 0s llama.cpp's converter writes for "none", read as llama.cpp reads them: a context of 0
/// is unknown, an original context of 0 falls back to the context, a rope.scaling.factor of 0
/// is no factor (the legacy rope.scale_linear is then not read), and a sliding window of 0
/// means no sliding layers (Gemma 3's too: every layer takes the one rope). Their sources say
/// so, and name the key only with what it gave.
#[test]
fn converter_zeros_are_none_as_llama_cpp_reads_them() {
    let source = |rope: &GgufRope, value: &str| {
        let found: Vec<&str> = rope
            .sources
            .iter()
            .filter(|s| s.value == value)
            .map(|s| s.source.as_str())
            .collect();
        assert_eq!(found.len(), 1, "{value}: {:?}", rope.sources);
        found[0].to_string()
    };
    // context_length = 0.
    let mut keys = head(512, 8);
    keys.push(("context_length", Value::U32(0)));
    let rope = read("llama", &keys, &[]).unwrap();
    assert_eq!(
        rope.configs.single().unwrap(),
        &RopeConfig::new(64, 10_000.0)
    );
    assert_eq!(
        source(&rope, "max_position_embeddings"),
        "default (none; llama.context_length = 0 is none)"
    );

    // YaRN and LongRoPE with rope.scaling.original_context_length = 0: context_length's.
    let mut yarn = head(512, 8);
    yarn.extend([
        ("context_length", Value::U32(32768)),
        ("rope.scaling.type", Value::String("yarn".into())),
        ("rope.scaling.factor", Value::F32(4.0)),
    ]);
    let plain = read("qwen2", &yarn, &[]).unwrap();
    yarn.push(("rope.scaling.original_context_length", Value::U32(0)));
    let zero = read("qwen2", &yarn, &[]).unwrap();
    assert_eq!(zero.configs, plain.configs);
    let RopeType::Yarn(y) = &zero.configs.single().unwrap().rope_type else {
        panic!("yarn")
    };
    assert_eq!(y.original_max_position_embeddings, Some(32768));
    assert_eq!(
        source(&zero, "original_max_position_embeddings"),
        "default (qwen2.context_length; qwen2.rope.scaling.original_context_length = 0 is none)"
    );
    let mut longrope = head(512, 8);
    longrope.push(("context_length", Value::U32(4096)));
    let factors = [
        ("rope_factors_long.weight", vec![2.0; 32]),
        ("rope_factors_short.weight", vec![1.0; 32]),
    ];
    let plain = read("phi3", &longrope, &factors).unwrap();
    longrope.push(("rope.scaling.original_context_length", Value::U32(0)));
    let zero = read("phi3", &longrope, &factors).unwrap();
    assert_eq!(zero.configs, plain.configs);
    assert!(
        source(&zero, "original_max_position_embeddings").ends_with("= 0 is none)"),
        "{:?}",
        zero.sources
    );

    // rope.scaling.factor = 0 with the legacy key: no factor, as llama.cpp reads it.
    let mut keys = head(512, 8);
    keys.extend([
        ("rope.scaling.factor", Value::F32(0.0)),
        ("rope.scale_linear", Value::F32(4.0)),
    ]);
    let rope = read("llama", &keys, &[]).unwrap();
    assert_eq!(rope.configs.single().unwrap().rope_type, RopeType::Default);

    // attention.sliding_window = 0: no sliding layers, one rope, Gemma 3 included.
    let mut gemma = head(1024, 4);
    gemma.extend([
        ("attention.key_length", Value::U32(256)),
        ("block_count", Value::U32(6)),
        ("rope.freq_base", Value::F32(1e6)),
        ("rope.freq_base_swa", Value::F32(1e4)),
    ]);
    assert!(read("gemma3", &gemma, &[])
        .unwrap()
        .configs
        .single()
        .is_none());
    gemma.push(("attention.sliding_window", Value::U32(0)));
    let rope = read("gemma3", &gemma, &[]).unwrap();
    let config = rope.configs.single().expect("one rope for every layer");
    assert_eq!(config.rope_theta, 1e6);
    assert!(
        source(&rope, "layer_types").starts_with("gemma3.attention.sliding_window = 0"),
        "{:?}",
        rope.sources
    );
    // A window > 0 keeps them.
    *gemma.last_mut().unwrap() = ("attention.sliding_window", Value::U32(512));
    assert!(read("gemma3", &gemma, &[])
        .unwrap()
        .configs
        .single()
        .is_none());
}

#[test]
fn yarn_keys_are_read_as_transformers_reads_the_config() {
    let json = serde_json::json!({"hidden_size": 1024, "num_attention_heads": 8,
        "max_position_embeddings": 131072, "rope_theta": 1e6,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                         "beta_fast": 16.0, "beta_slow": 2.0, "attention_factor": 0.9}});
    let theirs = RopeConfig::from_hf_config(&json).unwrap();
    let mut keys = head(1024, 8);
    keys.extend([
        ("context_length", Value::U32(131072)),
        ("rope.freq_base", Value::F32(1e6)),
        ("rope.scaling.type", Value::String("yarn".into())),
        ("rope.scaling.factor", Value::F32(4.0)),
        ("rope.scaling.original_context_length", Value::U32(32768)),
        ("rope.scaling.yarn_beta_fast", Value::F32(16.0)),
        ("rope.scaling.yarn_beta_slow", Value::F32(2.0)),
        ("rope.scaling.yarn_attn_factor", Value::F32(0.9)),
    ]);
    let ours = read("qwen3", &keys, &[])
        .unwrap()
        .configs
        .single()
        .unwrap()
        .clone();
    assert_eq!(ours, theirs);
    // An extrapolation mix other than transformers' is refused, naming the key.
    keys.push(("rope.scaling.yarn_ext_factor", Value::F32(0.5)));
    let err = read("qwen3", &keys, &[]).unwrap_err();
    assert!(
        matches!(&err, Error::GgufKey { key, .. } if key == "qwen3.rope.scaling.yarn_ext_factor"),
        "{err}"
    );
}

#[test]
fn yarn_log_multiplier_is_deepseek2s_tenth_of_mscale_all_dim() {
    let yarn = |arch: &str| {
        let mut keys = head(2048, 16);
        keys.extend([
            ("rope.dimension_count", Value::U32(64)),
            ("context_length", Value::U32(163840)),
            ("rope.scaling.type", Value::String("yarn".into())),
            ("rope.scaling.factor", Value::F32(40.0)),
            ("rope.scaling.original_context_length", Value::U32(4096)),
            ("rope.scaling.yarn_log_multiplier", Value::F32(0.0707)),
        ]);
        let config = read(arch, &keys, &[])
            .unwrap()
            .configs
            .single()
            .unwrap()
            .clone();
        let RopeType::Yarn(y) = config.rope_type.clone() else {
            panic!("{arch}: yarn")
        };
        (config, y)
    };
    let (config, y) = yarn("deepseek2");
    assert_eq!((y.mscale, y.mscale_all_dim), (Some(0.707), Some(0.707)));
    // DeepSeek-2's rope covers its qk_rope part: the head is rope.dimension_count.
    assert_eq!((config.head_dim, config.rotary_dim()), (64, 64));
    assert_eq!(Rope::new(config).unwrap().attention_scaling(), 1.0);
    let (_, y) = yarn("qwen3");
    assert_eq!((y.mscale, y.mscale_all_dim), (Some(1.0), Some(0.0707)));
}

#[test]
fn gemma3_scales_global_layers_and_bases_sliding_ones_on_freq_base_swa() {
    let json = serde_json::json!({"model_type": "gemma3_text", "head_dim": 256,
        "num_hidden_layers": 12, "sliding_window_pattern": 6, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0}});
    let theirs = RopeConfigs::from_hf_config(&json).unwrap();
    let mut keys = head(2560, 8);
    keys.extend([
        ("attention.key_length", Value::U32(256)),
        ("block_count", Value::U32(12)),
        ("context_length", Value::U32(131072)),
        ("rope.freq_base", Value::F32(1e6)),
        ("rope.scaling.type", Value::String("linear".into())),
        ("rope.scaling.factor", Value::F32(8.0)),
    ]);
    for with_swa_key in [false, true] {
        let mut keys = keys.clone();
        if with_swa_key {
            keys.push(("rope.freq_base_swa", Value::F32(10_000.0)));
        }
        let ours = read("gemma3", &keys, &[]).unwrap().configs;
        for t in ["full_attention", "sliding_attention"] {
            assert_eq!(
                ours.for_layer_type(t).unwrap(),
                theirs.for_layer_type(t).unwrap(),
                "{t}"
            );
        }
        for layer in 0..12 {
            assert_eq!(
                ours.for_layer(layer).unwrap(),
                theirs.for_layer(layer).unwrap(),
                "{layer}"
            );
        }
    }
    keys.push(("rope.freq_base_swa", Value::F32(20_000.0)));
    let (content, mut reader) = file("gemma3", &keys, &[]);
    let configs = RopeConfigs::from_gguf(&content, &mut reader).unwrap();
    assert_eq!(configs.for_layer(0).unwrap().unwrap().rope_theta, 20_000.0);
    let err = RopeConfig::from_gguf(&content, &mut reader).unwrap_err();
    assert!(
        matches!(&err, Error::GgufKey { key, .. } if key == "gemma3.rope.freq_base_swa"),
        "{err}"
    );
}

/// The converter's llama3 divisors for Llama 3.1's parameters (read from the fixture), one
/// changed by an ulp: no longer the converter's, so used as stored.
#[test]
fn other_rope_freqs_are_used_as_stored() -> anyhow::Result<()> {
    let (content, mut f) = gguf_fixture("llama31_8b_rope")?;
    let mut divisors = content
        .tensor(&mut f, "rope_freqs.weight", &Device::Cpu)?
        .dequantize(&Device::Cpu)?
        .to_vec1::<f32>()?;
    divisors[40] = f32::from_bits(divisors[40].to_bits() + 1);
    let mut keys = head(4096, 32);
    keys.extend([
        ("rope.freq_base", Value::F32(500000.0)),
        ("context_length", Value::U32(131072)),
    ]);
    let rope = read("llama", &keys, &[("rope_freqs.weight", divisors.clone())])?;
    let Some(FreqFactors::Stored { max_relative_error }) = rope.freq_factors else {
        panic!("{:?}", rope.freq_factors)
    };
    println!("stored rope_freqs: relative frequency error <= {max_relative_error:.3e}");
    assert!(max_relative_error > 0.0 && max_relative_error <= 2f64.powi(-24));
    let config = rope.configs.single().unwrap();
    let w = Rope::new(config.clone())?.inv_freq(1);
    let plain = Rope::new(RopeConfig::new(128, 500000.0))?.inv_freq(1);
    for i in 0..64 {
        let stored = plain[i] / divisors[i] as f64;
        assert!(
            (w[i] - stored).abs() <= 2.0 * f64::EPSILON * stored,
            "pair {i}"
        );
    }
    assert_eq!(Rope::new(config.clone())?.attention_scaling(), 1.0);
    // Unchanged, they are llama3 again.
    let llama3 = Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    };
    divisors[40] = f32::from_bits(divisors[40].to_bits() - 1);
    let rope = read("llama", &keys, &[("rope_freqs.weight", divisors)])?;
    assert_eq!(rope.freq_factors, Some(FreqFactors::Llama3(llama3)));
    Ok(())
}

#[test]
fn contradictions_are_errors_naming_the_key() {
    // A rope wider than the head.
    let mut keys = head(512, 8);
    keys.push(("rope.dimension_count", Value::U32(128)));
    let err = read("llama", &keys, &[]).unwrap_err();
    assert!(
        matches!(&err, Error::GgufConflict { key, other, .. }
            if key == "llama.rope.dimension_count" && other.contains("llama.embedding_length")),
        "{err}"
    );
    // rope_freqs whose length is not rotary_dim / 2.
    let err = read(
        "llama",
        &head(512, 8),
        &[("rope_freqs.weight", vec![1.0; 16])],
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::GgufConflict { key, other, .. }
            if key == "rope_freqs.weight" && other == "llama.rope.dimension_count"),
        "{err}"
    );
    // rope_freqs on top of YaRN.
    let mut keys = head(512, 8);
    keys.extend([
        ("rope.scaling.type", Value::String("yarn".into())),
        ("rope.scaling.factor", Value::F32(4.0)),
        ("context_length", Value::U32(4096)),
    ]);
    let err = read("llama", &keys, &[("rope_freqs.weight", vec![1.0; 32])]).unwrap_err();
    assert!(
        matches!(&err, Error::GgufConflict { key, .. } if key == "rope_freqs.weight"),
        "{err}"
    );
    // An unknown scaling type.
    let mut keys = head(512, 8);
    keys.push(("rope.scaling.type", Value::String("ntk".into())));
    let err = read("llama", &keys, &[]).unwrap_err();
    assert!(
        matches!(&err, Error::GgufKey { key, .. } if key == "llama.rope.scaling.type"),
        "{err}"
    );
    // Two factors that disagree.
    let mut keys = head(512, 8);
    keys.extend([
        ("rope.scaling.factor", Value::F32(4.0)),
        ("rope.scale_linear", Value::F32(2.0)),
    ]);
    let err = read("llama", &keys, &[]).unwrap_err();
    assert!(
        matches!(&err, Error::GgufConflict { key, other, .. }
            if key == "llama.rope.scaling.factor" && other == "llama.rope.scale_linear"),
        "{err}"
    );
    // LongRoPE without its short factors.
    let mut keys = head(512, 8);
    keys.push(("context_length", Value::U32(131072)));
    let err = read(
        "phi3",
        &keys,
        &[("rope_factors_long.weight", vec![1.0; 32])],
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::GgufMissing { key, .. } if key == "rope_factors_short.weight"),
        "{err}"
    );
    // A key of the wrong type, an unknown architecture, no architecture.
    let mut keys = head(512, 8);
    keys.push(("rope.freq_base", Value::String("1e4".into())));
    let err = read("llama", &keys, &[]).unwrap_err();
    assert!(
        matches!(&err, Error::GgufKey { key, .. } if key == "llama.rope.freq_base"),
        "{err}"
    );
    let err = read("rwkv7", &head(512, 8), &[]).unwrap_err();
    assert!(
        matches!(&err, Error::GgufKey { key, .. } if key == "general.architecture"),
        "{err}"
    );
    let (mut content, mut reader) = file("llama", &head(512, 8), &[]);
    content.metadata.remove("general.architecture");
    let err = GgufRope::from_gguf(&content, &mut reader).unwrap_err();
    assert!(
        matches!(&err, Error::GgufMissing { key, .. } if key == "general.architecture"),
        "{err}"
    );
}

/// llama.cpp's query temperature keys: read on the architectures whose graph applies them
/// (mistral3, deepseek2) as transformers' `llama_4_scaling_beta`, refused by name elsewhere
/// (mistral3 takes the length from the original context, as llama.cpp does: see
/// `tests/gguf_archs.rs`); a sliding-layer head of its own is refused by name; `refact`
/// (ALiBi) has no rope.
#[test]
fn query_temperature_and_swa_head_keys_are_read_or_refused_by_name() {
    let mut keys = head(512, 8);
    keys.push(("attention.temperature_scale", Value::F32(0.1)));
    keys.push(("attention.temperature_length", Value::U32(16384)));
    keys.push(("rope.scaling.original_context_length", Value::U32(16384)));
    let rope = read("mistral3", &keys, &[]).unwrap();
    let config = rope.configs.single().unwrap();
    assert_eq!(
        config.query_scale,
        Some(QueryScale::Llama4Scaling {
            beta: 0.1,
            original_max_position_embeddings: 16384
        })
    );
    assert!(rope.sources.iter().any(|s| s.value == "query_scale"));
    let err = read("llama", &keys, &[]).unwrap_err().to_string();
    assert!(err.contains("llama.attention.temperature_scale"), "{err}");
    // A scale of 0 is llama.cpp's none.
    keys[2] = ("attention.temperature_scale", Value::F32(0.0));
    let rope = read(
        "deepseek2",
        &{
            let mut k = keys.clone();
            k.push(("rope.dimension_count", Value::U32(64)));
            k
        },
        &[],
    )
    .unwrap();
    assert_eq!(rope.configs.single().unwrap().query_scale, None);
    // The length is needed with a scale (deepseek2 reads it from its key).
    let mut keys = head(512, 8);
    keys.push(("attention.temperature_scale", Value::F32(0.1)));
    keys.push(("rope.dimension_count", Value::U32(64)));
    let err = read("deepseek2", &keys, &[]).unwrap_err().to_string();
    assert!(
        err.contains("deepseek2.attention.temperature_length"),
        "{err}"
    );

    let mut keys = head(512, 8);
    keys.push(("attention.key_length_swa", Value::U32(64)));
    assert!(read("gemma3", &keys, &[]).is_ok(), "the head itself");
    keys[2] = ("attention.key_length_swa", Value::U32(128));
    let err = read("gemma3", &keys, &[]).unwrap_err().to_string();
    assert!(err.contains("gemma3.attention.key_length_swa"), "{err}");

    let err = read("refact", &head(512, 8), &[]).unwrap_err().to_string();
    assert!(err.contains("\"refact\""), "{err}");
}
