//! The architectures llama.cpp added lately (qwen35, qwen35moe, gemma4, mistral4, glm4moe with
//! sections, hunyuan_vl) and those whose graph leaves layers unrotated (cohere2, cohere2moe,
//! exaone4, granitehybrid), read by `GgufRope` from metadata-only files that PyPI's gguf writes
//! the way llama.cpp's converter does, against what llama.cpp's loader and graph read from them
//! (`scripts/fixtures/gguf_archs.py` writes both: `arch_<case>.gguf` and `arch_<case>.json`).

use candle_core::quantized::gguf_file::{Content, Value};
use candle_pe_core::{PairLayout, QueryScale, RopeConfig, RopeType};
use candle_pe_formats::{Error, FreqFactors, FromGguf, GgufRope};
use serde_json::Value as Json;

mod common;
use common::head;

const CASES: [&str; 11] = [
    "qwen35",
    "qwen35moe",
    "gemma4",
    "mistral4",
    "glm4moe_sections",
    "glm4moe",
    "hunyuan_vl",
    "cohere2",
    "cohere2moe",
    "exaone4",
    "granitehybrid",
];

fn fixture(case: &str) -> anyhow::Result<(GgufRopeOr, Json)> {
    let dir = pe_testkit::fixture("gguf");
    let mut file = std::fs::File::open(dir.join(format!("arch_{case}.gguf")))?;
    let content = Content::read(&mut file)?;
    let rope = GgufRope::from_gguf(&content, &mut file);
    let expected = pe_testkit::read_json(dir.join(format!("arch_{case}.json")));
    Ok((rope, expected))
}

type GgufRopeOr = candle_pe_formats::Result<GgufRope>;

fn usize_of(v: &Json) -> usize {
    v.as_u64().expect("an integer") as usize
}

/// One layer type's rope against llama.cpp's reading of it.
fn check_rope(case: &str, what: &str, config: &RopeConfig, want: &Json) {
    let at = format!("{case} {what}");
    assert_eq!(config.head_dim, usize_of(&want["head_dim"]), "{at}: head");
    assert_eq!(
        config.rotary_dim(),
        usize_of(&want["rotary_dim"]),
        "{at}: rotated width"
    );
    assert_eq!(
        config.rope_theta,
        want["rope_theta"].as_f64().unwrap(),
        "{at}: base"
    );
    assert_eq!(
        config.rope_type.name(),
        want["rope_type"].as_str().unwrap(),
        "{at}: rope type"
    );
    if let Some(p) = want.get("partial_rotary_factor") {
        assert_eq!(
            config.partial_rotary_factor,
            p.as_f64().unwrap(),
            "{at}: partial"
        );
    }
    let sections = want["mrope_section"]
        .as_array()
        .map(|s| s.iter().map(usize_of).collect::<Vec<_>>());
    assert_eq!(config.mrope_section, sections, "{at}: sections");
    assert_eq!(
        config.mrope_slots.is_alternating(),
        want["mrope_interleaved"].as_bool().unwrap(),
        "{at}: interleaved sections"
    );
    let query_scale = want["query_scale"]
        .as_object()
        .map(|q| QueryScale::Llama4Scaling {
            beta: q["beta"].as_f64().unwrap(),
            original_max_position_embeddings: usize_of(&q["original_max_position_embeddings"]),
        });
    assert_eq!(config.query_scale, query_scale, "{at}: query temperature");
    if let Some(y) = want.get("yarn") {
        let RopeType::Yarn(yarn) = &config.rope_type else {
            panic!("{at}: not yarn: {:?}", config.rope_type);
        };
        let f = |k: &str| y[k].as_f64().unwrap();
        assert_eq!(yarn.factor, f("factor"), "{at}");
        assert_eq!(
            yarn.original_max_position_embeddings,
            Some(usize_of(&y["original_max_position_embeddings"])),
            "{at}"
        );
        assert_eq!(
            (yarn.beta_fast, yarn.beta_slow),
            (f("beta_fast"), f("beta_slow"))
        );
        assert_eq!(yarn.mscale, Some(f("mscale")), "{at}: mscale");
        assert_eq!(yarn.mscale_all_dim, Some(f("mscale_all_dim")), "{at}");
    }
}

