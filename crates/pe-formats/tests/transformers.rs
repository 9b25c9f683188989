//! The rotary tables against transformers' own rotary classes (fixtures written by
//! `scripts/fixtures/rope.py` with transformers 5.24.0): the same config.json gives the same
//! frequencies, attention factor and tables.
//!
//! transformers computes in f32: its frequencies are within a few f32 ulps of the exact ones,
//! and its angles `p * w` are rounded to f32, so its tables drift from the exact ones by about
//! `p * w * 2^-23`. The tolerances below are those, and no wider.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_pe_core::At;
use candle_pe_core::{Dynamic, LongropePolicy};
use candle_pe_core::{Rope, RopeConfig, RopeConfigs, RopeType};
use candle_pe_formats::FromHfConfig;

/// A fixture: its JSON description and its tensors.
struct Fixture {
    json: serde_json::Value,
    tensors: HashMap<String, Tensor>,
}

fn fixture(name: &str) -> anyhow::Result<Fixture> {
    let dir = pe_testkit::fixture("rope");
    let json = pe_testkit::read_json(dir.join(format!("{name}.json")));
    let tensors =
        candle_core::safetensors::load(dir.join(format!("{name}.safetensors")), &Device::Cpu)?;
    Ok(Fixture { json, tensors })
}

impl Fixture {
    fn tensor(&self, name: &str) -> anyhow::Result<Vec<f64>> {
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no tensor {name}"))?;
        Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
    }
}

/// What one call is checked with.
struct Call<'a> {
    fixture: &'a Fixture,
    name: String,
    call: &'a serde_json::Value,
}

impl Call<'_> {
    fn tensor_name(&self, key: &str) -> String {
        self.call["tensors"][key].as_str().unwrap().to_string()
    }
}

/// Largest difference seen, for the report: `(frequency ulps, table error / tolerance)`.
type Worst = (f64, f64);

/// Frequencies, attention factor and tables of one call equal transformers', with the
/// frequencies of a sequence of `freq_len` positions.
fn check_call(rope: &Rope, c: &Call, freq_len: usize) -> anyhow::Result<Worst> {
    let name = &c.name;
    let theirs = c.fixture.tensor(&c.tensor_name("inv_freq"))?;
    let ours = rope.inv_freq(freq_len);
    assert_eq!(ours.len(), theirs.len(), "{name}: frequency count");
    let mut worst_ulps = 0f64;
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        if *o == 0.0 || *t == 0.0 {
            assert_eq!(o, t, "{name}: inv_freq[{i}] (a zero frequency)");
            continue;
        }
        // Two f32 roundings and a pow that is not always correctly rounded: 4 ulps of f32.
        let ulps = ((o - t) / o).abs() / f32::EPSILON as f64;
        worst_ulps = worst_ulps.max(ulps);
        assert!(
            ulps <= 4.0,
            "{name}: inv_freq[{i}] = {o:e}, transformers {t:e} ({ulps} ulps)"
        );
    }
    let attention = c.call["attention_scaling_after_call"].as_f64().unwrap();
    assert!(
        (rope.attention_scaling() - attention).abs() <= 1e-12,
        "{name}: attention scaling {} vs {attention}",
        rope.attention_scaling()
    );

    // Tables at transformers' positions: theirs are (1, n, rotary_dim) with both halves alike,
    // or (1, n, rotary_dim / 2) (gpt-oss); M-RoPE ids are (3, 1, n).
    let ids = &c.fixture.tensors[&c.tensor_name("position_ids")];
    let mrope = ids.dims().len() == 3;
    let (cos, sin) = if mrope {
        rope.at(At::mrope(ids), DType::F64)?
    } else {
        rope.at(At::positions(ids).with_tracked_len(freq_len), DType::F64)?
    };
    let half = rope.half_dim();
    let rows: Vec<Vec<i64>> = if mrope {
        ids.squeeze(1)?.to_vec2::<i64>()?
    } else {
        vec![ids.flatten_all()?.to_vec1::<i64>()?]
    };
    let n = rows[0].len();
    let section = rope.config().mrope_section.clone();
    // The position slot i of row r takes: M-RoPE's axis by the same rule, checked by value below.
    let position = |r: usize, i: usize| -> i64 {
        match &section {
            None => rows[0][r],
            Some(s) => rows[mrope_axis(s, rope.config().mrope_slots.is_alternating(), i)][r],
        }
    };
    let width = c.call["cos_shape"][2].as_u64().unwrap() as usize;
    let duplicated = width == 2 * half;
    assert!(duplicated || width == half, "{name}: width {width}");
    let mut worst_table = 0f64;
    for (what, ours, theirs) in [
        ("cos", cos, c.fixture.tensor(&c.tensor_name("cos"))?),
        ("sin", sin, c.fixture.tensor(&c.tensor_name("sin"))?),
    ] {
        let ours = ours.flatten_all()?.to_vec1::<f64>()?;
        assert_eq!(ours.len(), n * half, "{name}: {what} size");
        for r in 0..n {
            for i in 0..half {
                let p = position(r, i);
                let w = ours[r * half + i];
                let t = theirs[r * width + i];
                let tol = (4.0
                    * (p as f64 * ours_freq(rope, freq_len, i)).max(1.0)
                    * f32::EPSILON as f64)
                    * attention.max(1.0);
                worst_table = worst_table.max((w - t).abs() / tol);
                assert!(
                    (w - t).abs() <= tol,
                    "{name}: {what}[p={p}, i={i}] = {w}, transformers {t} (tolerance {tol:e})"
                );
                if duplicated {
                    assert_eq!(t, theirs[r * width + half + i], "{name}: halves");
                }
            }
        }
    }
    Ok((worst_ulps, worst_table))
}

