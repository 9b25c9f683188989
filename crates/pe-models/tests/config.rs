//! The config reader's and the weight loader's errors, and a tiny random model built from a
//! `VarMap` (cache and padding consistency, independent of the fixtures).

use anyhow::Result;
use candle_core::{DType, Device, IndexOp, Tensor};
use candle_nn::{VarBuilder, VarMap};
use pe_models::{LlamaConfig, LlamaFamily, ModelType};
use serde_json::{json, Value};

fn tiny(model_type: &str) -> Value {
    json!({
        "model_type": model_type, "vocab_size": 32, "hidden_size": 32,
        "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "max_position_embeddings": 256
    })
}

/// Max |logit difference| between a cached decode and one full forward of the same random
/// model, in f32: the two sum the same terms in different orders (the matmuls have other
/// shapes), so they agree to the f32 rounding of logits of a few units, not bit for bit.
/// The weights and ids are unseeded: 25 runs of the window test measured at most 8.9e-6, one
/// CI run 1.8e-5 (over the 1e-5 it had). 1e-4 is the fixture tests' bound.
const F32_BOUND: f32 = 1e-4;

/// A model on `varmap` with random weights (a `VarMap` creates zeros: build once to create
/// the variables, fill them, build again to read them).
fn random_model(cfg: &LlamaConfig, varmap: &VarMap) -> Result<LlamaFamily> {
    let dev = Device::Cpu;
    LlamaFamily::new(cfg, VarBuilder::from_varmap(varmap, DType::F32, &dev))?;
    for var in varmap.all_vars() {
        var.set(&Tensor::randn(0f32, 0.5, var.shape(), &dev)?)?;
    }
    LlamaFamily::new(cfg, VarBuilder::from_varmap(varmap, DType::F32, &dev))
}

/// The error of reading `json` from a file `cfg.json`: the file, then the field.
fn err_of(json: &Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cfg.json");
    std::fs::write(&path, json.to_string()).unwrap();
    format!("{:#}", LlamaConfig::from_file(&path).unwrap_err())
}

#[test]
fn unsupported_model_type_names_the_file_and_field() {
    let msg = err_of(&tiny("gpt2"));
    assert!(
        msg.contains("cfg.json") && msg.contains("model_type") && msg.contains("gpt2"),
        "{msg}"
    );
}

#[test]
fn missing_fields_are_named() {
    for field in [
        "model_type",
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "rms_norm_eps",
    ] {
        let mut json = tiny("llama");
        json.as_object_mut().unwrap().remove(field);
        let msg = err_of(&json);
        assert!(
            msg.contains("cfg.json") && msg.contains(&format!("missing field {field}")),
            "{field}: {msg}"
        );
    }
    let mut json = tiny("llama");
    json["num_key_value_heads"] = json!(3);
    assert!(err_of(&json).contains("num_key_value_heads"));
    json["num_key_value_heads"] = json!("two");
    assert!(err_of(&json).contains("field num_key_value_heads"));
    let mut json = tiny("llama");
    json["hidden_act"] = json!("gelu");
    assert!(err_of(&json).contains("hidden_act"));
    let mut json = tiny("qwen2");
    json["use_sliding_window"] = json!(true);
    assert!(err_of(&json).contains("use_sliding_window"));
}

#[test]
fn from_file_names_the_file() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("config.json");
    let mut json = tiny("mistral");
    json.as_object_mut().unwrap().remove("rms_norm_eps");
    std::fs::write(&path, json.to_string())?;
    let msg = format!("{:#}", LlamaConfig::from_file(&path).unwrap_err());
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("rms_norm_eps"),
        "{msg}"
    );
    Ok(())
}

#[test]
fn reads_each_family() -> Result<()> {
    let cfg = LlamaConfig::from_hf_config(&tiny("qwen2"))?;
    assert_eq!(cfg.model_type, ModelType::Qwen2);
    assert!(cfg.qkv_bias && !cfg.o_bias && !cfg.tie_word_embeddings);
    assert_eq!((cfg.head_dim, cfg.num_key_value_heads), (8, 2));
    let mut json = tiny("mistral");
    json["sliding_window"] = json!(4);
    assert_eq!(LlamaConfig::from_hf_config(&json)?.sliding_window, Some(4));
    let mut json = tiny("llama");
    json["sliding_window"] = json!(4); // not a Llama field: ignored
    assert_eq!(LlamaConfig::from_hf_config(&json)?.sliding_window, None);
    Ok(())
}