#[test]
fn new_architectures_read_as_llama_cpp_reads_them() -> anyhow::Result<()> {
    for case in CASES {
        let (rope, want) = fixture(case)?;
        if let Some(key) = want.get("error_key").and_then(Json::as_str) {
            let err = rope.expect_err(case);
            assert!(
                matches!(&err, Error::GgufKey { key: k, .. } if k == key),
                "{case}: {err}"
            );
            continue;
        }
        let rope = rope.map_err(|e| anyhow::anyhow!("{case}: {e}"))?;
        assert_eq!(rope.architecture, want["architecture"].as_str().unwrap());
        let layout = match want["layout"].as_str().unwrap() {
            "halves" => PairLayout::Halves,
            _ => PairLayout::Interleaved,
        };
        assert_eq!(rope.layout, layout, "{case}: pair layout");
        let layer_types = want["layer_types"].as_array().map(|t| {
            t.iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        });
        assert_eq!(
            rope.configs.layer_types().map(<[String]>::to_vec),
            layer_types,
            "{case}: layer types"
        );
        if let Some(nope) = want.get("nope_layers").and_then(Json::as_array) {
            let nope: Vec<usize> = nope.iter().map(usize_of).collect();
            let layers = rope.configs.nope_layers().map_or(0, <[bool]>::len);
            assert_eq!(unrotated(&rope, layers), nope, "{case}: NoPE layers");
        }
        for (what, config) in want["ropes"].as_object().unwrap() {
            let ours = match what.as_str() {
                "all" => rope.configs.single(),
                layer_type => rope.configs.for_layer_type(layer_type)?,
            };
            let ours = ours.unwrap_or_else(|| panic!("{case}: no rope for {what}"));
            check_rope(case, what, ours, config);
        }
    }
    Ok(())
}

/// Gemma 4's `rope_freqs` is the converter's form of proportional rope: 64 rotated pairs of a
/// 512 head, on the full layers only; the sliding layers name their own head's key.
#[test]
fn gemma4_rope_freqs_are_proportional_on_full_layers() -> anyhow::Result<()> {
    let (rope, _) = fixture("gemma4")?;
    let rope = rope?;
    assert_eq!(
        rope.freq_factors,
        Some(FreqFactors::Proportional { rotated_pairs: 64 })
    );
    let source = |layer_type: &str, value: &str| {
        rope.sources
            .iter()
            .find(|s| s.layer_type.as_deref() == Some(layer_type) && s.value == value)
            .map(|s| s.source.clone())
    };
    assert_eq!(
        source("sliding_attention", "head_dim").as_deref(),
        Some("gemma4.attention.key_length_swa")
    );
    assert_eq!(
        source("full_attention", "head_dim").as_deref(),
        Some("gemma4.attention.key_length")
    );
    Ok(())
}

/// The rope of a file of `keys` without tensors.
fn read(arch: &str, keys: &[(&str, Value)]) -> candle_pe_formats::Result<GgufRope> {
    common::read(arch, keys, &[])
}

/// Reading a file of `keys` fails for want of the key `<arch>.<suffix>`.
fn assert_missing(arch: &str, keys: &[(&str, Value)], suffix: &str) {
    let err = read(arch, keys).unwrap_err();
    let want = format!("{arch}.{suffix}");
    assert!(
        matches!(&err, Error::GgufMissing { key, .. } if *key == want),
        "{arch}: {err}"
    );
}

/// `rope.scaling.alpha` multiplies the base by `alpha^(d/(d-2))`, `d` the head, where llama.cpp's
/// loader does (hunyuan-dense, hunyuan_vl); elsewhere a value is refused by name.
#[test]
fn ntk_alpha_is_read_where_llama_cpp_applies_it() {
    let mut keys = head(1024, 8);
    keys.push(("rope.freq_base", Value::F32(10_000.0)));
    keys.push(("rope.scaling.alpha", Value::F32(1000.0)));
    let want = 10_000.0 * 1000f64.powf(128.0 / 126.0);
    for arch in ["hunyuan_vl", "hunyuan-dense"] {
        let rope = read(arch, &keys).unwrap_or_else(|e| panic!("{arch}: {e}"));
        let config = rope.configs.single().unwrap();
        assert_eq!(config.rope_theta, want, "{arch}");
        assert_eq!(rope.layout, PairLayout::Halves, "{arch}");
    }
    let err = read("hunyuan-moe", &keys).unwrap_err();
    assert!(
        matches!(&err, Error::GgufKey { key, .. } if key == "hunyuan-moe.rope.scaling.alpha"),
        "{err}"
    );
    // 0 is llama.cpp's none, on any architecture.
    keys[3] = ("rope.scaling.alpha", Value::F32(0.0));
    let rope = read("qwen2", &keys).unwrap();
    assert_eq!(rope.configs.single().unwrap().rope_theta, 10_000.0);
}

