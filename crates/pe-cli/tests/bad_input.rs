//! The bad-input suite: every `pe` subcommand given bad flags, bad values and hostile files.
//! Each case runs twice, into an empty folder and over an existing output file, and must:
//! - exit with its code (2 for a bad command line, 1 for anything else), not by a signal, a
//!   panic or an abort;
//! - print one line on stderr naming the flag or the config field at fault and the value;
//! - leave no file behind, and the existing output byte for byte as it was.
//!
//! Grow it as flags appear: a case is one line of the tables below, `code | arguments |
//! fragment | ...`: the exit code, the arguments (`OUT` is the output path, `IN/name` an
//! input file of [`inputs`]), and fragments the message must hold, a flag first.

mod common;

use std::path::Path;

use common::{files_in, pe};

/// A case: the exit code, the arguments and the fragments of the message.
type Case<'a> = (i32, &'a str, Vec<&'a str>);

/// The cases of a table, a line each.
fn cases(table: &str) -> Vec<Case<'_>> {
    table
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut parts = l.split(" | ");
            let code = parts.next().unwrap().parse().unwrap();
            let args = parts.next().unwrap();
            (code, args, parts.collect())
        })
        .collect()
}

const TABLE: &str = "
2 | table --preset nope --width 8 --len 4 --out OUT.npy | --preset | nope
1 | table --preset fairseq --width 0 --len 4 --out OUT.npy | --width | 0
2 | table --preset fairseq --width -8 --len 4 --out OUT.npy | --width | -8
2 | table --preset fairseq --width 8 --len -1 --out OUT.npy | --len | -1
2 | table --preset fairseq --width 8 --len 99999999999999999999 --out OUT.npy | --len
1 | table --preset fairseq --width 8 --len 4 --offset 2147483645 --out OUT.npy | --offset 2147483645 --len 4
2 | table --preset fairseq --width 8 --positions 1,x --out OUT.npy | --positions | x
1 | table --preset fairseq --width 8 --positions -5 --out OUT.npy | --positions | -5
1 | table --preset fairseq --width 8 --positions 2147483648 --out OUT.npy | --positions | 2147483648
1 | table --preset stable-diffusion --width 8 --timesteps nan --out OUT.npy | --timesteps | NaN
1 | table --preset stable-diffusion --width 8 --timesteps 1e300 --out OUT.npy | --timesteps | 1e300
1 | table --preset fairseq --width 8 --base 0 --len 4 --out OUT.npy | --base | 0
1 | table --preset fairseq --width 8 --base -1 --len 4 --out OUT.npy | --base | -1
1 | table --preset fairseq --width 8 --base 1e-300 --len 4 --out OUT.npy | --base | 1e100
1 | table --preset fairseq --width 8 --angle-scale inf --len 4 --out OUT.npy | --angle-scale | inf
1 | table --preset fairseq --width 8 --angle-scale 1e300 --len 4 --out OUT.npy | --angle-scale
2 | table --preset fairseq --width 8 --frequencies h-shift:x --len 4 --out OUT.npy | --frequencies | h-shift:x
1 | table --preset fairseq --width 2 --frequencies h-minus-1 --len 4 --out OUT.npy | --frequencies
1 | table --preset fairseq --width 7 --odd reject --len 4 --out OUT.npy | --odd | --width
2 | table --preset fairseq --width 8 --layout diagonal --len 4 --out OUT.npy | --layout | diagonal
2 | table --preset fairseq --width 8 --len 4 --dtype f8 --out OUT.npy | --dtype | f8
2 | table --preset fairseq --width 8 --len 4 --device tpu --out OUT.npy | --device | tpu
1 | table --preset fairseq --width 8 --len 4 --out OUT.txt | --out | .txt
2 | table --preset fairseq --width 8 --len 4 --positions 1 --out OUT.npy | --len | --positions
2 | table --preset fairseq --width 8 --positions 1 --offset 2 --out OUT.npy | --offset | --positions
1 | table --preset fairseq --width 16777216 --len 4294967296 --out OUT.npy | --len
2 | table --preset fairseq --width 8 --len 4 --chunk-rows 0 --out OUT.npy | --chunk-rows | 0
";

