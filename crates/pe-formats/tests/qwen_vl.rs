//! Qwen-VL's M-RoPE position ids against transformers 5.24's own `get_rope_index` (fixtures
//! written by `scripts/fixtures/qwen_vl.py` on tiny configs saved with `save_pretrained`), the
//! decode step, and the errors that name a mismatch.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_pe_core::Error as CoreError;
use candle_pe_formats::{Error, FromHfConfig, QwenVlConfig, QwenVlVersion};

const IMAGE: i64 = 151655;
const VIDEO: i64 = 151656;

fn case(name: &str) -> anyhow::Result<(QwenVlConfig, serde_json::Value, HashMap<String, Tensor>)> {
    let dir = pe_testkit::fixture(&format!("qwen_vl/{name}"));
    let config: serde_json::Value = pe_testkit::read_json(dir.join("config.json"));
    let meta = pe_testkit::read_json(dir.join("positions.json"));
    let tensors = candle_core::safetensors::load(dir.join("positions.safetensors"), &Device::Cpu)?;
    Ok((QwenVlConfig::from_hf_config(&config)?, meta, tensors))
}

fn grids(t: Option<&Tensor>) -> anyhow::Result<Vec<[usize; 3]>> {
    Ok(match t {
        None => Vec::new(),
        Some(t) => t
            .to_vec2::<i64>()?
            .into_iter()
            .map(|g| [g[0] as usize, g[1] as usize, g[2] as usize])
            .collect(),
    })
}

/// Every call of every fixture: the same ids and deltas, exactly.
#[test]
fn matches_transformers_get_rope_index() -> anyhow::Result<()> {
    let mut calls = 0;
    for (name, version) in [
        ("qwen2_vl", QwenVlVersion::Qwen2Vl),
        ("qwen2_5_vl_tps2", QwenVlVersion::Qwen25Vl),
        ("qwen2_5_vl_tps25", QwenVlVersion::Qwen25Vl),
        ("qwen3_vl", QwenVlVersion::Qwen3Vl),
    ] {
        let (config, meta, t) = case(name)?;
        assert_eq!(config.version, version, "{name}");
        for call in meta["calls"].as_array().unwrap() {
            let names = &call["tensors"];
            let get = |key: &str| names[key].as_str().map(|n| &t[n]);
            let seconds = match get("second_per_grid_ts") {
                Some(s) => Some(s.to_dtype(DType::F64)?.to_vec1::<f64>()?),
                None => None,
            };
            let positions = config.positions(
                get("input_ids").unwrap(),
                &grids(get("image_grid_thw"))?,
                &grids(get("video_grid_thw"))?,
                seconds.as_deref(),
                get("attention_mask"),
            )?;
            let what = format!("{name} {}", call["name"]);
            assert_eq!(
                positions.position_ids().to_vec3::<i64>()?,
                get("position_ids").unwrap().to_vec3::<i64>()?,
                "{what}"
            );
            assert_eq!(
                positions.rope_deltas().to_vec1::<i64>()?,
                get("rope_deltas")
                    .unwrap()
                    .flatten_all()?
                    .to_vec1::<i64>()?,
                "{what}"
            );
            calls += 1;
        }
    }
    assert_eq!(calls, 10);
    Ok(())
}

/// Decoding continues from the deltas: with a prompt that ends in text at its largest position,
/// the ids of the next tokens are those of the prompt and the tokens together, and in a
/// left-padded batch each sequence counts its own attended tokens.
#[test]
fn decode_continues_from_the_deltas() -> anyhow::Result<()> {
    let (config, _, t) = case("qwen2_vl")?;
    let ids = &t["image_video.input_ids"];
    let (images, videos) = ([[1, 4, 6]], [[3, 4, 4]]);
    let prompt = config.positions(ids, &images, &videos, None, None)?;
    let seq = ids.dim(1)?;
    let longer = Tensor::cat(&[ids, &Tensor::new(&[[7i64, 8, 9]], &Device::Cpu)?], 1)?;
    let all = config.positions(&longer, &images, &videos, None, None)?;
    let tail = all.position_ids().narrow(2, seq, 3)?;
    assert_eq!(
        prompt.decode(&[seq], 3)?.to_vec3::<i64>()?,
        tail.to_vec3::<i64>()?
    );
    // A left-padded batch: attended counts, not the padded length.
    let padded = config.positions(
        &t["padded.input_ids"],
        &[[1, 4, 4]],
        &[],
        None,
        Some(&t["padded.attention_mask"]),
    )?;
    let deltas = padded.rope_deltas().to_vec1::<i64>()?;
    let next = padded.decode(&[9, 5], 2)?.to_vec3::<i64>()?;
    for row in next {
        assert_eq!(
            row,
            [
                [9 + deltas[0], 10 + deltas[0]],
                [5 + deltas[1], 6 + deltas[1]]
            ]
        );
    }
    assert!(matches!(
        padded.decode(&[9], 1),
        Err(Error::Core(CoreError::ShapeMismatch {
            name: "attended",
            ..
        }))
    ));
    Ok(())
}