/// M-RoPE where llama.cpp's `use_mrope` says so: the first two sections non-zero.
#[test]
fn sections_switch_to_mrope_only_when_the_first_two_are_set() {
    let sections = |s: [i32; 4]| Value::Array(s.into_iter().map(Value::I32).collect());
    for arch in ["glm4", "glm4moe", "hunyuan_vl"] {
        let mut keys = head(1024, 8);
        keys.push(("rope.dimension_sections", sections([16, 24, 24, 0])));
        let rope = read(arch, &keys).unwrap_or_else(|e| panic!("{arch}: {e}"));
        let config = rope.configs.single().unwrap();
        assert_eq!(config.mrope_section, Some(vec![16, 24, 24]), "{arch}");
        assert_eq!(rope.layout, PairLayout::Halves, "{arch}");
        keys[2] = ("rope.dimension_sections", sections([64, 0, 0, 0]));
        let rope = read(arch, &keys).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(rope.configs.single().unwrap().mrope_section, None, "{arch}");
    }
}

/// Mistral 3's query temperature takes its length from the original context, as llama.cpp's
/// loader does (its converter writes no `temperature_length`); Mistral 4's from the key.
#[test]
fn query_temperature_length_is_the_rows() {
    let mut keys = head(512, 8);
    keys.push(("attention.temperature_scale", Value::F32(0.1)));
    keys.push(("rope.scaling.original_context_length", Value::U32(16384)));
    let rope = read("mistral3", &keys).unwrap();
    assert_eq!(
        rope.configs.single().unwrap().query_scale,
        Some(QueryScale::Llama4Scaling {
            beta: 0.1,
            original_max_position_embeddings: 16384
        })
    );
    // A temperature_length llama.cpp would not read, and that differs, is refused by name.
    keys.push(("attention.temperature_length", Value::U32(8192)));
    let err = read("mistral3", &keys).unwrap_err();
    assert!(
        matches!(&err, Error::GgufConflict { key, .. } if key == "mistral3.attention.temperature_length"),
        "{err}"
    );
    // Neither the original context nor context_length: an error naming the first.
    let mut keys = head(512, 8);
    keys.push(("attention.temperature_scale", Value::F32(0.1)));
    assert_missing("mistral3", &keys, "rope.scaling.original_context_length");
    // Mistral 4 needs the key.
    keys.push(("rope.dimension_count", Value::U32(64)));
    assert_missing("mistral4", &keys, "attention.temperature_length");
}

/// Gemma 4 requires its sliding pattern and its sliding head, as llama.cpp's loader does.
#[test]
fn gemma4_requires_its_pattern_and_sliding_head() {
    let mut keys = head(1024, 8);
    keys.push(("block_count", Value::U32(6)));
    keys.push(("attention.key_length", Value::U32(512)));
    keys.push(("rope.dimension_count_swa", Value::U32(256)));
    keys.push(("attention.sliding_window", Value::U32(512)));
    assert_missing("gemma4", &keys, "attention.sliding_window_pattern");
    let flags = [true, true, true, true, true, false].map(Value::Bool);
    keys.push((
        "attention.sliding_window_pattern",
        Value::Array(flags.to_vec()),
    ));
    assert_missing("gemma4", &keys, "attention.key_length_swa");
    keys.push(("attention.key_length_swa", Value::U32(256)));
    let rope = read("gemma4", &keys).unwrap();
    let sliding = rope.configs.for_layer(0).unwrap().unwrap();
    assert_eq!((sliding.head_dim, sliding.rope_theta), (256, 10_000.0));
}

