//! `LlamaFamily` on M-RoPE decoders against transformers 5.24 (eager attention, f32, CPU): the
//! language models of a tiny random Qwen2-VL and Qwen3-VL (interleaved sections, qk-norm, tied
//! embeddings; `crates/pe-testkit/fixtures/models/qwen2_vl`, `qwen3_vl`, from
//! `scripts/fixtures/mrope_models.py`), each called with input ids and `(3, batch, seq)` position ids
//! from `get_rope_index` for a stream holding two image runs (non-uniform ids; the image tokens
//! are embedded as tokens, no vision tower).
//!
//! Calls: `prefill` (27 tokens), `decode` (8 greedy cached steps at `27 + s + rope_deltas` on
//! the three rows), `far20000` (the same, every id + 20,000). The ids are checked too: pe-core's
//! `QwenVlConfig::positions` and `decode` give the fixture's.
//!
//! Tolerance as `transformers.rs`: `TOL` = 1e-4 where transformers' tables are exact to f32
//! rounding (ids below 100), and at 20,000 the exactness check (ours there against transformers'
//! logits at the original ids: rope sees only differences) within `TOL`, and against
//! transformers' own far logits `TOL` plus transformers' f32 drift, which the fixture measures.

use anyhow::Result;
use candle_core::{DType, Device, IndexOp, Tensor};
use candle_pe_formats::{FromHfConfig, QwenVlConfig};
use pe_models::LlamaFamily;

const TOL: f64 = 1e-4;

fn max_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    assert_eq!(a.dims(), b.dims());
    Ok((a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()? as f64)
}

fn check(case: &str, what: &str, diff: f64, bound: f64) {
    eprintln!("{case} {what:<36} max |diff| {diff:.3e} (bound {bound:.1e})");
    assert!(diff <= bound, "{what}: {diff:e} > {bound:e}");
}

/// Prefill at `pos`, then one cached step per token of `steps` at `step_pos` `(3, 1, n)`:
/// the prefill's logits, the steps' logits `(1, n, vocab)` and the greedy ids (the prefill's
/// argmax, then each step's).
fn run(
    model: &mut LlamaFamily,
    input: &Tensor,
    pos: &Tensor,
    steps: &Tensor,
    step_pos: &Tensor,
) -> Result<(Tensor, Tensor, Vec<i64>)> {
    model.clear_cache();
    let prefill = model.forward(input, pos, None)?;
    let last = |t: &Tensor| -> Result<i64> {
        let s = t.dim(1)?;
        Ok(t.i((0, s - 1))?.argmax(0)?.to_scalar::<u32>()? as i64)
    };
    let mut ids = vec![last(&prefill)?];
    let mut logits = vec![];
    for s in 0..steps.dim(1)? {
        let out = model.forward(
            &steps.i((.., s..s + 1))?,
            &step_pos.i((.., .., s..s + 1))?,
            None,
        )?;
        ids.push(last(&out)?);
        logits.push(out);
    }
    Ok((prefill, Tensor::cat(&logits, 1)?, ids))
}

#[test]
fn qwen2_vl_language_model_matches_transformers() -> Result<()> {
    matches_transformers("qwen2_vl", &[2, 3, 3], false)
}

#[test]
fn qwen3_vl_language_model_matches_transformers() -> Result<()> {
    matches_transformers("qwen3_vl", &[6, 5, 5], true)
}

