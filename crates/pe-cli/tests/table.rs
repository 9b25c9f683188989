//! `pe table` writes exactly pe-core's tables, in every format, for every way of naming rows.

mod common;

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{ColumnLayout, Frequencies, OddWidth, PeSpec, Preset, SinusoidalEncoding};
use common::{assert_same, files_in, pe_ok, s};

fn encoding(spec: PeSpec) -> SinusoidalEncoding {
    SinusoidalEncoding::new(spec).unwrap()
}

#[test]
fn npy_equals_the_range_table_in_every_numpy_dtype() {
    let dir = tempfile::tempdir().unwrap();
    for (dtype, name) in [
        (DType::F32, "f32"),
        (DType::F16, "f16"),
        (DType::F64, "f64"),
    ] {
        let out = dir.path().join(format!("fairseq-{name}.npy"));
        let args = [
            "table", "--preset", "fairseq", "--width", "66", "--len", "300",
        ];
        pe_ok(
            &[
                &args[..],
                &["--offset", "70000", "--dtype", name, "--out", s(&out)],
            ]
            .concat(),
        );
        let got = Tensor::read_npy(&out).unwrap();
        let want = encoding(PeSpec::fairseq(66))
            .range(70000, 300, dtype, &Device::Cpu)
            .unwrap();
        assert_same(&got, &want, "table");
    }
}

#[test]
fn safetensors_holds_one_bf16_tensor_named_pe() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("marian.safetensors");
    let args = [
        "table", "--preset", "marian", "--width", "31", "--len", "40",
    ];
    pe_ok(&[&args[..], &["--dtype", "bf16", "--out", s(&out)]].concat());
    let tensors = candle_core::safetensors::load(&out, &Device::Cpu).unwrap();
    assert_eq!(tensors.len(), 1);
    let want = encoding(PeSpec::marian(31))
        .range(0, 40, DType::BF16, &Device::Cpu)
        .unwrap();
    assert_same(&tensors["pe"], &want, "table");
    // The header records where the table came from.
    let bytes = std::fs::read(&out).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + len]).unwrap();
    assert!(header.contains(r#""preset":"marian""#), "{header}");
}

#[test]
fn csv_has_one_line_per_position_that_reads_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("whisper.csv");
    let args = [
        "table", "--preset", "whisper", "--width", "8", "--len", "20",
    ];
    pe_ok(&[&args[..], &["--offset", "5", "--out", s(&out)]].concat());
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("position,0,1,2,3,4,5,6,7"));
    let want = encoding(PeSpec::whisper(8))
        .range(5, 20, DType::F32, &Device::Cpu)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 20);
    for (i, (line, want)) in rows.iter().zip(&want).enumerate() {
        let mut fields = line.split(',');
        assert_eq!(fields.next(), Some((5 + i).to_string().as_str()));
        let got: Vec<f32> = fields.map(|f| f.parse().unwrap()).collect();
        assert_eq!(&got, want, "row {i}: {line}");
    }
}

#[test]
fn csv_reads_back_exactly_in_half_precision() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.csv");
    let args = [
        "table",
        "--preset",
        "vaswani",
        "--width",
        "16",
        "--positions",
        "3,1,4",
    ];
    pe_ok(&[&args[..], &["--dtype", "f16", "--out", s(&out)]].concat());
    let ids = Tensor::new(&[3u32, 1, 4], &Device::Cpu).unwrap();
    let want = encoding(PeSpec::vaswani(16)).at(&ids, DType::F16).unwrap();
    let want = want.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    for (line, (want, id)) in text.lines().skip(1).zip(want.iter().zip(["3", "1", "4"])) {
        let mut fields = line.split(',');
        assert_eq!(fields.next(), Some(id));
        let got: Vec<f32> = fields.map(|f| f.parse().unwrap()).collect();
        assert_eq!(&got, want);
    }
}