/// llama.cpp's `llama_model_rope_type` (llama-cpp-python 0.3.36's llama.cpp, 0c1e57098,
/// `src/llama-model.cpp`), as it spells the architectures (`src/llama-arch.cpp`), in its order.
/// bailingmoe3 and hy_v4 return NORM from cases of their own (bailingmoe3 M-RoPE with
/// sections), dflash NEOX unless other keys say otherwise.
const LLAMA_CPP_NORM: [&str; 45] = [
    "llama",
    "llada",
    "llama4",
    "deci",
    "baichuan",
    "starcoder",
    "internlm2",
    "minicpm",
    "xverse",
    "command-r",
    "cohere2",
    "cohere2moe",
    "olmo",
    "arctic",
    "deepseek",
    "deepseek2",
    "deepseek2-ocr",
    "deepseek32",
    "deepseek4",
    "muse-glimmer",
    "plm",
    "chatglm",
    "granite",
    "granitemoe",
    "granitehybrid",
    "graniteswitch",
    "granite_swa",
    "chameleon",
    "bailingmoe",
    "neo-bert",
    "smollm3",
    "arcee",
    "ernie4_5",
    "ernie4_5-moe",
    "mistral3",
    "eagle3",
    "mistral4",
    "llama-embed",
    "maincoder",
    "glm-dsa",
    "dots3note",
    "nanbeige",
    "pockettts",
    "bailingmoe3",
    "hy_v4",
];
const LLAMA_CPP_NEOX: [&str; 74] = [
    "falcon",
    "falcon-h1",
    "grok",
    "dbrx",
    "bert",
    "jina-bert-v3",
    "modern-bert",
    "nomic-bert",
    "nomic-bert-moe",
    "eurobert",
    "stablelm",
    "bitnet",
    "qwen",
    "qwen2",
    "dream",
    "qwen2moe",
    "qwen3",
    "qwen3moe",
    "llada-moe",
    "rnd1",
    "olmo2",
    "olmoe",
    "phi2",
    "phi3",
    "phimoe",
    "plamo",
    "plamo2",
    "plamo3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3n",
    "gemma4",
    "gemma4-assistant",
    "gemma-embedding",
    "starcoder2",
    "openelm",
    "gptneox",
    "codeshell",
    "orion",
    "nemotron",
    "exaone",
    "exaone4",
    "exaone-moe",
    "minicpm3",
    "bailingmoe2",
    "dots1",
    "hunyuan-moe",
    "jais2",
    "gpt-oss",
    "hunyuan-dense",
    "hy_v3",
    "lfm2",
    "lfm2moe",
    "smallthinker",
    "seed_oss",
    "grovemoe",
    "apertus",
    "minimax-01",
    "minimax-m2",
    "minimax-m3",
    "cogvlm",
    "pangu-embedded",
    "afmoe",
    "laguna",
    "qwen3next",
    "mimo2",
    "step35",
    "spark2_5",
    "talkie",
    "mellum",
    "maple",
    "hrm_text",
    "dflash",
];
/// M-RoPE, interleaved M-RoPE, and the three that are M-RoPE with sections (NORM or NEOX
/// without: glm4 is NORM, glm4moe and hunyuan_vl NEOX).
const LLAMA_CPP_MROPE: [&str; 2] = ["qwen2vl", "paddleocr"];
const LLAMA_CPP_IMROPE: [&str; 6] = [
    "qwen3vl",
    "qwen3vlmoe",
    "qwen35",
    "qwen35moe",
    "qwen4exp",
    "qwen3tts",
];
const LLAMA_CPP_NONE: [&str; 23] = [
    "clip",
    "gpt2",
    "gptj",
    "mpt",
    "refact",
    "bloom",
    "mamba",
    "mamba2",
    "jamba",
    "jina-bert-v2",
    "t5",
    "t5encoder",
    "jais",
    "rwkv6",
    "rwkv6qwen2",
    "rwkv7",
    "arwkv7",
    "wavtokenizer-dec",
    "nemotron_h",
    "nemotron_h_moe",
    "kimi-linear",
    "kimi-k3",
    "glm5-next",
];
/// Rope architectures with a quirk no row field expresses yet, refused by their name
/// (docs/gguf.md says each one's quirk), and the two whose graph turns nothing (bert,
/// starcoder: learned position tables).
const NOT_ROWS: [&str; 20] = [
    "bert",
    "starcoder",
    "glm-dsa",
    "deepseek32",
    "deepseek4",
    "dots3note",
    "hy_v4",
    "smallthinker",
    "muse-glimmer",
    "maple",
    "mellum",
    "laguna",
    "spark2_5",
    "gemma4-assistant",
    "step35",
    "granite_swa",
    "graniteswitch",
    "bailingmoe3",
    "dflash",
    "qwen3tts",
];