fn ours_freq(rope: &Rope, seq_len: usize, i: usize) -> f64 {
    rope.inv_freq(seq_len)[i].abs()
}

/// The row of M-RoPE ids that slot `k` takes, as the notes write it (independently of the
/// library).
fn mrope_axis(section: &[usize], interleaved: bool, k: usize) -> usize {
    if interleaved {
        if k % 3 == 1 && k < 3 * section[1] {
            1
        } else if k % 3 == 2 && k < 3 * section[2] {
            2
        } else {
            0
        }
    } else if k < section[0] {
        0
    } else if k < section[0] + section[1] {
        1
    } else {
        2
    }
}

/// Every call of fixture `name`, each with the frequencies of its `seq_len` (or the length
/// `freq_len` picks), returning the worst differences.
fn matches_transformers_with(
    name: &str,
    policy: LongropePolicy,
    freq_len: impl Fn(&serde_json::Value) -> usize,
) -> anyhow::Result<Worst> {
    let fx = fixture(name)?;
    let configs = RopeConfigs::from_hf_config(&fx.json["config_input"])?;
    let mut worst: Worst = (0.0, 0.0);
    for call in fx.json["calls"].as_array().unwrap() {
        let config = match call["layer_type"].as_str() {
            Some(t) => configs.for_layer_type(t)?.unwrap().clone(),
            None => RopeConfig::from_hf_config(&fx.json["config_input"])?,
        };
        let rope = Rope::new(config)?.with_longrope_policy(policy)?;
        let c = Call {
            fixture: &fx,
            name: format!("{name}/{}", call["name"].as_str().unwrap()),
            call,
        };
        let w = check_call(&rope, &c, freq_len(call))?;
        eprintln!(
            "{}: max inv_freq difference {:.3} f32 ulps, max table error {:.3} of the \
             tolerance, attention {}",
            c.name,
            w.0,
            w.1,
            rope.attention_scaling()
        );
        worst = (worst.0.max(w.0), worst.1.max(w.1));
    }
    Ok(worst)
}

fn matches_transformers(name: &str) -> anyhow::Result<Worst> {
    matches_transformers_with(name, LongropePolicy::Transformers, |call| {
        call["seq_len"].as_u64().unwrap() as usize
    })
}