fn matches_transformers(case: &str, section: &[usize], interleaved: bool) -> Result<()> {
    let dir = pe_testkit::fixture(&format!("models/{case}"));
    let t = candle_core::safetensors::load(dir.join("outputs.safetensors"), &Device::Cpu)?;
    let json: serde_json::Value = pe_testkit::read_json(dir.join("outputs.json"));
    let get = |k: &str| t.get(k).unwrap_or_else(|| panic!("no tensor {k}")).clone();
    let ids = |k: &str| -> Result<Vec<i64>> { Ok(get(k).flatten_all()?.to_vec1::<i64>()?) };
    let mut model = LlamaFamily::from_dir(&dir, DType::F32, &Device::Cpu)?;
    assert!(model.is_mrope());
    let rope = &model.config().rope;
    assert_eq!(rope.mrope_section.as_deref(), Some(section));
    assert_eq!(rope.mrope_slots.is_alternating(), interleaved);

    // The ids: pe-core's get_rope_index and rope_deltas give the fixture's.
    let config: serde_json::Value = pe_testkit::read_json(dir.join("config.json"));
    let input = get("prefill.input_ids");
    let positions = QwenVlConfig::from_hf_config(&config)?.positions(
        &input,
        &[[1, 4, 6], [1, 8, 4]],
        &[],
        None,
        None,
    )?;
    let pos = get("prefill.position_ids");
    assert_eq!(
        positions.position_ids().flatten_all()?.to_vec1::<i64>()?,
        ids("prefill.position_ids")?
    );
    assert_eq!(
        positions.rope_deltas().to_vec1::<i64>()?,
        ids("prefill.rope_deltas")?
    );
    let steps = get("decode.input_ids");
    let n = input.dim(1)?;
    let step_pos: Vec<Tensor> = (0..steps.dim(1)?)
        .map(|s| positions.decode(&[n + s], 1))
        .collect::<candle_pe_formats::Result<_>>()?;
    let step_pos = Tensor::cat(&step_pos, 2)?;
    assert_eq!(
        step_pos.flatten_all()?.to_vec1::<i64>()?,
        ids("decode.position_ids")?
    );

    // Prefill and cached decode.
    let (prefill, decode, generated) = run(&mut model, &input, &pos, &steps, &step_pos)?;
    check(
        case,
        "prefill",
        max_diff(&prefill, &get("prefill.logits"))?,
        TOL,
    );
    check(
        case,
        "decode",
        max_diff(&decode, &get("decode.logits"))?,
        TOL,
    );
    assert_eq!(generated, ids("decode.generated_ids")?);

    // Every id + 20,000.
    let far = 20_000f64;
    let far_pos = (pos.to_dtype(DType::I64)? + far)?;
    let far_steps = get("far20000.decode_input_ids");
    let n_far = far_steps.dim(1)?;
    let far_step_pos = (step_pos.i((.., .., ..n_far))? + far)?;
    assert_eq!(
        far_step_pos.flatten_all()?.to_vec1::<i64>()?,
        ids("far20000.decode_position_ids")?
    );
    let (far_prefill, far_decode, far_generated) =
        run(&mut model, &input, &far_pos, &far_steps, &far_step_pos)?;
    check(
        case,
        "far20000 prefill vs tf prefill",
        max_diff(&far_prefill, &get("prefill.logits"))?,
        TOL,
    );
    check(
        case,
        "far20000 decode vs tf decode",
        max_diff(&far_decode, &get("decode.logits").i((.., ..n_far))?)?,
        TOL,
    );
    let drift = json["checks"]["far20000_vs_prefill_max_abs_diff"]
        .as_f64()
        .expect("the fixture's drift check");
    check(
        case,
        "far20000 prefill vs tf far20000",
        max_diff(&far_prefill, &get("far20000.logits"))?,
        TOL + drift,
    );
    let step_drift = max_diff(
        &get("far20000.decode_logits"),
        &get("decode.logits").i((.., ..n_far))?,
    )?;
    check(
        case,
        "far20000 decode vs tf far20000",
        max_diff(&far_decode, &get("far20000.decode_logits"))?,
        TOL + step_drift,
    );
    assert_eq!(far_generated, ids("far20000.generated_ids")?);
    Ok(())
}

/// 2-D position ids are text ids, the same on the three rows; other shapes are refused, naming
/// both that are taken.
#[test]
fn qwen2_vl_takes_text_ids_and_refuses_other_shapes() -> Result<()> {
    let dir = pe_testkit::fixture("models/qwen2_vl");
    let dev = Device::Cpu;
    let mut model = LlamaFamily::from_dir(&dir, DType::F32, &dev)?;
    let input = Tensor::new(&[[1u32, 87, 14, 101]], &dev)?;
    let flat = Tensor::new(&[[0i64, 1, 2, 3]], &dev)?;
    let a = model.forward(&input, &flat, None)?;
    model.clear_cache();
    let b = model.forward(&input, &flat.unsqueeze(0)?.repeat((3, 1, 1))?, None)?;
    assert_eq!(max_diff(&a, &b)?, 0.0);
    model.clear_cache();
    let err = model
        .forward(&input, &flat.unsqueeze(0)?.repeat((2, 1, 1))?, None)
        .unwrap_err();
    assert!(err.to_string().contains("(3, 1, 4) (M-RoPE)"), "{err}");
    Ok(())
}