/// Every rope architecture of llama.cpp is a row with its pair layout (or one of [`NOT_ROWS`],
/// refused); every architecture without rope is refused, naming `general.architecture`.
#[test]
fn rows_follow_llama_cpps_rope_types() {
    let sections = Value::Array([22, 21, 21, 0].into_iter().map(Value::I32).collect());
    let kinds = [
        (&LLAMA_CPP_NORM[..], PairLayout::Interleaved, None),
        (&LLAMA_CPP_NEOX[..], PairLayout::Halves, None),
        (&LLAMA_CPP_MROPE[..], PairLayout::Halves, Some(false)),
        (&LLAMA_CPP_IMROPE[..], PairLayout::Halves, Some(true)),
    ];
    let refused = |arch: &str| {
        let err = read(arch, &head(1024, 8)).unwrap_err();
        assert!(
            matches!(&err, Error::GgufKey { key, .. } if key == "general.architecture"),
            "{arch}: {err}"
        );
    };
    for (names, layout, mrope) in kinds {
        for &arch in names {
            if NOT_ROWS.contains(&arch) {
                refused(arch);
                continue;
            }
            let mut keys = head(1024, 8);
            // The whole head: DeepSeek-2's head is its rotated part.
            keys.push(("rope.dimension_count", Value::U32(128)));
            // Sliding rows that require their pattern get one.
            keys.push(("block_count", Value::U32(2)));
            let flags = vec![Value::Bool(true), Value::Bool(false)];
            keys.push(("attention.sliding_window_pattern", Value::Array(flags)));
            keys.push(("attention.key_length_swa", Value::U32(128)));
            // cohere2moe's dense lead, which turns whatever its layers' type.
            keys.push(("leading_dense_block_count", Value::U32(0)));
            if mrope.is_some() {
                keys.push(("rope.dimension_sections", sections.clone()));
            }
            let rope = read(arch, &keys).unwrap_or_else(|e| panic!("{arch}: {e}"));
            assert_eq!(rope.layout, layout, "{arch}");
            // The full layer, or the sliding one where the full layers do not turn.
            let config = [1, 0]
                .into_iter()
                .find_map(|l| rope.configs.for_layer(l).unwrap())
                .unwrap_or_else(|| panic!("{arch}: no layer turns"));
            assert_eq!(config.mrope_section.is_some(), mrope.is_some(), "{arch}");
            assert_eq!(
                config.mrope_slots.is_alternating(),
                mrope == Some(true),
                "{arch}"
            );
        }
    }
    // bert and starcoder: the error says why.
    for arch in ["bert", "starcoder"] {
        let err = read(arch, &head(1024, 8)).unwrap_err().to_string();
        assert!(err.contains("learned position_embd table"), "{arch}: {err}");
    }
    // M-RoPE only with sections: NORM or NEOX without.
    for (arch, layout) in [
        ("glm4", PairLayout::Interleaved),
        ("glm4moe", PairLayout::Halves),
        ("hunyuan_vl", PairLayout::Halves),
    ] {
        let rope = read(arch, &head(1024, 8)).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(rope.layout, layout, "{arch}");
        assert_eq!(rope.configs.single().unwrap().mrope_section, None, "{arch}");
    }
    for arch in LLAMA_CPP_NONE {
        refused(arch);
    }
}

/// The sliding defaults of the rows that have them, where the file omits the keys: Gemma 3n's
/// period 5 and EmbeddingGemma's 6 (sliding base 10000, unscaled), MiMo-V2's required pattern.
#[test]
fn sliding_defaults_are_the_rows() {
    let mut keys = head(1024, 8);
    keys.push(("block_count", Value::U32(12)));
    keys.push(("rope.freq_base", Value::F32(1_000_000.0)));
    keys.push(("attention.sliding_window", Value::U32(512)));
    for (arch, period) in [("gemma3n", 5), ("gemma-embedding", 6)] {
        let rope = read(arch, &keys).unwrap_or_else(|e| panic!("{arch}: {e}"));
        for layer in 0..12 {
            let config = rope.configs.for_layer(layer).unwrap().unwrap();
            let theta = if (layer + 1) % period == 0 { 1e6 } else { 1e4 };
            assert_eq!(config.rope_theta, theta, "{arch} layer {layer}");
        }
    }
    assert_missing("mimo2", &keys, "attention.sliding_window_pattern");
}

/// The NoPE layers llama.cpp sets in code (llama-cpp-python 0.3.36's llama.cpp, 0c1e57098:
/// `n_no_rope_layer_step` in the smollm3, afmoe and llama4 loaders and graphs): every fourth
/// layer, `(i + 1) % 4 == 0`, Llama 4's with its query temperature; the same layers and factor
/// as transformers' SmolLM3, AFMoE and Llama 4 configs give. A llama4 file whose window is 0 rotates
/// every layer; `block_count` is required; `RopeConfig::from_gguf` refuses the file, naming the
/// first NoPE layer.
#[test]
fn nope_layers_are_llama_cpps() {
    use candle_pe_core::RopeConfigs;
    use candle_pe_formats::FromHfConfig;
    let mut keys = head(1024, 8);
    keys.push(("block_count", Value::U32(8)));
    let layers_without = |configs: &RopeConfigs| -> Vec<usize> {
        (0..8)
            .filter(|&l| configs.for_layer(l).unwrap().is_none())
            .collect()
    };
    let temperature = QueryScale::AttnTemperature {
        floor_scale: 8192,
        attn_scale: 0.1,
    };
    for (arch, model_type, scale) in [
        ("smollm3", Some("smollm3"), None),
        ("afmoe", Some("afmoe"), None),
        ("llama4", Some("llama4_text"), Some(temperature)),
    ] {
        let rope = read(arch, &keys).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(layers_without(&rope.configs), [3, 7], "{arch}");
        assert_eq!(rope.configs.query_scale(3).unwrap(), scale, "{arch}");
        assert_eq!(rope.configs.query_scale(2).unwrap(), None, "{arch}");
        assert_nope_source(&rope, "(i + 1) % 4 == 0");
        if let Some(model_type) = model_type {
            let json = serde_json::json!({"model_type": model_type, "head_dim": 128,
                "num_hidden_layers": 8});
            let hf = RopeConfigs::from_hf_config(&json).unwrap();
            assert_eq!(hf.nope_layers(), rope.configs.nope_layers(), "{arch}");
            assert_eq!(hf.query_scale(3).unwrap(), scale, "{arch}");
        }
        let (content, mut reader) = common::file(arch, &keys, &[]);
        let err = RopeConfig::from_gguf(&content, &mut reader).unwrap_err();
        assert!(
            err.to_string().contains("layer 3 has no rotary"),
            "{arch}: {err}"
        );
        let mut no_count = head(1024, 8);
        no_count.push(("rope.freq_base", Value::F32(10_000.0)));
        assert_missing(arch, &no_count, "block_count");
    }
    keys.push(("attention.sliding_window", Value::U32(0)));
    let windowless = read("llama4", &keys).unwrap();
    assert!(layers_without(&windowless.configs).is_empty());
    assert_eq!(windowless.configs.query_scale(3).unwrap(), None);
    // A window of 0 changes nothing for the others.
    let smollm3 = read("smollm3", &keys).unwrap();
    assert_eq!(layers_without(&smollm3.configs), [3, 7]);
}