#[test]
fn llama31() -> anyhow::Result<()> {
    matches_transformers("llama31").map(drop)
}

#[test]
fn qwen25_yarn() -> anyhow::Result<()> {
    matches_transformers("qwen25_yarn").map(drop)
}

#[test]
fn deepseek_v3() -> anyhow::Result<()> {
    let fx = fixture("deepseek_v3")?;
    let c = RopeConfig::from_hf_config(&fx.json["config_input"])?;
    assert_eq!((c.head_dim, c.rotary_dim()), (64, 64), "qk_rope_head_dim");
    // transformers' DeepseekV3Config defaults rope_interleave to true; the config.json omits it.
    assert_eq!(
        c.pair_layout.is_interleaved(),
        fx.json["rope_interleave"].as_bool().unwrap()
    );
    assert!(c.pair_layout.is_interleaved());
    // The attention's softmax scale, qk_head_dim^-0.5 * mscale(40, 1)^2, as transformers' f64
    // Python computes it: a product of three f64 roundings, so within 4 f64 ulps.
    let qk_head_dim = fx.json["qk_head_dim"].as_f64().unwrap();
    let theirs = fx.json["softmax_scale"].as_f64().unwrap();
    let ours = Rope::new(c)?.softmax_scale() * qk_head_dim.powf(-0.5);
    let ulps = ((ours - theirs) / theirs).abs() / f64::EPSILON;
    eprintln!("deepseek_v3: softmax scale {ours} vs {theirs}, {ulps} f64 ulps");
    assert!(ulps <= 4.0, "softmax scale {ours}, transformers {theirs}");
    matches_transformers("deepseek_v3").map(drop)
}

/// HunYuan's `dynamic` with `alpha`: fixed NTK, the same frequencies at every length
/// (transformers' `ntk_alpha`), dense and MoE.
#[test]
fn hunyuan() -> anyhow::Result<()> {
    for name in ["hunyuan_dense", "hunyuan_moe"] {
        let fx = fixture(name)?;
        assert_eq!(fx.json["rope_type"], "ntk_alpha", "{name}");
        let c = RopeConfig::from_hf_config(&fx.json["config_input"])?;
        assert_eq!(c.rope_type.name(), "ntk_alpha", "{name}");
        assert_eq!(Rope::new(c)?.fixed_up_to(), None, "{name}");
        matches_transformers(name)?;
    }
    Ok(())
}

#[test]
fn gpt_oss() -> anyhow::Result<()> {
    let fx = fixture("gpt_oss")?;
    let RopeType::Yarn(y) = RopeConfig::from_hf_config(&fx.json["config_input"])?.rope_type else {
        panic!("gpt-oss is yarn")
    };
    assert!(!y.truncate);
    matches_transformers("gpt_oss").map(drop)
}

/// All four calls (short, the first long one, long, short again) with transformers' policy;
/// with vLLM's, every call has the long frequencies.
fn longrope(name: &str) -> anyhow::Result<()> {
    matches_transformers(name)?;
    let fx = fixture(name)?;
    let config = RopeConfig::from_hf_config(&fx.json["config_input"])?;
    assert_eq!(config.rope_type.name(), "longrope");
    let vllm = Rope::new(config.clone())?.with_longrope_policy(LongropePolicy::Vllm)?;
    let hf = Rope::new(config)?;
    for len in [1, 4096, 4097, 131072] {
        assert_eq!(vllm.inv_freq(len), hf.inv_freq(131072), "vllm at {len}");
    }
    assert_ne!(hf.inv_freq(4096), hf.inv_freq(4097));
    assert_eq!(hf.fixed_up_to(), Some(4096));
    Ok(())
}

#[test]
fn phi3_longrope() -> anyhow::Result<()> {
    longrope("phi3_longrope")
}

#[test]
fn phi4_mini_longrope() -> anyhow::Result<()> {
    let fx = fixture("phi4_mini_longrope")?;
    let c = RopeConfig::from_hf_config(&fx.json["config_input"])?;
    assert_eq!((c.head_dim, c.rotary_dim()), (128, 96));
    longrope("phi4_mini_longrope")
}

