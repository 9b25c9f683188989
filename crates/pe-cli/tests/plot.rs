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