/// olmo2 as llama.cpp reads it: an OLMo 2 file (no window) turns every layer by the file's
/// rope; an OLMo 3 file (a window) has every fourth layer global, scaled by the file's YaRN,
/// and its sliding layers at the same base with no scaling (llama.cpp's olmo2 graph).
#[test]
fn olmo3_scales_only_its_global_layers() {
    let mut keys = head(4096, 32);
    keys.push(("block_count", Value::U32(8)));
    keys.push(("rope.freq_base", Value::F32(500_000.0)));
    keys.push(("rope.scaling.type", Value::String("yarn".into())));
    keys.push(("rope.scaling.factor", Value::F32(8.0)));
    keys.push(("rope.scaling.original_context_length", Value::U32(8192)));
    let olmo2 = read("olmo2", &keys).unwrap();
    let all_yarn = (0..8).all(|layer| {
        let config = olmo2.configs.for_layer(layer).unwrap().unwrap();
        config.rope_type.name() == "yarn"
    });
    assert!(all_yarn && olmo2.configs.single().is_some());
    keys.push(("attention.sliding_window", Value::U32(4096)));
    let olmo3 = read("olmo2", &keys).unwrap();
    for layer in 0..8 {
        let config = olmo3.configs.for_layer(layer).unwrap().unwrap();
        let kind = if (layer + 1) % 4 == 0 {
            "yarn"
        } else {
            "default"
        };
        assert_eq!(config.rope_type.name(), kind, "layer {layer}");
        assert_eq!(config.rope_theta, 500_000.0, "layer {layer}");
    }
    let sliding = |value: &str| {
        let mut of = olmo3.sources.iter();
        of.find(|s| s.layer_type.as_deref() == Some("sliding_attention") && s.value == value)
            .map(|s| s.source.as_str())
    };
    assert_eq!(
        sliding("rope_type"),
        Some("default (unscaled: OLMo 3's sliding layers)")
    );
    assert_eq!(sliding("rope_theta"), Some("olmo2.rope.freq_base"));
}

/// plamo3 as llama.cpp reads it: sliding layers only in a file with a window, every eighth
/// layer global, the sliding ones at the full layers' base (or `rope.freq_base_swa`) and with
/// the file's scaling.
#[test]
fn plamo3_slides_only_with_a_window() {
    let mut keys = head(2048, 16);
    keys.push(("block_count", Value::U32(16)));
    keys.push(("rope.freq_base", Value::F32(1e6)));
    keys.push(("rope.scaling.type", Value::String("linear".into())));
    keys.push(("rope.scaling.factor", Value::F32(2.0)));
    assert!(read("plamo3", &keys).unwrap().configs.single().is_some());
    keys.push(("attention.sliding_window", Value::U32(2048)));
    keys.push(("rope.freq_base_swa", Value::F32(1e4)));
    let rope = read("plamo3", &keys).unwrap();
    for layer in 0..16 {
        let config = rope.configs.for_layer(layer).unwrap().unwrap();
        let theta = if (layer + 1) % 8 == 0 { 1e6 } else { 1e4 };
        assert_eq!(config.rope_theta, theta, "layer {layer}");
        assert_eq!(config.rope_type.name(), "linear", "layer {layer}");
    }
}