/// Phi-3.5-MoE: transformers' `PhimoeRotaryEmbedding` multiplies cos and sin by `short_mscale`
/// for sequences up to `original_max_position_embeddings` and by `long_mscale` past it, in place
/// of longrope's attention factor (its `attention_scaling` attribute, 1.190 here).
///
/// Its forward recomputes the frequencies without the sequence length, so its angles use the
/// short factors in every call; the model's own code (and this crate, and transformers' Phi-3)
/// use the long factors past the original length, with `long_mscale`. The short calls are
/// checked whole; the long ones by their amplitude `sqrt(cos^2 + sin^2)`, the mscale alone.
#[test]
fn phimoe_mscales() -> anyhow::Result<()> {
    let fx = fixture("phimoe_longrope")?;
    let config = RopeConfig::from_hf_config(&fx.json["config_input"])?;
    let RopeType::Longrope(l) = &config.rope_type else {
        panic!("phimoe is longrope: {config:?}")
    };
    let given = &fx.json["config_input"]["rope_scaling"];
    assert_eq!(l.short_mscale, given["short_mscale"].as_f64());
    assert_eq!(l.long_mscale, given["long_mscale"].as_f64());
    let rope = Rope::new(config)?;
    let mut checked = [0, 0];
    for call in fx.json["calls"].as_array().unwrap() {
        let name = format!("phimoe_longrope/{}", call["name"].as_str().unwrap());
        let seq_len = call["seq_len"].as_u64().unwrap() as usize;
        let mscale = call["mscale"].as_f64().unwrap();
        assert_ne!(
            mscale,
            call["attention_scaling_after_call"].as_f64().unwrap()
        );
        if seq_len <= 4096 {
            assert_eq!(call["mscale_field"], "short_mscale", "{name}");
            // The whole call, with the factor transformers multiplies cos and sin by.
            let mut with_mscale = call.clone();
            with_mscale["attention_scaling_after_call"] = mscale.into();
            let c = Call {
                fixture: &fx,
                name: name.clone(),
                call: &with_mscale,
            };
            check_call(&rope, &c, seq_len)?;
            checked[0] += 1;
            continue;
        }
        assert_eq!(call["mscale_field"], "long_mscale", "{name}");
        let ids = &fx.tensors[call["tensors"]["position_ids"].as_str().unwrap()];
        let (cos, sin) = rope.at(At::positions(ids).with_tracked_len(seq_len), DType::F64)?;
        let amplitude = |cos: Vec<f64>, sin: Vec<f64>| -> Vec<f64> {
            cos.iter().zip(&sin).map(|(c, s)| c.hypot(*s)).collect()
        };
        let ours = amplitude(
            cos.flatten_all()?.to_vec1::<f64>()?,
            sin.flatten_all()?.to_vec1::<f64>()?,
        );
        let theirs = amplitude(
            fx.tensor(call["tensors"]["cos"].as_str().unwrap())?,
            fx.tensor(call["tensors"]["sin"].as_str().unwrap())?,
        );
        // Ours is exact up to f64 rounding; theirs is an f32 cos and sin, each rounded after
        // the product with mscale (a few f32 ulps of mscale).
        for a in &ours {
            assert!(
                (a - mscale).abs() <= 1e-12,
                "{name}: our amplitude {a}, mscale {mscale}"
            );
        }
        for a in &theirs {
            let tol = 4.0 * f32::EPSILON as f64 * mscale;
            assert!(
                (a - mscale).abs() <= tol,
                "{name}: transformers' amplitude {a}, mscale {mscale}"
            );
        }
        checked[1] += 1;
    }
    assert_eq!(checked, [2, 2], "short and long calls");
    // PhimoeConfig refuses a longrope dict without either mscale; other models' configs do not
    // read them (transformers' Phi-3 keeps longrope's attention factor).
    for key in ["short_mscale", "long_mscale"] {
        let mut json = fx.json["config_input"].clone();
        json["rope_scaling"].as_object_mut().unwrap().remove(key);
        let err = RopeConfig::from_hf_config(&json).unwrap_err().to_string();
        assert!(err.contains(&format!("rope_scaling.{key}")), "{err}");
    }
    let mut phi3 = fx.json["config_input"].clone();
    phi3["model_type"] = "phi3".into();
    let phi3 = RopeConfig::from_hf_config(&phi3)?;
    let RopeType::Longrope(l) = &phi3.rope_type else {
        panic!("{phi3:?}")
    };
    assert_eq!((l.short_mscale, l.long_mscale), (None, None));
    let attention = fx.json["calls"][0]["attention_scaling_after_call"]
        .as_f64()
        .unwrap();
    assert!((Rope::new(phi3)?.attention_scaling() - attention).abs() <= 1e-12);
    Ok(())
}