const PLOT: &str = "
1 | plot --preset fairseq --width 8 --len 0 --out OUT.png | --len 0
1 | plot --preset fairseq --width 0 --len 4 --out OUT.png | --width | 0
2 | plot --preset fairseq --width 8 --len 4 --kind pie --out OUT.png | --kind | pie
1 | plot --preset fairseq --width 8 --len 4 --image-width 0 --out OUT.png | --image-width | 0
1 | plot --preset fairseq --width 8 --len 4 --image-height 100000 --out OUT.png | --image-height | 100000
1 | plot --preset fairseq --width 8 --len 4 --out OUT.npy | --out | .png
2 | plot --preset fairseq --width 8 --len 4 --offset -3 --out OUT.png | --offset | -3
1 | plot --preset fairseq --width 8 --len 4 --offset 2147483647 --out OUT.png | --offset 2147483647
1 | plot grid --width 6 --grid 4,4 --out OUT.png | --width | 6
1 | plot grid --width 8 --grid 0,5 --out OUT.png | --grid 0,5
2 | plot bench --out OUT.png | --json
1 | plot bench --json IN/sweep.json --out OUT.npy | --out | .png
1 | plot bench --json IN/absent.json --out OUT.png | --json | absent.json
1 | plot bench --json IN/empty.json --out OUT.png | --json | not JSON
1 | plot bench --json IN/plain.json --out OUT.png | --json | sweep
1 | plot bench --json IN/sweep_zero.json --out OUT.png | --json | holds 0 | positive
1 | plot bench --json IN/sweep_short.json --out OUT.png | --json | 1 times for 2 lengths
1 | plot bench --json IN/sweep_extra.json --out OUT.png | --json | colour
1 | plot bench --json IN/sweep_empty.json --out OUT.png | --json | nothing to draw
1 | plot bench --json IN/sweep.json --json IN/sweep_other_rows.json --out OUT.png | --json | would not compare
1 | plot grid --width 8 --grid 4,4 --patch 9,0 --out OUT.png | --patch 9,0
1 | plot grid --width 8 --grid 4,4 --patch 1 --out OUT.png | --patch | 1 numbers
1 | plot grid --width 8 --grid 4,4 --pair 4 --out OUT.png | --pair 4
2 | plot grid --width 8 --grid 4,4 --pair 1 --patch 1,1 --out OUT.png | --pair | --patch
1 | plot grid --width 8 --grid 4,4 --interpolation-scale 1e-300 --out OUT.png | --interpolation-scale | 1e-300
1 | plot grid --width 8 --grid 4,4 --base-size 0 --out OUT.png | --base-size | 0
2 | plot grid --preset fairseq --width 8 --grid 4,4 --out OUT.png | --preset
";

const GRID_ALIBI: &str = "
1 | grid --width 6 --grid 4,4 --out OUT.npy | --width | 6
1 | grid --width 8 --grid 4,4,4 --out OUT.npy | --grid | 3 numbers
1 | grid --width 8 --grid -4,4 --out OUT.npy | --grid | -4
1 | grid --width 8 --grid 2000000,2 --out OUT.npy | --grid | 2000000
1 | grid --width 8 --grid 4,5 --interpolation-scale 1e-300 --out OUT.npy | --interpolation-scale | 1e-300
1 | grid --width 8 --grid 4,5 --interpolation-scale 0 --out OUT.npy | --interpolation-scale | 0
1 | grid --width 8 --grid 4,5 --base-size nan --out OUT.npy | --base-size | NaN
1 | grid --width 8 --grid 4,5 --base-size 1e300 --out OUT.npy | --base-size | 1e300
1 | grid --width 8 --grid 4,5 --out OUT.png | --out | pe plot grid
1 | grid --width 8 --grid 1048576,1048576 --out OUT.npy | --grid 1048576,1048576
1 | alibi --heads 0 --out OUT.npy | --heads | 0
2 | alibi --heads -2 --out OUT.npy | --heads | -2
1 | alibi --heads 8 --max-bias 0 --out OUT.npy | --max-bias | 0
1 | alibi --heads 8 --max-bias -1 --out OUT.npy | --max-bias | -1
2 | alibi --heads 8 --len -1 --out OUT.npy | --len | -1
1 | alibi --heads 1048576 --len 1048576 --out OUT.npy | --len
1 | alibi --heads 8 --out OUT.csv | --out | .csv
";