/// A bounded cache before its first shift gives transformers' logits: the prompt at its
/// `get_rope_index` ids, then text after the largest id held, where `rope_deltas` continue it.
#[test]
fn stream_continues_from_the_deltas() -> Result<()> {
    let dir = pe_testkit::fixture("models/qwen2_vl");
    let t = candle_core::safetensors::load(dir.join("outputs.safetensors"), &Device::Cpu)?;
    let get = |k: &str| t.get(k).unwrap_or_else(|| panic!("no tensor {k}")).clone();
    let policy = pe_models::CachePolicy::Keep { keep: 4, size: 64 };
    let mut model =
        LlamaFamily::from_dir(&dir, DType::F32, &Device::Cpu)?.with_cache_policy(policy)?;
    let (input, pos) = (get("prefill.input_ids"), get("prefill.position_ids"));
    let prefill = model.forward_stream_mrope(&input, &pos)?;
    check(
        "qwen2_vl",
        "stream prefill",
        max_diff(&prefill, &get("prefill.logits"))?,
        TOL,
    );
    let steps = get("decode.input_ids");
    let mut logits = vec![];
    for s in 0..steps.dim(1)? {
        logits.push(model.forward_stream(&steps.i((.., s..s + 1))?)?);
    }
    let logits = Tensor::cat(&logits, 1)?;
    check(
        "qwen2_vl",
        "stream decode",
        max_diff(&logits, &get("decode.logits"))?,
        TOL,
    );
    let held = model.cache_mrope_positions();
    let want = Tensor::cat(&[&pos, &get("decode.position_ids")], 2)?
        .squeeze(1)?
        .t()?;
    let want: Vec<Vec<i64>> = want.to_vec2()?;
    assert_eq!(held.iter().map(|id| id.to_vec()).collect::<Vec<_>>(), want);

    // Bad input is named.
    let err = model
        .forward_stream_mrope(&input, &pos.i((.., .., ..3))?)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("position_ids must be (3, batch, seq)"),
        "{err}"
    );
    let two = Tensor::cat(&[&input, &input], 0)?;
    let mut rows = Tensor::cat(&[&pos, &pos], 1)?.to_vec3::<i64>()?;
    rows[0][1][0] = 5;
    let err = model
        .forward_stream_mrope(&two, &Tensor::new(rows, &Device::Cpu)?)
        .unwrap_err();
    assert!(err.to_string().contains("the same for every row"), "{err}");
    let mut llama = LlamaFamily::from_dir(
        pe_testkit::fixture("models/llama31"),
        DType::F32,
        &Device::Cpu,
    )?
    .with_cache_policy(policy)?;
    let err = llama.forward_stream_mrope(&input, &pos).unwrap_err();
    assert!(err.to_string().contains("needs an M-RoPE model"), "{err}");
    Ok(())
}

/// The config forms of the Hub: Qwen2-VL's fields at the top level with the legacy `mrope`
/// rope_scaling, Qwen2.5-VL's under `text_config`; Qwen3-VL ties its embeddings at the top level.
#[test]
fn qwen_vl_configs_are_read_in_both_forms() -> Result<()> {
    use pe_models::{LlamaConfig, ModelType};
    let text = serde_json::json!({
        "vocab_size": 128, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
        "rope_theta": 1e6, "max_position_embeddings": 32768,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}
    });
    let mut flat = text.clone();
    flat["model_type"] = "qwen2_vl".into();
    let nested = serde_json::json!({"model_type": "qwen2_5_vl", "text_config": text});
    for json in [flat, nested] {
        let cfg = LlamaConfig::from_hf_config(&json)?;
        assert_eq!(cfg.model_type, ModelType::Qwen2Vl);
        assert!(cfg.qkv_bias && !cfg.o_bias && !cfg.qk_norm && !cfg.tie_word_embeddings);
        assert_eq!(cfg.rope.mrope_section, Some(vec![2, 3, 3]));
        assert!(!cfg.rope.mrope_slots.is_alternating());
    }
    let dir = pe_testkit::fixture("models/qwen3_vl");
    let cfg = LlamaConfig::from_file(dir.join("config.json"))?;
    assert_eq!(cfg.model_type, ModelType::Qwen3Vl);
    assert!(cfg.qk_norm && cfg.tie_word_embeddings && cfg.rope.mrope_slots.is_alternating());
    assert_eq!(cfg.head_dim, 32);
    // Given at both levels, they must agree.
    let mut json: serde_json::Value = pe_testkit::read_json(dir.join("config.json"));
    json["text_config"]["tie_word_embeddings"] = false.into();
    let err = LlamaConfig::from_hf_config(&json).unwrap_err().to_string();
    assert!(err.contains("text_config.tie_word_embeddings"), "{err}");
    Ok(())
}