/// Both Gemma 3 forms: the same configs per layer type and layer, and transformers' tables.
#[test]
fn gemma3() -> anyhow::Result<()> {
    matches_transformers("gemma3_legacy")?;
    matches_transformers("gemma3_v5")?;
    let legacy = RopeConfigs::from_hf_config(&fixture("gemma3_legacy")?.json["config_input"])?;
    let v5 = RopeConfigs::from_hf_config(&fixture("gemma3_v5")?.json["config_input"])?;
    let fx = fixture("gemma3_v5")?;
    let types = fx.json["layer_types"].as_array().unwrap();
    for (i, t) in types.iter().enumerate() {
        let t = t.as_str().unwrap();
        assert_eq!(legacy.for_layer(i)?, v5.for_layer(i)?, "layer {i}");
        assert_eq!(legacy.for_layer(i)?, legacy.for_layer_type(t)?, "layer {i}");
    }
    assert_eq!(legacy.layer_types(), v5.layer_types());
    let err = legacy.for_layer(types.len()).unwrap_err();
    let past = format!("layer {} is past the last", types.len());
    assert!(
        err.to_string().contains("layer_types") && err.to_string().contains(&past),
        "{err}"
    );
    for json in [
        &fx.json["config_input"],
        &fixture("gemma3_legacy")?.json["config_input"],
    ] {
        let err = RopeConfig::from_hf_config(json).unwrap_err().to_string();
        assert!(err.contains("for_layer_type"), "{err}");
    }
    Ok(())
}

#[test]
fn gemma4() -> anyhow::Result<()> {
    let fx = fixture("gemma4")?;
    let configs = RopeConfigs::from_hf_config(&fx.json["config_input"])?;
    let full = configs.for_layer_type("full_attention")?.unwrap();
    assert_eq!(
        (full.head_dim, full.rotary_dim()),
        (512, 512),
        "global_head_dim"
    );
    assert_eq!(
        configs
            .for_layer_type("sliding_attention")?
            .unwrap()
            .head_dim,
        256
    );
    assert_eq!(configs.for_layer(11)?, Some(full));
    matches_transformers("gemma4").map(drop)
}

/// Gemma 4 as save_pretrained writes it: the full-attention layers' head_dim in
/// per_layer_config, keyed by layer index ("05", "11"); the same ropes as the gemma4 case.
/// Layers of one type that override it differently are an error naming them.
#[test]
fn gemma4_saved() -> anyhow::Result<()> {
    let fx = fixture("gemma4_saved")?;
    assert!(fx.json["config_input"].get("global_head_dim").is_none());
    let saved = RopeConfigs::from_hf_config(&fx.json["config_input"])?;
    let given = RopeConfigs::from_hf_config(&fixture("gemma4")?.json["config_input"])?;
    for i in 0..12 {
        assert_eq!(saved.for_layer(i)?, given.for_layer(i)?, "layer {i}");
    }
    assert_eq!(saved.for_layer(5)?.unwrap().head_dim, 512);
    assert_eq!(saved.for_layer(4)?.unwrap().head_dim, 256);
    matches_transformers("gemma4_saved")?;

    let mut split = fx.json["config_input"].clone();
    split["per_layer_config"]["11"] = serde_json::json!({"head_dim": 256});
    let err = RopeConfigs::from_hf_config(&split).unwrap_err().to_string();
    for needle in ["per_layer_config", "layers 5 and 11", "full_attention"] {
        assert!(err.contains(needle), "{err}");
    }
    // Fields no rope reads (num_key_value_heads) may differ.
    let mut kv = fx.json["config_input"].clone();
    kv["per_layer_config"]["11"]["num_key_value_heads"] = serde_json::json!(1);
    assert_eq!(RopeConfigs::from_hf_config(&kv)?, saved);
    Ok(())
}