#[test]
fn positions_give_the_rows_of_those_ids() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ids.npy");
    let args = ["table", "--preset", "tensor2tensor", "--width", "24"];
    pe_ok(
        &[
            &args[..],
            &["--positions", "0,5,9,2000000000,5", "--out", s(&out)],
        ]
        .concat(),
    );
    let ids = Tensor::new(&[0u32, 5, 9, 2_000_000_000, 5], &Device::Cpu).unwrap();
    let want = encoding(PeSpec::tensor2tensor(24))
        .at(&ids, DType::F32)
        .unwrap();
    assert_same(&Tensor::read_npy(&out).unwrap(), &want, "table");
}

#[test]
fn timesteps_give_the_rows_of_those_timesteps() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.npy");
    let args = ["table", "--preset", "stable-diffusion", "--width", "320"];
    pe_ok(
        &[
            &args[..],
            &[
                "--timesteps",
                "0.5,999.5,-3.25",
                "--dtype",
                "f64",
                "--out",
                s(&out),
            ],
        ]
        .concat(),
    );
    let t = Tensor::new(&[0.5f64, 999.5, -3.25], &Device::Cpu).unwrap();
    let want = encoding(PeSpec::stable_diffusion(320))
        .timesteps(&t, DType::F64)
        .unwrap();
    assert_same(&Tensor::read_npy(&out).unwrap(), &want, "table");
}

#[test]
fn negative_values_are_values_not_flags() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.npy");
    let args = ["table", "--preset", "diffusers", "--width", "8"];
    pe_ok(&[&args[..], &["--timesteps", "-1.5,2", "--out", s(&out)]].concat());
    let t = Tensor::new(&[-1.5f64, 2.0], &Device::Cpu).unwrap();
    let want = encoding(Preset::Diffusers.spec(8))
        .timesteps(&t, DType::F32)
        .unwrap();
    assert_same(&Tensor::read_npy(&out).unwrap(), &want, "timesteps");
    for scale in ["-1e-3", "-2.5"] {
        let value: f64 = scale.parse().unwrap();
        pe_ok(
            &[
                &args[..],
                &["--len", "4", "--angle-scale", scale, "--out", s(&out)],
            ]
            .concat(),
        );
        let want = encoding(Preset::Diffusers.spec(8).with_angle_scale(value))
            .range(0, 4, DType::F32, &Device::Cpu)
            .unwrap();
        assert_same(&Tensor::read_npy(&out).unwrap(), &want, scale);
    }
}

#[test]
fn overrides_change_the_preset() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.npy");
    let custom = dir.path().join("custom.npy");
    let args = [
        "table", "--preset", "vaswani", "--width", "9", "--len", "50",
    ];
    pe_ok(&[&args[..], &["--out", s(&plain)]].concat());
    let overrides = [
        "--base",
        "100",
        "--layout",
        "cos-sin",
        "--frequencies",
        "h-shift:0.5",
        "--odd",
        "zero-pad",
        "--angle-scale",
        "2.5",
    ];
    pe_ok(&[&args[..], &overrides[..], &["--out", s(&custom)]].concat());
    let spec = Preset::Vaswani
        .spec(9)
        .with_base(100.0)
        .with_layout(ColumnLayout::CosSin)
        .with_frequencies(Frequencies::HalfShift { shift: 0.5 })
        .with_odd_width(OddWidth::ZeroPad)
        .with_angle_scale(2.5);
    let want = encoding(spec)
        .range(0, 50, DType::F32, &Device::Cpu)
        .unwrap();
    let got = Tensor::read_npy(&custom).unwrap();
    assert_same(&got, &want, "table");
    let plain = Tensor::read_npy(&plain).unwrap();
    let diff = (plain - &got).unwrap().abs().unwrap().max_all().unwrap();
    assert!(diff.to_scalar::<f32>().unwrap() > 0.1);

    // Each override alone, against the same change made with pe-core.
    let cases: [(&[&str], PeSpec); 3] = [
        (
            &["--frequencies", "h-minus-1"],
            PeSpec::vaswani(9).with_frequencies(Frequencies::HalfMinusOne { guarded: false }),
        ),
        (
            &["--layout", "sin-cos"],
            PeSpec::vaswani(9).with_layout(ColumnLayout::SinCos),
        ),
        (
            &["--odd", "zero-pad"],
            PeSpec::vaswani(9).with_odd_width(OddWidth::ZeroPad),
        ),
    ];
    for (flags, spec) in cases {
        pe_ok(&[&args[..], flags, &["--out", s(&custom)]].concat());
        let want = encoding(spec)
            .range(0, 50, DType::F32, &Device::Cpu)
            .unwrap();
        assert_same(&Tensor::read_npy(&custom).unwrap(), &want, "table");
    }
}

