//! A tour of candle-pe: every preset, one row of each, and how exact the sinusoidal and rotary
//! tables are next to the f32 constructions candle models use today.
//!
//! ```text
//! cargo run --release --example tour
//! ```

use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

use candle_pe::{PeSpec, Preset, Rope, RopeConfig, SinusoidalEncoding};
use pe_testkit::{naive_f32_table, naive_llama_rope};

fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    let d = (a.to_dtype(DType::F64)? - b.to_dtype(DType::F64)?)?.abs()?;
    Ok(d.flatten_all()?.max(0)?.to_scalar::<f64>()?)
}

fn main() -> Result<()> {
    presets()?;
    sinusoidal_errors()?;
    rotary_errors()?;
    one_build()
}

/// Every preset's row for position 1 at width 8.
fn presets() -> Result<()> {
    let dev = Device::Cpu;
    println!("## Presets: the row for position 1 at width 8\n");
    println!("| preset | frequencies | layout | odd widths | row | models |");
    println!("|---|---|---|---|---|---|");
    for preset in Preset::ALL {
        let spec = preset.spec(8);
        let row = SinusoidalEncoding::new(spec)?.range(1, 1, DType::F64, &dev)?;
        let row: Vec<String> = row
            .squeeze(0)?
            .to_vec1::<f64>()?
            .iter()
            .map(|v| format!("{v:.4}"))
            .collect();
        println!(
            "| {preset} | {} | {} | {} | {} | {} |",
            spec.frequencies,
            spec.layout.to_string().replace('|', "\\|"),
            spec.odd_width,
            row.join(" "),
            preset.models()
        );
    }
    Ok(())
}

/// The largest error of f32 tables, ours and the naive ops', at far positions.
fn sinusoidal_errors() -> Result<()> {
    let dev = Device::Cpu;
    let width = 512;
    let rows = 256;
    let pe = SinusoidalEncoding::new(PeSpec::fairseq(width))?;
    println!("\n## Max abs error, fairseq preset, width {width}, {rows} rows, f32 output\n");
    println!("Reference: candle-pe's f64 table (held to 1e-9 of the exact values by the tests' 256-bit oracle).\n");
    println!("| first position | candle-pe | naive f32 candle ops |");
    println!("|---:|---:|---:|");
    for offset in [0usize, 65_535, 1_000_000, 16_777_216, (1 << 31) - rows] {
        let exact = pe.range(offset, rows, DType::F64, &dev)?;
        let ours = pe.range(offset, rows, DType::F32, &dev)?;
        let naive = naive_f32_table(&pe, offset, rows, &dev)?;
        println!(
            "| {offset} | {:.1e} | {:.1e} |",
            max_abs_diff(&ours, &exact)?,
            max_abs_diff(&naive, &exact)?
        );
    }
    Ok(())
}

/// The largest error of f32 rotary tables, ours and llama.rs's, near position 131,072.
fn rotary_errors() -> Result<()> {
    let dev = Device::Cpu;
    println!("\n## Rotary tables (Llama, head_dim 128, rope_theta 500000), f32, positions 131,064..=131,072\n");
    let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
    let (naive_cos, naive_sin) = naive_llama_rope(128, 500_000.0, 131_073, &dev)?;
    let (cos, sin) = rope.range(131_064, 9, DType::F32, &dev)?;
    let (exact_cos, exact_sin) = rope.range(131_064, 9, DType::F64, &dev)?;
    let ours = max_abs_diff(&cos, &exact_cos)?.max(max_abs_diff(&sin, &exact_sin)?);
    let naive = max_abs_diff(&naive_cos.narrow(0, 131_064, 9)?, &exact_cos)?
        .max(max_abs_diff(&naive_sin.narrow(0, 131_064, 9)?, &exact_sin)?);
    println!(
        "max abs error: candle-pe {ours:.1e}, candle-transformers' Llama construction {naive:.1e}"
    );
    Ok(())
}

/// One build of a large table, ours and the naive ops', timed once.
fn one_build() -> Result<()> {
    let dev = Device::Cpu;
    let (len, width) = (65_536, 1024);
    let pe = SinusoidalEncoding::new(PeSpec::fairseq(width))?;
    println!("\n## One build of a {len} x {width} f32 table (a single run; see the benchmarks)\n");
    let start = Instant::now();
    let table = pe.range(0, len, DType::F32, &dev)?;
    let ours = start.elapsed();
    let start = Instant::now();
    let naive = naive_f32_table(&pe, 0, len, &dev)?;
    let baseline = start.elapsed();
    println!(
        "candle-pe: {:.1} ms, naive candle ops: {:.1} ms",
        ours.as_secs_f64() * 1e3,
        baseline.as_secs_f64() * 1e3
    );
    println!(
        "max abs difference over the table: {:.1e}",
        max_abs_diff(&table, &naive)?
    );
    Ok(())
}