#[test]
fn qwen2_vl() -> anyhow::Result<()> {
    mrope("qwen2_vl", false)
}

#[test]
fn qwen3_vl() -> anyhow::Result<()> {
    mrope("qwen3_vl", true)
}

/// M-RoPE composed with a scaled rope type (issue 19 item 1), contiguous (Qwen2.5-VL) and
/// interleaved (Qwen3-VL) sections: the type's frequencies and attention factor, slot by slot.
#[test]
fn mrope_with_scaling() -> anyhow::Result<()> {
    for (name, interleaved, rope_type) in [
        ("qwen25_vl_yarn", false, "yarn"),
        ("qwen25_vl_linear", false, "linear"),
        ("qwen3_vl_yarn", true, "yarn"),
        ("qwen3_vl_linear", true, "linear"),
    ] {
        let fx = fixture(name)?;
        let config = RopeConfig::from_hf_config(&fx.json["config_input"])?;
        assert_eq!(config.rope_type.name(), rope_type, "{name}");
        assert!(config.mrope_section.is_some(), "{name}");
        mrope(name, interleaved)?;
    }
    Ok(())
}

/// Both calls (3-D ids, text only); text-only ids give the 1-D tables bit for bit.
fn mrope(name: &str, interleaved: bool) -> anyhow::Result<()> {
    matches_transformers(name)?;
    let fx = fixture(name)?;
    let config = RopeConfig::from_hf_config(&fx.json["config_input"])?;
    assert_eq!(config.mrope_slots.is_alternating(), interleaved);
    let rope = Rope::new(config)?;
    let text = fx.json["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "text")
        .unwrap();
    let ids = &fx.tensors[text["tensors"]["position_ids"].as_str().unwrap()];
    for dtype in [DType::F32, DType::BF16, DType::F64] {
        let (cos, sin) = rope.at(At::mrope(ids), dtype)?;
        let (cos1, sin1) = rope.at(&ids.get(0)?, dtype)?;
        let bits = |t: &Tensor| -> anyhow::Result<Vec<f64>> {
            Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
        };
        assert_eq!(
            bits(&cos)?,
            bits(&cos1)?,
            "{name}: text-only cos, {dtype:?}"
        );
        assert_eq!(
            bits(&sin)?,
            bits(&sin1)?,
            "{name}: text-only sin, {dtype:?}"
        );
    }
    Ok(())
}

/// Dynamic NTK: each call with the frequencies of the length transformers' module keeps
/// (`Dynamic::next_tracked_len`): the calls whose frequencies are their own length's (100,
/// 6000, 9000, 100 again) and the one that keeps a longer one's (5000 after 9000).
#[test]
fn llama_dynamic() -> anyhow::Result<()> {
    let fx = fixture("llama_dynamic")?;
    let max = fx.json["max_position_embeddings"].as_u64().unwrap() as usize;
    let mut cached = max;
    for call in fx.json["calls"].as_array().unwrap() {
        let seq_len = call["seq_len"].as_u64().unwrap() as usize;
        cached = Dynamic::next_tracked_len(max, cached, seq_len);
        assert_eq!(
            cached as u64,
            call["max_seq_len_cached_after_call"].as_u64().unwrap()
        );
    }
    matches_transformers_with("llama_dynamic", LongropePolicy::Transformers, |call| {
        call["max_seq_len_cached_after_call"].as_u64().unwrap() as usize
    })
    .map(drop)
}