#[test]
fn a_missing_tensor_is_named() -> Result<()> {
    let dev = Device::Cpu;
    let cfg = LlamaConfig::from_hf_config(&tiny("llama"))?;
    // Every tensor but one layer's k_proj, from a model built on a VarMap.
    let varmap = VarMap::new();
    random_model(&cfg, &varmap)?;
    let mut tensors = std::collections::HashMap::new();
    for (name, var) in varmap.data().lock().unwrap().iter() {
        tensors.insert(name.clone(), var.as_tensor().clone());
    }
    let missing = "model.layers.1.self_attn.k_proj.weight";
    assert!(tensors.remove(missing).is_some());
    let vb = VarBuilder::from_tensors(tensors, DType::F32, &dev);
    let msg = format!("{:#}", LlamaFamily::new(&cfg, vb).unwrap_err());
    assert!(msg.contains(missing), "{msg}");
    Ok(())
}

/// A random Mistral (window 3) with tied embeddings: the cached decode reproduces the full
/// forward, and a left-padded row reproduces the unpadded sequence.
#[test]
fn cache_and_padding_agree_with_full_forwards() -> Result<()> {
    let dev = Device::Cpu;
    let mut json = tiny("mistral");
    json["sliding_window"] = json!(3);
    json["tie_word_embeddings"] = json!(true);
    let cfg = LlamaConfig::from_hf_config(&json)?;
    let varmap = VarMap::new();
    let mut model = random_model(&cfg, &varmap)?;
    let ids = Tensor::new(&[[3u32, 7, 1, 9, 4, 12, 30]], &dev)?;
    let pos = Tensor::arange(0u32, 7, &dev)?.unsqueeze(0)?;
    let windowed = model.forward(&ids, &pos, None)?;
    let spread = windowed.flatten_all()?.var(0)?.to_scalar::<f32>()?;
    assert!(spread > 1e-2, "random logits expected, variance {spread}");
    model.clear_cache();
    let _ = model.forward(&ids.i((.., ..4))?, &pos.i((.., ..4))?, None)?;
    for s in 4..7 {
        let step = model.forward(&ids.i((.., s..s + 1))?, &pos.i((.., s..s + 1))?, None)?;
        let diff = (step - windowed.i((.., s..s + 1, ..))?)?.abs()?.max_all()?;
        assert!(diff.to_scalar::<f32>()? < F32_BOUND, "step {s}: {diff}");
    }
    assert_eq!(model.cached_len(), 7);

    // The same 7 tokens after 2 pads (positions count real tokens; the window counts cache
    // slots, as transformers' does, so the padded row's window also spans the pads: compare
    // the unwindowed model).
    let mut cfg = cfg;
    cfg.sliding_window = None;
    let mut model = LlamaFamily::new(&cfg, VarBuilder::from_varmap(&varmap, DType::F32, &dev))?;
    let unwindowed = model.forward(&ids, &pos, None)?;
    let first = (unwindowed.i((.., ..3, ..))? - windowed.i((.., ..3, ..))?)?
        .abs()?
        .max_all()?;
    let rest = (unwindowed.i((.., 3.., ..))? - windowed.i((.., 3.., ..))?)?
        .abs()?
        .max_all()?;
    assert!(
        first.to_scalar::<f32>()? < 1e-6 && rest.to_scalar::<f32>()? > 1e-3,
        "{first} {rest}"
    );
    model.clear_cache();
    let padded = Tensor::cat(&[&Tensor::zeros((1, 2), DType::U32, &dev)?, &ids], 1)?;
    let ppos = Tensor::cat(&[&Tensor::zeros((1, 2), DType::U32, &dev)?, &pos], 1)?;
    let mask = Tensor::new(&[[0u32, 0, 1, 1, 1, 1, 1, 1, 1]], &dev)?;
    let out = model.forward(&padded, &ppos, Some(&mask))?;
    let diff = (out.i((.., 2.., ..))? - unwindowed)?.abs()?.max_all()?;
    assert!(diff.to_scalar::<f32>()? < F32_BOUND, "{diff}");
    Ok(())
}