const ROPE_ND: &str = "
1 | rope-nd --axes-dim 4,3 --grid 2,2 --out OUT.safetensors | --axes-dim | 3
1 | rope-nd --axes-dim 4,0 --grid 2,2 --out OUT.safetensors | --axes-dim | 0
2 | rope-nd --axes-dim 4,x --grid 2,2 --out OUT.safetensors | --axes-dim | x
1 | rope-nd --split-spectrum 6 --grid 2,2 --out OUT.safetensors | --split-spectrum | 6
1 | rope-nd --axes-dim 4,4 --rope-theta 0 --grid 2,2 --out OUT.safetensors | --rope-theta | 0
1 | rope-nd --axes-dim 4,4 --rope-theta 1e-300 --grid 2,2 --out OUT.safetensors | --rope-theta
2 | rope-nd --axes-dim 4,4 --theta 100 --grid 2,2 --out OUT.safetensors | --theta | --rope-theta
2 | rope-nd --theta 100 --grid 2,2 --out OUT.safetensors | --theta | --rope-theta
1 | rope-nd --axes-dim 4,4 --grid 2,-2 --out OUT.safetensors | --grid | -2
1 | rope-nd --axes-dim 4,4 --grid 2,2 --out OUT.npy | --out | .safetensors
1 | rope-nd --axes-dim 4,4 --positions IN/huge.npy --out OUT.safetensors | --positions | huge.npy
1 | rope-nd --axes-dim 4,4 --positions IN/truncated.npy --out OUT.safetensors | --positions | truncated.npy
1 | rope-nd --axes-dim 4,4 --positions IN/f32.npy --out OUT.safetensors | --positions | int64
1 | rope-nd --axes-dim 4,4 --positions IN/f64.npy --out OUT.safetensors | --positions | (n, 2)
1 | rope-nd --axes-dim 4,4 --positions IN/garbage.npy --out OUT.safetensors | --positions | garbage.npy
1 | rope-nd --axes-dim 4,4 --positions IN/empty.npy --out OUT.safetensors | --positions | empty.npy
1 | rope-nd --axes-dim 4,4 --positions IN/missing.npy --out OUT.safetensors | --positions | missing.npy
1 | rope-nd --axes-dim 4,4,4 --positions IN/ids_s.npy --out OUT.safetensors | --positions | ids_s.npy
2 | rope-nd --family nope --head-dim 8 --grid 2,2,2 --out OUT.safetensors | --family | nope
1 | rope-nd --family wan --head-dim 0 --grid 2,2,2 --out OUT.safetensors | --head-dim | 0
1 | rope-nd --family cogvideox --head-dim 64 --grid 2,2,2 --crop-base 0,0 --out OUT.safetensors | --crop-base | 0
1 | rope-nd --family wan --head-dim 128 --crop-base 4,4 --grid 2,2,2 --out OUT.safetensors | --crop-base | cogvideox
";