/// modern-bert as llama.cpp reads it: sliding layers only in a file with a window, every third
/// layer global from the first (`dense_first`), the sliding ones at `rope.freq_base_swa`.
#[test]
fn modern_bert_is_global_from_its_first_layer() {
    let mut keys = head(768, 12);
    keys.push(("block_count", Value::U32(6)));
    keys.push(("rope.freq_base", Value::F32(160_000.0)));
    assert!(read("modern-bert", &keys)
        .unwrap()
        .configs
        .single()
        .is_some());
    keys.push(("attention.sliding_window", Value::U32(128)));
    keys.push(("rope.freq_base_swa", Value::F32(1e4)));
    let rope = read("modern-bert", &keys).unwrap();
    let thetas: Vec<f64> = (0..6)
        .map(|layer| rope.configs.for_layer(layer).unwrap().unwrap().rope_theta)
        .collect();
    assert_eq!(thetas, [1.6e5, 1e4, 1e4, 1.6e5, 1e4, 1e4]);
}

/// The source `rope` names for its NoPE layers says `text`.
fn assert_nope_source(rope: &GgufRope, text: &str) {
    let source = rope.sources.iter().find(|s| s.value == "no_rope_layers");
    assert!(
        source.is_some_and(|s| s.source.contains(text)),
        "{text}: {:?}",
        rope.sources
    );
}

/// The layers of an 8-layer (or `layers`-layer) file that do not turn.
fn unrotated(rope: &GgufRope, layers: usize) -> Vec<usize> {
    (0..layers)
        .filter(|&l| rope.configs.for_layer(l).unwrap().is_none())
        .collect()
}

/// One flag per layer, true for sliding: every fourth layer full, the last of each four.
fn every_fourth_full(layers: usize) -> Value {
    Value::Array((0..layers).map(|i| Value::Bool((i + 1) % 4 != 0)).collect())
}

/// The rows whose llama.cpp graph turns only the sliding layers (llama-cpp-python 0.3.36's
/// llama.cpp, 0c1e57098: `if (is_swa)` in cohere2's, `is_swa || force_rope` in cohere2moe's,
/// `is_swa(il) || swa_type == NONE` in exaone4's, `is_local_layer` in exaone-moe's graph):
/// their full-attention layers are NoPE, from the file's pattern or llama.cpp's default period,
/// with the same layers as transformers' Cohere 2 and EXAONE 4 configs.
#[test]
fn only_the_sliding_layers_turn_where_llama_cpps_graph_says() {
    use candle_pe_core::RopeConfigs;
    use candle_pe_formats::FromHfConfig;
    let mut keys = head(1024, 8);
    keys.push(("block_count", Value::U32(8)));
    keys.push(("attention.sliding_window", Value::U32(4096)));
    // Without a pattern: llama.cpp's default, every fourth layer full, the last of each four.
    for arch in ["cohere2", "exaone-moe"] {
        let rope = read(arch, &keys).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(unrotated(&rope, 8), [3, 7], "{arch}");
        assert_nope_source(&rope, "every 4th layer, the last");
        let (content, mut reader) = common::file(arch, &keys, &[]);
        let err = RopeConfig::from_gguf(&content, &mut reader).unwrap_err();
        assert!(err.to_string().contains("layer 3 has no rotary"), "{err}");
    }
    // transformers reads the same layers from the config.json the file was converted from.
    for (arch, model_type) in [("cohere2", "cohere2"), ("exaone-moe", "exaone_moe")] {
        let json = serde_json::json!({"model_type": model_type, "head_dim": 128,
            "num_hidden_layers": 8, "sliding_window": 4096});
        let hf = RopeConfigs::from_hf_config(&json).unwrap();
        let rope = read(arch, &keys).unwrap();
        assert_eq!(hf.nope_layers(), rope.configs.nope_layers(), "{arch}");
    }
    // The converters' flags.
    let mut flagged = keys.clone();
    let flags: Vec<Value> = [true, false, true, true, false, true, true, true]
        .into_iter()
        .map(Value::Bool)
        .collect();
    flagged.push(("attention.sliding_window_pattern", Value::Array(flags)));
    let rope = read("cohere2", &flagged).unwrap();
    assert_eq!(unrotated(&rope, 8), [1, 4]);
    // A period.
    let mut period = keys.clone();
    period.push(("attention.sliding_window_pattern", Value::U32(2)));
    assert_eq!(
        unrotated(&read("exaone-moe", &period).unwrap(), 8),
        [1, 3, 5, 7]
    );
    // The sliding layers turn at rope.freq_base: another sliding base is refused by name, the
    // same one is not.
    let mut swa = keys.clone();
    swa.push(("rope.freq_base", Value::F32(10_000.0)));
    swa.push(("rope.freq_base_swa", Value::F32(10_000.0)));
    assert_eq!(unrotated(&read("cohere2", &swa).unwrap(), 8), [3, 7]);
    swa.pop();
    swa.push(("rope.freq_base_swa", Value::F32(500.0)));
    let err = read("cohere2", &swa).unwrap_err();
    assert!(
        err.to_string().contains("cohere2.rope.freq_base_swa"),
        "{err}"
    );
    // block_count is required.
    assert_missing("cohere2", &head(1024, 8), "block_count");
}

