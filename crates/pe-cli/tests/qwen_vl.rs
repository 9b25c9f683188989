//! `pe rope --config qwen-vl.json --input-ids ..` writes transformers' `get_rope_index` ids
//! (the fixtures of `scripts/fixtures/qwen_vl.py`), their deltas and the M-RoPE tables at them,
//! and bad input names its flag.

mod common;

use candle_core::{DType, Device, Tensor};
use candle_pe_core::At;
use candle_pe_core::{Rope, RopeConfig};
use candle_pe_formats::FromHfConfig;
use common::{assert_same, pe_err, pe_ok, s};

#[test]
fn writes_get_rope_index_ids_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let case = pe_testkit::fixture("qwen_vl/qwen2_5_vl_tps2");
    let config = case.join("config.json");
    let t =
        candle_core::safetensors::load(case.join("positions.safetensors"), &Device::Cpu).unwrap();
    let ids = dir.path().join("ids.npy");
    let mask = dir.path().join("mask.npy");
    t["tps2_padded.input_ids"].write_npy(&ids).unwrap();
    t["tps2_padded.attention_mask"].write_npy(&mask).unwrap();
    let out = dir.path().join("vl.safetensors");
    pe_ok(&[
        "rope",
        "--config",
        s(&config),
        "--input-ids",
        s(&ids),
        "--image-grid-thw",
        "1,4,6",
        "--video-grid-thw",
        "4,2,4;2,4,4;3,2,2",
        "--second-per-grid-ts",
        "0.5,1.3,2.0",
        "--attention-mask",
        s(&mask),
        "--out",
        s(&out),
    ]);
    let got = candle_core::safetensors::load(&out, &Device::Cpu).unwrap();
    assert_same(
        &got["position_ids"],
        &t["tps2_padded.position_ids"],
        "position_ids",
    );
    assert_same(
        &got["rope_deltas"],
        &t["tps2_padded.rope_deltas"].flatten_all().unwrap(),
        "rope_deltas",
    );
    let json = pe_testkit::read_json(&config);
    let rope = Rope::new(RopeConfig::from_hf_config(&json).unwrap()).unwrap();
    let (cos, sin) = rope
        .at(At::mrope(&t["tps2_padded.position_ids"]), DType::F32)
        .unwrap();
    assert_same(&got["cos"], &cos, "cos");
    assert_same(&got["sin"], &sin, "sin");
}

#[test]
fn bad_vision_input_names_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let config = pe_testkit::fixture("qwen_vl/qwen2_vl/config.json");
    let ids = dir.path().join("ids.npy");
    let image = 151655i64;
    Tensor::new(&[1i64, image, image, image, image, image, 2], &Device::Cpu)
        .unwrap()
        .write_npy(&ids)
        .unwrap();
    let out = dir.path().join("x.safetensors");
    let base = ["rope", "--config", s(&config), "--input-ids", s(&ids)];
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--image-grid-thw", "1,4,4"],
            vec![
                "--input-ids / --image-grid-thw",
                "image 0 has 5 tokens",
                "gives 4",
            ],
        ),
        (
            vec!["--image-grid-thw", "1,4,4;1,2,2"],
            vec!["--image-grid-thw", "1 runs of image tokens", "grids give 2"],
        ),
        (
            vec!["--image-grid-thw", "1,4"],
            vec!["--image-grid-thw", "T,H,W"],
        ),
        (
            vec!["--image-grid-thw", "1,3,4"],
            vec!["--image-grid-thw", "spatial_merge_size"],
        ),
        (
            vec!["--image-grid-thw", "1,4,4", "--second-per-grid-ts", "1.0"],
            vec!["--second-per-grid-ts"],
        ),
    ];
    for (extra, needles) in cases {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(&extra);
        args.extend(["--out", s(&out)]);
        pe_err(&args, &needles);
        assert!(!out.exists(), "{args:?} left a file");
    }
    // A vision flag without --input-ids, and a config that is not Qwen-VL's.
    pe_err(
        &[
            "rope",
            "--head-dim",
            "8",
            "--len",
            "2",
            "--image-grid-thw",
            "1,2,2",
            "--out",
            s(&out),
        ],
        &["--image-grid-thw", "--input-ids"],
    );
    let llama = pe_testkit::fixture("models/llama31/config.json");
    pe_err(
        &[
            "rope",
            "--config",
            s(&llama),
            "--input-ids",
            s(&ids),
            "--out",
            s(&out),
        ],
        &["--config", "model_type"],
    );
    assert!(!out.exists());
}