const ROPE_FLAGS: &str = "
1 | rope --head-dim 0 --len 4 --out OUT.safetensors | --head-dim | 0
1 | rope --head-dim 7 --len 4 --out OUT.safetensors | --head-dim | 7
1 | rope --head-dim 8 --partial-rotary-factor 1.5 --len 4 --out OUT.safetensors | --partial-rotary-factor | 1.5
1 | rope --head-dim 8 --rotary-dim 10 --len 4 --out OUT.safetensors | --rotary-dim 10 | --head-dim
1 | rope --head-dim 8 --rotary-dim 0 --len 4 --out OUT.safetensors | --rotary-dim 0
1 | rope --head-dim 8 --rotary-dim 5 --len 4 --out OUT.safetensors | --rotary-dim | 5
2 | rope --head-dim 8 --rotary-dim 4 --partial-rotary-factor 0.5 --len 4 --out OUT.safetensors | --rotary-dim | --partial-rotary-factor
2 | rope --config IN/missing.json --rotary-dim 4 --len 4 --out OUT.safetensors | --rotary-dim | --config
1 | rope --head-dim 8 --rope-theta -1 --len 4 --out OUT.safetensors | --rope-theta | -1
1 | rope --head-dim 8 --rope-theta 1e-300 --len 4 --out OUT.safetensors | --rope-theta
1 | rope --head-dim 8 --len 4 --offset 2147483645 --out OUT.safetensors | --offset 2147483645 --len 4
1 | rope --head-dim 8 --len 4 --out OUT.npy | --out | .safetensors
2 | rope --head-dim 8 --out OUT.safetensors | --len
1 | rope --head-dim 8 --len 4 --layer-type full_attention --out OUT.safetensors | --layer-type | --config
1 | rope --head-dim 8 --len 4 --layer 1 --out OUT.safetensors | --layer | --config
1 | rope --head-dim 8 --len 4 --out OUT.safetensors linear --factor 0 | --factor | 0
2 | rope --head-dim 8 --len 4 --out OUT.safetensors linear | --factor
1 | rope --head-dim 2 --len 4 --max-position-embeddings 4 --out OUT.safetensors dynamic --factor 2 | --head-dim | 2
1 | rope --head-dim 8 --len 4 --out OUT.safetensors dynamic --factor 2 | --max-position-embeddings
1 | rope --head-dim 8 --len 4 --out OUT.safetensors llama3 --factor 8 --low-freq-factor 4 --high-freq-factor 1 --original-max-position-embeddings 8 | --high-freq-factor | low_freq_factor
1 | rope --head-dim 8 --len 4 --out OUT.safetensors yarn --factor 4 --beta-fast nan --original-max-position-embeddings 8 | --beta-fast | NaN
1 | rope --head-dim 8 --len 4 --max-position-embeddings 8 --out OUT.safetensors longrope --short-factor 1,2 --long-factor 1,2,3,4 --original-max-position-embeddings 4 | --short-factor | 2 numbers
1 | rope --head-dim 8 --len 4 --max-position-embeddings 8 --out OUT.safetensors longrope --short-factor 1,2,3,4 --long-factor 1,-2,3,4 --original-max-position-embeddings 4 | --long-factor | [1] | -2
1 | rope --head-dim 8 --partial-rotary-factor 0 --len 4 --out OUT.safetensors proportional | --partial-rotary-factor | 0
1 | rope --head-dim 8 --positions IN/huge.npy --out OUT.safetensors | --positions | huge.npy
1 | rope --head-dim 8 --positions IN/truncated.npy --out OUT.safetensors | --positions | truncated.npy
1 | rope --head-dim 8 --positions IN/f64.npy --out OUT.safetensors | --positions | int64
1 | rope --head-dim 8 --positions IN/ids_s3.npy --out OUT.safetensors | --positions | mrope_section
1 | rope --head-dim 8 --positions IN/negative.npy --out OUT.safetensors | --positions | -7
2 | rope --head-dim 8 --len 4 --longrope-policy sometimes --out OUT.safetensors | --longrope-policy | sometimes
1 | rope --head-dim 8 --len 4 --longrope-policy vllm --out OUT.safetensors | --longrope-policy vllm | default
";

const ROPE_CONFIG: &str = "
1 | rope --config IN/missing.json --len 4 --out OUT.safetensors | --config | missing.json
1 | rope --config IN/empty.json --len 4 --out OUT.safetensors | --config | not JSON
1 | rope --config IN/not_utf8.json --len 4 --out OUT.safetensors | --config | not_utf8.json
1 | rope --config IN/deep.json --len 4 --out OUT.safetensors | --config | deep.json
1 | rope --config IN/array.json --len 4 --out OUT.safetensors | --config | JSON object
1 | rope --config IN/null.json --len 4 --out OUT.safetensors | --config | JSON object
1 | rope --config IN/huge_head_dim.json --len 4 --out OUT.safetensors | --config | head_dim | 1099511627776
1 | rope --config IN/huge_number.json --len 4 --out OUT.safetensors | --config | not JSON
1 | rope --config IN/scaling_number.json --len 4 --out OUT.safetensors | --config | rope_scaling | object
1 | rope --config IN/factor_string.json --len 4 --out OUT.safetensors | --config | rope_scaling.factor
1 | rope --config IN/unknown_type.json --len 4 --out OUT.safetensors | --config | rope_type | sideways
1 | rope --config IN/long_list.json --len 4 --out OUT.safetensors | --config | rope_theta | ...
1 | rope --config IN/layer_types.json --len 4 --out OUT.safetensors | --config | --layer-type
1 | rope --config IN/layer_types.json --layer-type cross --len 4 --out OUT.safetensors | --layer-type cross
1 | rope --config IN/layer_types.json --layer 9 --len 4 --out OUT.safetensors | --layer 9
1 | rope --config IN/no_head_dim.json --len 4 --out OUT.safetensors | --config | head_dim
2 | rope --config IN/layer_types.json --head-dim 8 --len 4 --out OUT.safetensors | --config | --head-dim
1 | rope --config IN/layer_types.json --len 4 --out OUT.safetensors linear --factor 2 | --config | linear
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scale nan | --rope-scale | NaN
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scaling yarn --rope-scale -1 | --rope-scale | -1
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-freq-base 0 | --rope-freq-base | 0
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scaling linear --rope-scale 2 --yarn-beta-fast 3 | --yarn-beta-fast | linear
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scaling linear --rope-scale 2 --yarn-orig-ctx 64 | --yarn-orig-ctx | linear
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scaling none --rope-scale 2 | --rope-scale | none
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 4294967296 | --yarn-orig-ctx | 4294967296
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scaling yarn --rope-scale 4 --yarn-ext-factor 0.5 | --yarn-ext-factor | 0.5
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scaling yarn --rope-scale 4 --yarn-beta-slow inf | --yarn-beta-slow | inf
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scale 2 | --rope-scale | default
1 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-freq-scale 0 | --rope-freq-scale | 0
2 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scaling sideways | --rope-scaling | sideways
2 | rope --config IN/plain.json --len 4 --out OUT.safetensors --rope-scale 2 --rope-freq-scale 0.5 | --rope-scale | --rope-freq-scale
1 | rope --head-dim 8 --len 4 --out OUT.safetensors --rope-scale 2 | --rope-scale | --config
1 | rope --head-dim 8 --input-ids IN/ids_s.npy --out OUT.safetensors | --input-ids | --config
1 | rope --head-dim 8 --len 4 --image-grid-thw 1,2,2 --out OUT.safetensors | --image-grid-thw | --input-ids
1 | rope --config IN/layer_types.json --input-ids IN/ids_s.npy --out OUT.safetensors | --config | model_type
";