/// cohere2moe: the converter's flags, and the first `leading_dense_block_count` layers turn
/// whatever their type (`force_rope`), the key required; without flags, llama.cpp's default
/// puts the full layer first in each four (`dense_first`).
#[test]
fn cohere2moe_turns_its_dense_lead() {
    let mut keys = head(1024, 8);
    keys.push(("block_count", Value::U32(8)));
    keys.push(("attention.sliding_window", Value::U32(4096)));
    assert_missing("cohere2moe", &keys, "leading_dense_block_count");
    keys.push(("leading_dense_block_count", Value::U32(1)));
    assert_eq!(unrotated(&read("cohere2moe", &keys).unwrap(), 8), [4]);
    keys.push(("attention.sliding_window_pattern", every_fourth_full(8)));
    assert_eq!(unrotated(&read("cohere2moe", &keys).unwrap(), 8), [3, 7]);
    keys.retain(|(k, _)| *k != "leading_dense_block_count");
    keys.push(("leading_dense_block_count", Value::U32(4)));
    let rope = read("cohere2moe", &keys).unwrap();
    assert_eq!(unrotated(&rope, 8), [7]);
    assert_nope_source(&rope, "but the first 4");
}

/// exaone4: llama.cpp's loader gives sliding layers only to its 64-layer file (EXAONE 4.0 32B);
/// the 1.2B's 30 layers all turn, whatever the pattern says.
#[test]
fn exaone4_slides_only_at_64_layers() {
    let mut keys = head(1024, 8);
    keys.push(("attention.sliding_window", Value::U32(4096)));
    keys.push(("block_count", Value::U32(64)));
    keys.push(("attention.sliding_window_pattern", every_fourth_full(64)));
    let rope = read("exaone4", &keys).unwrap();
    let full: Vec<usize> = (0..64).filter(|i| (i + 1) % 4 == 0).collect();
    assert_eq!(unrotated(&rope, 64), full);
    let mut small = head(1024, 8);
    small.push(("attention.sliding_window", Value::U32(4096)));
    small.push(("block_count", Value::U32(30)));
    small.push(("attention.sliding_window_pattern", every_fourth_full(30)));
    let rope = read("exaone4", &small).unwrap();
    assert_eq!(unrotated(&rope, 30), Vec::<usize>::new());
    assert_nope_source(&rope, "only to a file of 64 blocks");
}

/// Granite's rope switch: llama.cpp's granite and granitehybrid loaders read
/// `rope.scaling.finetuned = false` as no rope on any layer (Granite 4.0-H's converter writes
/// it), as transformers' GraniteMoeHybrid without `position_embedding_type = "rope"`;
/// granitemoe's loader does not read it.
#[test]
fn granites_rope_switch_turns_every_layer_off() {
    use candle_pe_core::RopeConfigs;
    use candle_pe_formats::FromHfConfig;
    let mut keys = head(1024, 8);
    keys.push(("block_count", Value::U32(4)));
    keys.push(("rope.scaling.finetuned", Value::Bool(false)));
    for arch in ["granite", "granitehybrid"] {
        let rope = read(arch, &keys).unwrap();
        assert_eq!(unrotated(&rope, 4), [0, 1, 2, 3], "{arch}");
    }
    let rope = read("granitemoe", &keys).unwrap();
    assert_eq!(unrotated(&rope, 4), Vec::<usize>::new());
    let hf = serde_json::json!({"model_type": "granitemoehybrid", "head_dim": 128,
        "num_hidden_layers": 4, "position_embedding_type": "nope"});
    let hf = RopeConfigs::from_hf_config(&hf).unwrap();
    let rope = read("granitehybrid", &keys).unwrap();
    assert_eq!(hf.nope_layers(), rope.configs.nope_layers());
    let hf = serde_json::json!({"model_type": "granitemoehybrid", "head_dim": 128,
        "num_hidden_layers": 4, "position_embedding_type": "rope"});
    assert_eq!(
        RopeConfigs::from_hf_config(&hf).unwrap().nope_layers(),
        None
    );
    keys.retain(|(k, _)| *k != "rope.scaling.finetuned");
    keys.push(("rope.scaling.finetuned", Value::Bool(true)));
    let rope = read("granitehybrid", &keys).unwrap();
    assert_eq!(unrotated(&rope, 4), Vec::<usize>::new());
    let mut no_count = head(1024, 8);
    no_count.push(("rope.scaling.finetuned", Value::Bool(false)));
    assert_missing("granite", &no_count, "block_count");
}
