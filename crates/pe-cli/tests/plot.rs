//! `pe plot` writes PNGs that decode, have the requested size and show something.

mod common;

use std::collections::HashSet;
use std::path::Path;

use common::{files_in, pe_ok, s};

/// Decodes the PNG at `path`: its size and the number of distinct colours.
fn inspect(path: &Path) -> ((u32, u32), usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let colours: HashSet<&[u8]> = buf[..info.buffer_size()].chunks_exact(channels).collect();
    ((info.width, info.height), colours.len())
}

#[test]
fn heatmap_has_the_default_size_and_a_full_colour_scale() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("heatmap.png");
    pe_ok(&[
        "plot",
        "--preset",
        "fairseq",
        "--width",
        "128",
        "--len",
        "256",
        "--out",
        s(&out),
    ]);
    let (size, colours) = inspect(&out);
    assert_eq!(size, (1000, 700));
    assert!(colours > 200, "only {colours} colours");
    assert_eq!(files_in(dir.path()), ["heatmap.png"]);
}

#[test]
fn curves_have_the_requested_size() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("curves.png");
    let args = [
        "plot", "--preset", "vaswani", "--width", "64", "--len", "200", "--kind", "curves",
    ];
    pe_ok(
        &[
            &args[..],
            &[
                "--image-width",
                "800",
                "--image-height",
                "500",
                "--out",
                s(&out),
            ],
        ]
        .concat(),
    );
    let (size, colours) = inspect(&out);
    assert_eq!(size, (800, 500));
    assert!(colours > 30, "only {colours} colours");
}

#[test]
fn similarity_has_the_requested_size_and_many_colours() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("similarity.png");
    let args = [
        "plot",
        "--preset",
        "stable-diffusion",
        "--width",
        "32",
        "--len",
        "100",
        "--offset",
        "50",
    ];
    let overrides = [
        "--kind",
        "similarity",
        "--base",
        "100",
        "--layout",
        "sin-cos",
    ];
    pe_ok(
        &[
            &args[..],
            &overrides[..],
            &[
                "--image-width",
                "640",
                "--image-height",
                "480",
                "--out",
                s(&out),
            ],
        ]
        .concat(),
    );
    let (size, colours) = inspect(&out);
    assert_eq!(size, (640, 480));
    assert!(colours > 200, "only {colours} colours");
}

/// `pe plot bench` draws the sweeps of two reports (a CPU's and a GPU's) on log-log axes, a
/// line and markers per case, with a legend.
#[test]
fn bench_sweeps_are_drawn_with_a_legend() {
    let dir = tempfile::tempdir().unwrap();
    let report = |label: &str, scale: f64| {
        let lengths = [1.0, 16.0, 256.0, 4096.0, 65536.0];
        let line = |name: &str, per_row: f64, fixed: f64| {
            let ms: Vec<String> = lengths
                .iter()
                .map(|n| (scale * (fixed + per_row * n)).to_string())
                .collect();
            format!(r#"{{"name": "{name}", "ms": [{}]}}"#, ms.join(", "))
        };
        let series = [
            line("generated", 2e-3, 0.01),
            line("cached view", 0.0, 2e-4),
            line("cached copy", 1e-3, 0.002),
        ];
        format!(
            r#"{{"machine": "m", "sweep": {{"label": "{label}", "rows": "fairseq d 1024 f32", "lengths": [1, 16, 256, 4096, 65536], "series": [{}]}}}}"#,
            series.join(", ")
        )
    };
    let (cpu, gpu) = (dir.path().join("cpu.json"), dir.path().join("gpu.json"));
    std::fs::write(&cpu, report("CPU", 1.0)).unwrap();
    std::fs::write(&gpu, report("GPU", 0.05)).unwrap();
    let out = dir.path().join("sweep.png");
    let args = ["plot", "bench", "--json", s(&cpu), "--json", s(&gpu)];
    pe_ok(&[&args[..], &["--out", s(&out)]].concat());
    assert_eq!(inspect(&out).0, (1000, 700));
    // The first and the sixth line (the CPU's generated rows, the GPU's cached copies): far
    // more pixels of their colours than their legend's 3 x 28 px swatches.
    for rgb in [[0, 114, 178], [86, 180, 233]] {
        let n = pixels_of(&out, rgb);
        assert!(n > 1000, "{n} pixels of {rgb:?}");
    }
    assert_eq!(files_in(dir.path()), ["cpu.json", "gpu.json", "sweep.png"]);
}

/// The number of pixels of colour `rgb` in the PNG at `path`.
fn pixels_of(path: &Path, rgb: [u8; 3]) -> usize {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks_exact(channels)
        .filter(|p| p[..3] == rgb)
        .count()
}