/// What transformers' `generate` feeds the language model (a forward pre-hook on the text rotary
/// embedding of tiny random Qwen2-VL, Qwen2.5-VL and Qwen3-VL models): the prefill's ids are
/// `positions`, and every decode step's ids are `decode_from_last` at the tokens attended before
/// it, exactly, alone and in a left-padded batch. `decode` (the deltas) gives the same ids except
/// where `generate` departs from its own `rope_deltas`: a prompt that ends in image tokens (each
/// row goes on from its own last id) and the Qwen2.5-VL sequence whose video time
/// (`second_per_grid_ts` 2.0) runs past the text after it.
#[test]
fn matches_transformers_generate() -> anyhow::Result<()> {
    let (mut steps, mut departed) = (0, Vec::new());
    for name in [
        "qwen2_vl_generate",
        "qwen2_5_vl_generate",
        "qwen3_vl_generate",
    ] {
        let dir = pe_testkit::fixture(&format!("qwen_vl/{name}"));
        let json: serde_json::Value = pe_testkit::read_json(dir.join("config.json"));
        let config = QwenVlConfig::from_hf_config(&json)?;
        let meta: serde_json::Value = pe_testkit::read_json(dir.join("generate.json"));
        let t = candle_core::safetensors::load(dir.join("generate.safetensors"), &Device::Cpu)?;
        for call in meta["calls"].as_array().unwrap() {
            let names = &call["tensors"];
            let get = |key: &str| names[key].as_str().map(|n| &t[n]);
            let seconds = match get("second_per_grid_ts") {
                Some(s) => Some(s.to_dtype(DType::F64)?.to_vec1::<f64>()?),
                None => None,
            };
            let mask = get("attention_mask").unwrap();
            let prompt = config.positions(
                get("input_ids").unwrap(),
                &grids(get("image_grid_thw"))?,
                &grids(get("video_grid_thw"))?,
                seconds.as_deref(),
                Some(mask),
            )?;
            let attended: Vec<usize> = mask
                .sum(1)?
                .to_vec1::<i64>()?
                .into_iter()
                .map(|n| n as usize)
                .collect();
            for step in 0..call["steps"].as_u64().unwrap() as usize {
                let want = get(&format!("step{step}.position_ids"))
                    .unwrap()
                    .to_vec3::<i64>()?;
                let what = format!("{name} {} step {step}", call["name"]);
                if step == 0 {
                    assert_eq!(prompt.position_ids().to_vec3::<i64>()?, want, "{what}");
                } else {
                    let before: Vec<usize> = attended.iter().map(|n| n + step - 1).collect();
                    let ours = prompt.decode_from_last(&before, 1)?.to_vec3::<i64>()?;
                    assert_eq!(ours, want, "{what}");
                    if prompt.decode(&before, 1)?.to_vec3::<i64>()? != want {
                        departed.push(what);
                    }
                }
                steps += 1;
            }
        }
    }
    assert_eq!(steps, 28);
    let expected: Vec<String> = [
        "qwen2_vl_generate \"ends_in_image\"",
        "qwen2_5_vl_generate \"padded\"",
    ]
    .iter()
    .flat_map(|call| (1..4).map(move |k| format!("{call} step {k}")))
    .collect();
    assert_eq!(departed, expected);
    Ok(())
}

fn qwen2() -> QwenVlConfig {
    QwenVlConfig {
        version: QwenVlVersion::Qwen2Vl,
        image_token_id: IMAGE,
        video_token_id: VIDEO,
        spatial_merge_size: 2,
        tokens_per_second: 4.0,
    }
}