#[test]
fn chunked_writes_equal_the_whole_table() {
    let dir = tempfile::tempdir().unwrap();
    let whole = encoding(PeSpec::musicgen(48))
        .range(1000, 1000, DType::F32, &Device::Cpu)
        .unwrap();
    for ext in ["npy", "csv"] {
        let out = dir.path().join(format!("chunked.{ext}"));
        let args = [
            "table", "--preset", "musicgen", "--width", "48", "--len", "1000",
        ];
        pe_ok(
            &[
                &args[..],
                &["--offset", "1000", "--chunk-rows", "128", "--out", s(&out)],
            ]
            .concat(),
        );
        let got = if ext == "npy" {
            Tensor::read_npy(&out).unwrap()
        } else {
            let text = std::fs::read_to_string(&out).unwrap();
            let values: Vec<f32> = text
                .lines()
                .skip(1)
                .flat_map(|l| l.split(',').skip(1).map(|f| f.parse::<f32>().unwrap()))
                .collect();
            Tensor::from_vec(values, (1000, 48), &Device::Cpu).unwrap()
        };
        assert_same(&got, &whole, "table");
    }
    // Only the finished files: no temporary file is left behind.
    assert_eq!(files_in(dir.path()), ["chunked.csv", "chunked.npy"]);
}

#[test]
fn an_empty_range_is_an_empty_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("empty.npy");
    pe_ok(&[
        "table",
        "--preset",
        "fairseq",
        "--width",
        "8",
        "--len",
        "0",
        "--out",
        s(&out),
    ]);
    assert_eq!(Tensor::read_npy(&out).unwrap().dims(), &[0, 8]);
}

#[test]
fn presets_lists_every_preset_with_its_choices() {
    let out = pe_ok(&["presets"]);
    let text = String::from_utf8(out.stdout).unwrap();
    for preset in Preset::ALL {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{} ", preset.name())))
            .unwrap_or_else(|| panic!("{} missing from {text}", preset.name()));
        assert!(line.contains(preset.models()), "{line}");
        assert!(line.contains("10000"), "{line}");
    }
    let sd = text
        .lines()
        .find(|l| l.starts_with("stable-diffusion"))
        .unwrap();
    for word in ["h-shift:0", "cos-sin", "zero-pad"] {
        assert!(sd.contains(word), "{sd}");
    }
    let whisper = text.lines().find(|l| l.starts_with("whisper")).unwrap();
    for word in ["h-minus-1", "sin-cos", "reject"] {
        assert!(whisper.contains(word), "{whisper}");
    }
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        &["--help"][..],
        &["presets", "--help"],
        &["table", "--help"],
        &["plot", "--help"],
    ] {
        let out = pe_ok(sub);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("Usage:"), "{text}");
    }
    let help = String::from_utf8(pe_ok(&["table", "--help"]).stdout).unwrap();
    for flag in [
        "--preset",
        "--width",
        "--len",
        "--offset",
        "--positions",
        "--timesteps",
        "--dtype",
        "--device",
        "--base",
        "--layout",
        "--frequencies",
        "--odd",
        "--angle-scale",
        "--out",
    ] {
        assert!(help.contains(flag), "{flag} missing from table --help");
    }
}