/// The hostile and malformed input files the cases read, by name.
fn inputs(dir: &Path) {
    let npy = |name: &str, descr: &str, shape: &str, data: &[u8]| {
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    let i64s = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    npy("huge.npy", "<i8", "(1099511627776, 8)", &i64s(&[1, 2]));
    npy("truncated.npy", "<i8", "(10,)", &i64s(&[1, 2]));
    npy("f64.npy", "<f8", "(3,)", &i64s(&[1, 2, 3]));
    let f32s: Vec<u8> = [1f32, 2.0, 3.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    npy("f32.npy", "<f4", "(3,)", &f32s);
    npy("ids_s.npy", "<i8", "(4,)", &i64s(&[1, 2, 3, 4]));
    npy("ids_s3.npy", "<i8", "(3, 2)", &i64s(&[1, 2, 3, 4, 5, 6]));
    npy("negative.npy", "<i8", "(2,)", &i64s(&[1, -7]));
    std::fs::write(dir.join("garbage.npy"), b"\x00\x01 not an array at all").unwrap();
    std::fs::write(dir.join("empty.npy"), b"").unwrap();
    let json = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    let rope = r#""head_dim": 8, "num_attention_heads": 2, "hidden_size": 16, "max_position_embeddings": 64"#;
    json("empty.json", "");
    json("plain.json", &format!("{{{rope}}}"));
    std::fs::write(dir.join("not_utf8.json"), b"{\"head_dim\": \xff\xfe}").unwrap();
    json("deep.json", &"[".repeat(100_000));
    json("array.json", "[1, 2]");
    json("null.json", "null");
    json(
        "huge_head_dim.json",
        r#"{"head_dim": 1099511627776, "num_attention_heads": 2, "hidden_size": 16}"#,
    );
    json(
        "huge_number.json",
        &format!("{{{rope}, \"rope_theta\": 1e400}}"),
    );
    json(
        "scaling_number.json",
        &format!("{{{rope}, \"rope_scaling\": 2.0}}"),
    );
    json(
        "factor_string.json",
        &format!("{{{rope}, \"rope_scaling\": {{\"rope_type\": \"linear\", \"factor\": \"x\"}}}}"),
    );
    json(
        "unknown_type.json",
        &format!("{{{rope}, \"rope_scaling\": {{\"rope_type\": \"sideways\"}}}}"),
    );
    let long: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
    json(
        "long_list.json",
        &format!("{{{rope}, \"rope_theta\": [{}]}}", long.join(", ")),
    );
    json(
        "layer_types.json",
        &format!(
            "{{{rope}, \"layer_types\": [\"sliding_attention\", \"full_attention\"], \
             \"rope_parameters\": {{\"full_attention\": {{\"rope_type\": \"default\", \"rope_theta\": 1e6}}, \
             \"sliding_attention\": {{\"rope_type\": \"default\", \"rope_theta\": 1e4}}}}}}"
        ),
    );
    json("no_head_dim.json", r#"{"rope_theta": 10000}"#);
    let sweep = |rows: &str, lengths: &str, series: &str| {
        format!(
            r#"{{"sweep": {{"label": "CPU", "rows": "{rows}", "lengths": {lengths}, "series": [{series}]}}}}"#
        )
    };
    let generated = r#"{"name": "generated", "ms": [0.01, 0.1]}"#;
    json("sweep.json", &sweep("r", "[1, 16]", generated));
    json("sweep_other_rows.json", &sweep("s", "[1, 16]", generated));
    json(
        "sweep_zero.json",
        &sweep("r", "[1, 16]", r#"{"name": "g", "ms": [0, 0.1]}"#),
    );
    json(
        "sweep_short.json",
        &sweep("r", "[1, 16]", r#"{"name": "g", "ms": [0.01]}"#),
    );
    json(
        "sweep_extra.json",
        &sweep(
            "r",
            "[1, 16]",
            r#"{"name": "g", "ms": [1, 2], "colour": "red"}"#,
        ),
    );
    json(
        "sweep_empty.json",
        &sweep("r", "[]", r#"{"name": "g", "ms": []}"#),
    );
}

/// Runs `case` into an empty folder, then over an existing output file; returns whether its
/// message names a flag (`--...`), or what went wrong.
fn check(case: &Case, inputs_dir: &Path) -> Result<bool, String> {
    let (code, line, expected) = case;
    let mut named = false;
    for existing in [false, true] {
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join("out");
        let out_text = out.to_str().unwrap();
        let args: Vec<String> = line
            .split_whitespace()
            // Placeholders start an argument; a temporary folder's random name may hold "OUT"
            // or "IN/" itself, so nothing else is replaced.
            .map(|a| match (a.strip_prefix("OUT"), a.strip_prefix("IN/")) {
                (Some(ext), _) => format!("{out_text}{ext}"),
                (_, Some(name)) => inputs_dir.join(name).display().to_string(),
                _ => a.to_string(),
            })
            .collect();
        let target = args
            .iter()
            .find(|a| a.starts_with(out_text))
            .unwrap()
            .clone();
        let before = b"an output written before, to be left as it is\n";
        if existing {
            std::fs::write(&target, before).unwrap();
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let result = pe(&args);
        let stderr = String::from_utf8_lossy(&result.stderr);
        let fail = |why: String| {
            Err(format!(
                "pe {line} (existing output: {existing}): {why}\n  {stderr}"
            ))
        };
        if result.status.code() != Some(*code) {
            return fail(format!("exit {:?}, want {code}", result.status.code()));
        }
        if stderr.contains("panicked") || stderr.contains("backtrace") {
            return fail("panicked".into());
        }
        if stderr.trim_end().lines().count() != 1 || stderr.len() > 600 {
            return fail("not one short line".into());
        }
        if let Some(missing) = expected.iter().find(|f| !stderr.contains(**f)) {
            return fail(format!("does not say {missing:?}"));
        }
        named = stderr
            .match_indices("--")
            .any(|(i, _)| stderr[i + 2..].starts_with(|c: char| c.is_ascii_lowercase()));
        let name = Path::new(&target).file_name().unwrap().to_string_lossy();
        let left = files_in(out_dir.path());
        match existing {
            false if !left.is_empty() => return fail(format!("left {left:?}")),
            true if left != [name.to_string()] => return fail(format!("left {left:?}")),
            true if std::fs::read(&target).unwrap() != before => {
                return fail("changed the existing output".into())
            }
            _ => {}
        }
    }
    Ok(named)
}

#[test]
fn every_bad_input_is_refused_on_one_line_naming_its_flag() {
    let inputs_dir = tempfile::tempdir().unwrap();
    inputs(inputs_dir.path());
    let suites = [
        ("table", TABLE),
        ("plot", PLOT),
        ("grid and alibi", GRID_ALIBI),
        ("rope-nd", ROPE_ND),
        ("rope flags", ROPE_FLAGS),
        ("rope --config", ROPE_CONFIG),
    ];
    let (mut total, mut named, mut failures) = (0, 0, vec![]);
    for (suite, table) in suites {
        let mut n = 0;
        let table = cases(table);
        for case in &table {
            match check(case, inputs_dir.path()) {
                Ok(true) => n += 1,
                Ok(false) => {}
                Err(why) => failures.push(why),
            }
        }
        eprintln!(
            "{suite}: {} bad inputs, {n} messages name a flag",
            table.len()
        );
        total += table.len();
        named += n;
    }
    eprintln!("bad-input suite: {total} cases (each run twice), {named} messages name a flag");
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
