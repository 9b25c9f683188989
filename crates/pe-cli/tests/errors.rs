//! Every way `pe` can fail: one line on stderr naming the problem, a non-zero exit, no panic,
//! and no file (not even a temporary one) left behind.

mod common;

use common::{assert_no_files, files_in, pe_err, s};

/// Runs a failing `pe <command> --out <empty dir>/<file>` plus `extra`, checks the message,
/// and that the directory is still empty.
fn fails_writing(command: &str, file: &str, extra: &[&str], expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(file);
    let mut args = vec![command, "--out", s(&out)];
    args.extend_from_slice(extra);
    pe_err(&args, expected);
    assert_no_files(dir.path());
}

/// The words of a command line with no quoting: `words("--len 4")` is `["--len", "4"]`.
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn table_fails(extra: &[&str], expected: &[&str]) {
    fails_writing("table", "pe.npy", extra, expected)
}

#[test]
fn bad_command_lines_name_the_flag() {
    table_fails(
        &words("--preset nope --width 8 --len 4"),
        &["unknown preset \"nope\"", "fairseq"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --positions 1,2"),
        &["--len", "--positions", "cannot be used with"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --timesteps 1 --positions 1,2"),
        &["--timesteps", "--positions"],
    );
    table_fails(
        &words("--preset fairseq --width 8"),
        &["required", "--len", "--positions", "--timesteps"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --positions 1 --offset 3"),
        &["--offset", "--positions"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --timesteps 1 --offset 3"),
        &["--offset", "--timesteps"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --dtype f8"),
        &["'f8'", "--dtype", "f32"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --device tpu"),
        &["'tpu'", "--device"],
    );
    table_fails(
        &words("--preset fairseq --width eight --len 4"),
        &["'eight'", "--width"],
    );
    table_fails(&words("--preset fairseq --width 8 --len -4"), &["--len"]);
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --layout sideways"),
        &["'sideways'", "--layout"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --odd round"),
        &["'round'", "--odd"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --frequencies h-shift:x"),
        &["h-shift:x", "not a number"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --frequencies paper"),
        &["\"paper\"", "h-minus-1"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --bogus"),
        &["--bogus"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --positions 1,x"),
        &["'x'", "--positions"],
    );
}

#[test]
fn invalid_specs_report_pe_core_errors() {
    table_fails(
        &words("--preset whisper --width 7 --len 4"),
        &["width 7 is odd"],
    );
    table_fails(
        &words("--preset fairseq --width 2 --len 4"),
        &["h-1", "width 2"],
    );
    table_fails(
        &words("--preset fairseq --width 0 --len 4"),
        &["width", "got width 0"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --base -1"),
        &["base", "-1"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --angle-scale inf"),
        &["scale", "inf"],
    );
    table_fails(
        &words("--preset diffusers --width 8 --len 4 --frequencies h-shift:4"),
        &["h-shift", "shift below"],
    );
}

fn plot_fails(extra: &[&str], expected: &[&str]) {
    fails_writing("plot", "pe.png", extra, expected)
}

#[test]
fn pe_core_errors_name_the_flag() {
    let base = ["--preset", "fairseq", "--len", "4"];
    let cases: [(&[&str], &[&str]); 6] = [
        (&["--width", "8", "--base", "0"], &["--base: ", "got 0"]),
        (&["--width", "8", "--base", "-5"], &["--base: ", "got -5"]),
        (
            &["--width", "8", "--angle-scale", "nan"],
            &["--angle-scale: ", "got NaN"],
        ),
        (
            &["--width", "8", "--angle-scale", "inf"],
            &["--angle-scale: ", "got inf"],
        ),
        (
            &["--width", "8", "--frequencies", "h-shift:nan"],
            &["--frequencies: ", "shift", "got NaN"],
        ),
        (&["--width", "0"], &["--width: ", "got width 0"]),
    ];
    for (extra, expected) in cases {
        table_fails(&[&base[..], extra].concat(), expected);
        plot_fails(&[&base[..], extra].concat(), expected);
    }
}

#[test]
fn negative_values_are_parsed_then_checked() {
    let base = ["--preset", "diffusers", "--width", "8"];
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["--positions", "-1,2"],
            &[
                "--positions: ",
                "position -1 is outside",
                "0 ..= 2147483647",
            ],
        ),
        (
            &["--positions", "-1,x"],
            &["--positions", "'x' (number 2) is not an integer"],
        ),
        (&["--timesteps", "-1e12,2"], &["--timesteps", "2^31"]),
        (
            &["--len", "4", "--angle-scale", "-inf"],
            &["--angle-scale: ", "got -inf"],
        ),
        (
            &["--len", "4", "--base", "-1e-3"],
            &["--base: ", "got -0.001"],
        ),
    ];
    for (extra, expected) in cases {
        table_fails(&[&base[..], extra].concat(), expected);
    }
}

#[test]
fn out_of_range_positions_are_refused() {
    table_fails(
        &words("--preset fairseq --width 8 --len 10 --offset 2147483640"),
        &[
            "--offset 2147483640 --len 10: offset + len 2147483650",
            "2^31 - 1",
        ],
    );
    table_fails(
        &words("--preset fairseq --width 8 --len 2147483649"),
        &["--len 2147483649: offset + len 2147483649", "2^31 - 1"],
    );
    plot_fails(
        &words("--preset fairseq --width 8 --len 32 --offset 2147483647"),
        &[
            "--offset 2147483647 --len 32: offset + len 2147483679",
            "2^31 - 1",
        ],
    );
    table_fails(
        &words("--preset fairseq --width 8 --positions 4,-3"),
        &["--positions: position -3", "0 ..= 2147483647"],
    );
    table_fails(
        &words("--preset fairseq --width 8 --positions 4,2147483648"),
        &["--positions: position 2147483648", "0 ..= 2147483647"],
    );
    table_fails(
        &words("--preset diffusers --width 8 --timesteps 1,nan"),
        &["--timesteps", "NaN", "finite"],
    );
    table_fails(
        &words("--preset diffusers --width 8 --timesteps 1e12"),
        &["--timesteps", "2^31"],
    );
}

#[test]
fn outputs_that_cannot_be_written_are_refused() {
    let args = ["table", "--preset", "fairseq", "--width", "8", "--len", "4"];
    let dir = tempfile::tempdir().unwrap();
    let bf16 = dir.path().join("t.npy");
    pe_err(
        &[&args[..], &["--dtype", "bf16", "--out", s(&bf16)]].concat(),
        &["bfloat16", ".safetensors"],
    );
    let txt = dir.path().join("t.txt");
    pe_err(
        &[&args[..], &["--out", s(&txt)]].concat(),
        &["t.txt", ".npy, .safetensors or .csv"],
    );
    let missing = dir.path().join("no/such/dir/t.npy");
    pe_err(
        &[&args[..], &["--out", s(&missing)]].concat(),
        &["cannot write", "no/such/dir/t.npy"],
    );
    let is_dir = dir.path().join("d.npy");
    std::fs::create_dir(&is_dir).unwrap();
    pe_err(
        &[&args[..], &["--out", s(&is_dir)]].concat(),
        &["d.npy", "directory"],
    );
    assert_eq!(files_in(dir.path()), ["d.npy"]);
}

#[test]
fn outputs_larger_than_the_free_space_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    // 2^31 - 1 rows of 16384 f64 values, 281 TB. One chunk of all the rows makes pe fail at once
    // (pe-core will not allocate it) if the check is ever lost, rather than fill the disk.
    let table = [
        "table",
        "--preset",
        "vaswani",
        "--width",
        "16384",
        "--len",
        "2147483647",
        "--dtype",
        "f64",
        "--chunk-rows",
        "2147483647",
    ];
    for (ext, size) in [
        ("npy", "281474976579712 bytes (281.5 TB)"),
        ("safetensors", "(281.5 TB)"),
        ("csv", "(70.4 TB)"),
    ] {
        let out = dir.path().join(format!("big.{ext}"));
        pe_err(
            &[&table[..], &["--out", s(&out)]].concat(),
            &[
                "--len 2147483647 (2147483647 rows x 16384 columns of f64)",
                size,
                "free",
            ],
        );
    }
    // cos and sin, each 2^31 - 1 rows of 32768 f64 values, 1.1 PB.
    let out = dir.path().join("rope.safetensors");
    pe_err(
        &[
            "rope",
            "--head-dim",
            "65536",
            "--len",
            "2147483647",
            "--dtype",
            "f64",
            "--out",
            s(&out),
        ],
        &[
            "--len 2147483647 (cos and sin, each 2147483647 rows x 32768 columns)",
            "(1.1 PB)",
            "free",
        ],
    );
    assert_no_files(dir.path());
}

#[test]
fn positions_past_2_31_are_reported_before_the_size() {
    // Too large for the disk too, but the range is what to fix first.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big.npy");
    let message = pe_err(
        &[
            "table",
            "--preset",
            "vaswani",
            "--width",
            "16384",
            "--dtype",
            "f64",
            "--offset",
            "5",
            "--len",
            "2147483647",
            "--out",
            s(&out),
        ],
        &[
            "--offset 5 --len 2147483647: offset + len 2147483652",
            "2^31 - 1",
        ],
    );
    assert!(!message.contains("free"), "{message}");
    let out = dir.path().join("rope.safetensors");
    let message = pe_err(
        &[
            "rope",
            "--head-dim",
            "65536",
            "--dtype",
            "f64",
            "--offset",
            "5",
            "--len",
            "2147483647",
            "--out",
            s(&out),
        ],
        &["--offset 5 --len 2147483647", "2^31 - 1"],
    );
    assert!(!message.contains("free"), "{message}");
    assert_no_files(dir.path());
}

#[test]
fn a_failed_run_leaves_an_existing_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("keep.npy");
    std::fs::write(&out, b"old contents").unwrap();
    let args = [
        "table",
        "--preset",
        "whisper",
        "--width",
        "7",
        "--len",
        "4",
        "--out",
        s(&out),
    ];
    pe_err(&args, &["width 7"]);
    assert_eq!(std::fs::read(&out).unwrap(), b"old contents");
    assert_eq!(files_in(dir.path()), ["keep.npy"]);
}

#[test]
fn cuda_without_support_or_gpu_is_a_clear_error() {
    table_fails(
        &words("--preset fairseq --width 8 --len 4 --device cuda"),
        &["--device cuda", "CUDA"],
    );
}

#[test]
fn plot_errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("p.png");
    let jpg = dir.path().join("p.jpg");
    let missing = dir.path().join("no/dir/p.png");
    let base = ["plot", "--preset", "fairseq", "--len", "32"];
    let cases: [(&[&str], &[&str]); 9] = [
        (
            &["--width", "16", "--out", s(&png), "--kind", "pie"],
            &["'pie'", "--kind"],
        ),
        (&["--width", "16", "--out", s(&jpg)], &["p.jpg", "PNG"]),
        (
            &["--width", "16", "--out", s(&png), "--image-width", "10"],
            &["--image-width 10"],
        ),
        (
            &[
                "--width",
                "16",
                "--out",
                s(&png),
                "--image-height",
                "100000",
            ],
            &["--image-height 100000"],
        ),
        (
            &["--width", "16", "--out", s(&png), "--offset", "2147483647"],
            &["offset + len"],
        ),
        (
            &["--width", "9", "--out", s(&png), "--odd", "reject"],
            &["width 9"],
        ),
        (
            &["--width", "16", "--out", s(&png), "--positions", "1,2"],
            &["--positions"],
        ),
        (
            &["--width", "16", "--out", s(&missing)],
            &["cannot write", "p.png"],
        ),
        (
            &["--width", "16", "--out", s(&png), "--layout", "diagonal"],
            &["'diagonal'"],
        ),
    ];
    for (extra, expected) in cases {
        pe_err(&[&base[..], extra].concat(), expected);
    }
    pe_err(
        &[
            "plot",
            "--preset",
            "fairseq",
            "--width",
            "16",
            "--len",
            "0",
            "--out",
            s(&png),
        ],
        &["--len 0"],
    );
    assert_no_files(dir.path());
}

#[cfg(unix)]
#[test]
fn an_interrupted_table_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big.npy");
    // 4 GB of f32: far more than can be written before the signal arrives.
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_pe"))
        .args([
            "table", "--preset", "fairseq", "--width", "4096", "--len", "250000",
        ])
        .args(["--out", s(&out)])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while files_in(dir.path()).is_empty() {
        assert!(
            started.elapsed().as_secs() < 30,
            "no temporary file appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_no_files(dir.path());
}

#[test]
fn no_subcommand_shows_the_help_and_fails() {
    let out = common::pe(&[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for sub in ["presets", "table", "plot"] {
        assert!(stderr.contains(sub), "{stderr}");
    }
}

#[test]
fn values_outside_the_exact_domain_are_refused() {
    // A frequency beyond 2^40: a huge scale, or a tiny base.
    table_fails(
        &words("--preset vaswani --width 8 --len 4 --angle-scale 1e20"),
        &["--base / --angle-scale", "frequency 0", "2^40"],
    );
    table_fails(
        &words("--preset vaswani --width 8 --len 4 --base 1e-300"),
        &["--base / --angle-scale", "2^40"],
    );
    // Frequencies in range, but angles past 2^40 at these positions.
    table_fails(
        &words("--preset vaswani --width 8 --len 100 --offset 1000000 --angle-scale 2e6"),
        &[
            "--offset 1000000 --len 100 / --angle-scale",
            "2^40",
            "549755",
        ],
    );
    table_fails(
        &words("--preset diffusers --width 8 --timesteps 1e20"),
        &["--timesteps", "1e20", "2^31"],
    );
}