/// With a sliding window the KV cache holds at most `window` keys and values however long the
/// decode runs, and still gives the logits of one full forward: a left-padded batch, a prefill
/// longer than the window, then single cached steps and a two-token chunk. Without a window
/// it holds every token.
#[test]
fn sliding_window_bounds_the_kv_cache() -> Result<()> {
    let dev = Device::Cpu;
    let window = 4;
    let mut json = tiny("mistral");
    json["sliding_window"] = json!(window);
    let cfg = LlamaConfig::from_hf_config(&json)?;
    let varmap = VarMap::new();
    let mut model = random_model(&cfg, &varmap)?;
    let (prompt, len) = (6, 30);
    let ids = Tensor::rand(0f32, 32.0, (2, len), &dev)?.to_dtype(DType::U32)?;
    // Row 1 has 2 pads: its positions count real tokens only.
    let mut mask = vec![vec![1u32; len]; 2];
    mask[1][..2].fill(0);
    let pos: Vec<Vec<u32>> = mask
        .iter()
        .map(|row| {
            let mut seen = 0;
            row.iter()
                .map(|&m| {
                    seen += m;
                    seen.saturating_sub(1)
                })
                .collect()
        })
        .collect();
    let (mask, pos) = (Tensor::new(mask, &dev)?, Tensor::new(pos, &dev)?);
    let full = model.forward(&ids, &pos, Some(&mask))?;
    assert_eq!((model.cached_len(), model.kv_len()), (len, window));

    model.clear_cache();
    assert_eq!((model.cached_len(), model.kv_len()), (0, 0));
    let mut steps = vec![model.forward(
        &ids.i((.., ..prompt))?,
        &pos.i((.., ..prompt))?,
        Some(&mask.i((.., ..prompt))?),
    )?];
    let mut at = prompt;
    while at < len {
        let n = if at == 20 { 2 } else { 1 };
        let span = at..at + n;
        steps.push(model.forward(
            &ids.i((.., span.clone()))?,
            &pos.i((.., span))?,
            Some(&mask.i((.., ..at + n))?),
        )?);
        at += n;
        assert_eq!((model.cached_len(), model.kv_len()), (at, window));
    }
    // Pad queries see no key (their softmax is uniform over whatever keys are there): compare
    // the real tokens.
    let cached = Tensor::cat(&steps, 1)?;
    for (row, from) in [(0, 0), (1, 2)] {
        let diff = (cached.i((row, from..))? - full.i((row, from..))?)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(
            diff < F32_BOUND,
            "row {row}: cached decode vs full forward: {diff}"
        );
    }

    let mut cfg = cfg;
    cfg.sliding_window = None;
    let mut model = LlamaFamily::new(&cfg, VarBuilder::from_varmap(&varmap, DType::F32, &dev))?;
    model.forward(&ids, &pos, Some(&mask))?;
    assert_eq!((model.cached_len(), model.kv_len()), (len, len));
    Ok(())
}

/// Gemma 3 as transformers' `Gemma3TextConfig` defaults it: GELU-tanh, tied embeddings,
/// `query_pre_attn_scalar` 256, window 4096, one global layer in six, the legacy rope fields
/// (`rope_theta` for global layers, `rope_local_base_freq` 1e4 for sliding ones); softcapping
/// and bidirectional attention are refused by name.
#[test]
fn gemma3_reads_transformers_defaults() -> Result<()> {
    let mut json = tiny("gemma3_text");
    json["num_hidden_layers"] = json!(7);
    json["rope_theta"] = json!(1e6);
    json["rope_scaling"] = json!({"rope_type": "linear", "factor": 8.0});
    let cfg = LlamaConfig::from_hf_config(&json)?;
    assert_eq!(cfg.model_type, ModelType::Gemma3);
    assert_eq!(cfg.hidden_act, candle_nn::Activation::GeluPytorchTanh);
    assert!(cfg.tie_word_embeddings && cfg.qk_norm && cfg.sandwich_norms && cfg.norm_offset == 1.0);
    assert_eq!((cfg.head_dim, cfg.query_pre_attn_scalar), (256, 256.0));
    assert_eq!(cfg.sliding_window, Some(4096));
    assert_eq!(cfg.embedding_scale, Some(f64::from(32f32.sqrt())));
    use pe_models::LayerType::{Full, Sliding};
    assert_eq!(
        cfg.layer_types,
        [Sliding, Sliding, Sliding, Sliding, Sliding, Full, Sliding]
    );
    assert_eq!(cfg.rope.rope_theta, 1e6);
    let sliding = cfg.sliding_rope.as_ref().unwrap();
    assert_eq!(sliding.rope_theta, 1e4);
    assert_ne!(
        cfg.rope.rope_type, sliding.rope_type,
        "only global layers scale"
    );
    for (field, value) in [
        ("final_logit_softcapping", json!(30.0)),
        ("attn_logit_softcapping", json!(50.0)),
        ("use_bidirectional_attention", json!(true)),
        ("hidden_activation", json!("relu")),
    ] {
        let mut bad = json.clone();
        bad[field] = value;
        let msg = err_of(&bad);
        assert!(msg.contains(field), "{msg}");
    }
    Ok(())
}