/// Mismatches between the token stream and the grids are errors naming them.
#[test]
fn mismatches_are_named() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let config = qwen2();
    // Five image tokens where the grid (1, 4, 4) gives four: more image tokens than patches.
    let ids = Tensor::new(&[[1i64, IMAGE, IMAGE, IMAGE, IMAGE, IMAGE, 2]], &dev)?;
    match config.positions(&ids, &[[1, 4, 4]], &[], None, None) {
        Err(Error::VisionTokens {
            sequence: 0,
            kind: "image",
            index: 0,
            tokens: 5,
            expected: 4,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // Two runs of image tokens, one grid.
    let ids = Tensor::new(&[[IMAGE, IMAGE, IMAGE, IMAGE, 3, IMAGE]], &dev)?;
    assert!(matches!(
        config.positions(&ids, &[[1, 4, 4]], &[], None, None),
        Err(Error::VisionGrids {
            kind: "image",
            runs: 2,
            grids: 1
        })
    ));
    // A grid given for a video the ids do not hold.
    let ids = Tensor::new(&[[1i64, 2]], &dev)?;
    assert!(matches!(
        config.positions(&ids, &[], &[[2, 4, 4]], None, None),
        Err(Error::VisionGrids {
            kind: "video",
            runs: 0,
            grids: 1
        })
    ));
    // Qwen3-VL counts video frames.
    let qwen3 = QwenVlConfig {
        version: QwenVlVersion::Qwen3Vl,
        ..qwen2()
    };
    let ids = Tensor::new(&[[VIDEO, VIDEO, VIDEO, VIDEO, 3]], &dev)?;
    assert!(matches!(
        qwen3.positions(&ids, &[], &[[2, 4, 4]], None, None),
        Err(Error::VisionGrids {
            kind: "video frame",
            runs: 1,
            grids: 2
        })
    ));
    // A grid whose height is not a multiple of the merge size; seconds for the wrong count;
    // a mask of another shape; ids that are not a batch.
    let ids = Tensor::new(&[[IMAGE, IMAGE]], &dev)?;
    assert!(matches!(
        config.positions(&ids, &[[1, 3, 4]], &[], None, None),
        Err(Error::Core(CoreError::Config { ref field, .. })) if field == "image_grid_thw"
    ));
    assert!(matches!(
        config.positions(&ids, &[], &[], Some(&[0.5]), None),
        Err(Error::Core(CoreError::ShapeMismatch {
            name: "second_per_grid_ts",
            ..
        }))
    ));
    let mask = Tensor::ones((1, 3), DType::I64, &dev)?;
    assert!(matches!(
        config.positions(&ids, &[], &[], None, Some(&mask)),
        Err(Error::Core(CoreError::ShapeMismatch {
            name: "attention_mask",
            ..
        }))
    ));
    assert!(matches!(
        config.positions(&Tensor::new(&[1i64, 2], &dev)?, &[], &[], None, None),
        Err(Error::Core(CoreError::ShapeMismatch {
            name: "input_ids",
            ..
        }))
    ));
    let json = serde_json::json!({"model_type": "llama", "image_token_id": 1, "video_token_id": 2});
    assert!(matches!(
        QwenVlConfig::from_hf_config(&json),
        Err(Error::Core(CoreError::Config { ref field, .. })) if field == "model_type"
    ));
    Ok(())
}

/// transformers 5 saves Qwen2-VL's legacy `"type": "mrope"` beside the `"rope_type": "default"`
/// it maps it to; the two names of one type agree, two types still conflict.
#[test]
fn saved_qwen2_vl_rope_parameters_read_back() -> anyhow::Result<()> {
    let dir = pe_testkit::fixture("qwen_vl/qwen2_vl");
    let json: serde_json::Value = pe_testkit::read_json(dir.join("config.json"));
    let params = &json["text_config"]["rope_parameters"];
    assert_eq!(
        (params["rope_type"].as_str(), params["type"].as_str()),
        (Some("default"), Some("mrope"))
    );
    let config = candle_pe_core::RopeConfig::from_hf_config(&json)?;
    assert_eq!(config.mrope_section, Some(vec![2, 3, 3]));
    let mut conflicting = json.clone();
    conflicting["text_config"]["rope_parameters"]["rope_type"] = "linear".into();
    conflicting["text_config"]["rope_parameters"]["factor"] = 2.0.into();
    assert!(matches!(
        candle_pe_core::RopeConfig::from_hf_config(&conflicting),
        Err(Error::ConfigConflict { .. })
    ));
    Ok(())
}
