//! `pe rope-nd` on video: 3-D grids (frame, row, column), float64 coordinates and the
//! video-diffusion families write exactly pe-core's tables, and bad input names its flag.

mod common;

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{cogvideox_coordinates, video_patch_positions, AxesRope};
use common::{assert_same, pe_err, pe_ok, s};

fn load(path: &std::path::Path) -> (Tensor, Tensor) {
    let mut t = candle_core::safetensors::load(path, &Device::Cpu).unwrap();
    (t.remove("cos").unwrap(), t.remove("sin").unwrap())
}

#[test]
fn families_on_grids_and_coordinates() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Device::Cpu;
    let out = dir.path().join("t.safetensors");
    let fractions = dir.path().join("u.npy");
    let u = Tensor::new(&[[0.0f64, 0.25, 1.0 / 3.0], [0.02, -0.5, 1.5]], &dev).unwrap();
    u.write_npy(&fractions).unwrap();
    let cases: Vec<(Vec<&str>, AxesRope, Tensor)> = vec![
        (
            vec!["--family", "wan", "--head-dim", "128", "--grid", "2,3,4"],
            AxesRope::wan(128).unwrap(),
            video_patch_positions(2, 3, 4, &dev).unwrap(),
        ),
        (
            vec!["--family", "hunyuan-video", "--grid", "1,2,5"],
            AxesRope::hunyuan_video().unwrap(),
            video_patch_positions(1, 2, 5, &dev).unwrap(),
        ),
        (
            vec![
                "--family",
                "cogvideox",
                "--head-dim",
                "64",
                "--grid",
                "2,4,3",
            ],
            AxesRope::cogvideox(64).unwrap(),
            video_patch_positions(2, 4, 3, &dev).unwrap(),
        ),
        (
            vec![
                "--family",
                "cogvideox",
                "--head-dim",
                "64",
                "--grid",
                "2,4,3",
                "--crop-base",
                "30,45",
            ],
            AxesRope::cogvideox(64).unwrap(),
            cogvideox_coordinates(2, 4, 3, 30, 45, &dev).unwrap(),
        ),
        (
            vec![
                "--family",
                "ltx",
                "--width",
                "64",
                "--positions",
                s(&fractions),
            ],
            AxesRope::ltx(64, 3, 10_000.0).unwrap(),
            u.clone(),
        ),
        (
            vec!["--axes-dim", "8,8,16", "--positions", s(&fractions)],
            AxesRope::new(&[8, 8, 16], 10_000.0).unwrap(),
            u.clone(),
        ),
    ];
    for (extra, rope, at) in cases {
        let mut args = vec!["rope-nd", "--out", s(&out)];
        args.extend(&extra);
        pe_ok(&args);
        let (cos, sin) = load(&out);
        let (want_cos, want_sin) = if at.dtype() == DType::F64 {
            rope.at_coordinates(&at, DType::F32).unwrap()
        } else {
            rope.at(&at, DType::F32).unwrap()
        };
        assert_same(&cos, &want_cos, &format!("{extra:?} cos"));
        assert_same(&sin, &want_sin, &format!("{extra:?} sin"));
        std::fs::remove_file(&out).unwrap();
    }
}

#[test]
fn bad_video_input_names_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Device::Cpu;
    let nan = dir.path().join("nan.npy");
    Tensor::new(&[[0.0f64, f64::NAN, 1.0]], &dev)
        .unwrap()
        .write_npy(&nan)
        .unwrap();
    let single = dir.path().join("f32.npy");
    Tensor::new(&[[0.5f32, 1.0, 2.0]], &dev)
        .unwrap()
        .write_npy(&single)
        .unwrap();
    let out = dir.path().join("x.safetensors");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--family", "ltx", "--width", "64", "--positions", s(&nan)],
            vec!["--positions", "NaN", "flat index 1"],
        ),
        (
            vec![
                "--family",
                "ltx",
                "--width",
                "64",
                "--positions",
                s(&single),
            ],
            vec!["--positions", "float64", "F32"],
        ),
        (
            vec!["--family", "wan", "--grid", "1,2,3"],
            vec!["--head-dim"],
        ),
        (
            vec!["--family", "wan", "--head-dim", "5", "--grid", "1,2,3"],
            vec!["--head-dim", "5"],
        ),
        (
            vec![
                "--family",
                "cogvideox",
                "--head-dim",
                "40",
                "--grid",
                "1,2,3",
            ],
            vec!["--head-dim", "40"],
        ),
        (
            vec!["--family", "ltx", "--width", "3", "--grid", "1,2,3"],
            vec!["--width", "3"],
        ),
        (
            vec![
                "--family",
                "hunyuan-video",
                "--rope-theta",
                "1e4",
                "--grid",
                "1,2,3",
            ],
            vec!["--rope-theta", "hunyuan"],
        ),
        (
            vec![
                "--family",
                "wan",
                "--head-dim",
                "12",
                "--grid",
                "1,2,3",
                "--crop-base",
                "30,45",
            ],
            vec!["--crop-base", "cogvideox"],
        ),
        (
            vec![
                "--family",
                "cogvideox",
                "--head-dim",
                "64",
                "--grid",
                "1,0,3",
                "--crop-base",
                "30,45",
            ],
            vec!["--grid 1,0,3", "height"],
        ),
        (
            vec!["--family", "wan", "--head-dim", "12", "--grid", "1,-2,3"],
            vec!["--grid", "-2"],
        ),
        (
            vec!["--family", "wan", "--head-dim", "12", "--grid", "1,2,3,4"],
            vec!["--grid", "4 numbers"],
        ),
    ];
    for (extra, needles) in cases {
        let mut args = vec!["rope-nd", "--out", s(&out)];
        args.extend(&extra);
        pe_err(&args, &needles);
        assert!(!out.exists(), "{args:?} left a file");
    }
}