/// SmolLM3 as its config class reads it: without `no_rope_layers` every 4th layer is NoPE,
/// embeddings are tied; its per-layer sliding window is refused by name.
#[test]
fn smollm3_reads_nope_layers_and_refuses_its_sliding_window() -> Result<()> {
    let mut json = tiny("smollm3");
    json["num_hidden_layers"] = json!(8);
    let cfg = LlamaConfig::from_hf_config(&json)?;
    assert_eq!(cfg.model_type, ModelType::SmolLM3);
    let nope: Vec<usize> = (0..8).filter(|&i| cfg.nope_layers[i]).collect();
    assert_eq!(nope, [3, 7]);
    assert!(cfg.tie_word_embeddings);
    json["no_rope_layers"] = json!([0, 1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(
        LlamaConfig::from_hf_config(&json)?.nope_layers,
        [true, false, false, false, false, false, false, false]
    );
    json["no_rope_layers"] = json!([1, 0]);
    let msg = err_of(&json);
    assert!(msg.contains("no_rope_layers"), "{msg}");
    json["no_rope_layers"] = Value::Null;
    json["use_sliding_window"] = json!(true);
    let msg = err_of(&json);
    assert!(
        msg.contains("use_sliding_window") && msg.contains("smollm3"),
        "{msg}"
    );
    Ok(())
}

/// Ministral 3's query scale comes with its rope; without `original_max_position_embeddings`
/// it is an error naming the field. `attention_bias` is ignored, as transformers does.
#[test]
fn ministral3_reads_its_query_scale() -> Result<()> {
    let mut json = tiny("ministral3");
    json["attention_bias"] = json!(true);
    json["rope_parameters"] = json!({"rope_type": "default", "rope_theta": 10000.0,
        "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 16384});
    let cfg = LlamaConfig::from_hf_config(&json)?;
    assert_eq!(cfg.model_type, ModelType::Ministral3);
    assert!(cfg.rope.query_scale.is_some());
    assert!(!cfg.qkv_bias && !cfg.o_bias && cfg.nope_layers.is_empty());
    json["rope_parameters"]["original_max_position_embeddings"] = Value::Null;
    let msg = err_of(&json);
    assert!(msg.contains("original_max_position_embeddings"), "{msg}");
    Ok(())
}

/// Llama 4 text: dense models only (transformers' default makes every layer a mixture of
/// experts), `intermediate_size_mlp` is the MLP's width, NoPE layers carry the query
/// temperature, and a cache policy is refused with chunked attention.
#[test]
fn llama4_reads_dense_models_only() -> Result<()> {
    let mut json = tiny("llama4_text");
    json["num_hidden_layers"] = json!(4);
    let msg = err_of(&json);
    assert!(
        msg.contains("moe_layers") && msg.contains("[0, 1, 2, 3]"),
        "{msg}"
    );
    json["moe_layers"] = json!([]);
    json["intermediate_size_mlp"] = json!(40);
    json["attention_chunk_size"] = json!(16);
    let cfg = LlamaConfig::from_hf_config(&json)?;
    assert_eq!(cfg.model_type, ModelType::Llama4);
    assert_eq!(cfg.intermediate_size, 40);
    assert_eq!(cfg.nope_layers, [false, false, false, true]);
    assert!(
        cfg.nope_query_scale.is_some() && cfg.qk_l2_norm && cfg.rope.pair_layout.is_interleaved()
    );
    let varmap = VarMap::new();
    let model = random_model(&cfg, &varmap)?;
    let policy = pe_models::CachePolicy::Sink {
        sink: 1,
        window: 4,
        positions: pe_models::SinkPositions::Contiguous,
    };
    let msg = model.with_cache_policy(policy).unwrap_err().to_string();
    assert!(msg.contains("attention_chunk_size"), "{msg}");
    json["attention_chunk_size"] = json!(0);
    assert!(err_of(&json).contains("attention_chunk_size"));
    Ok(())
}
