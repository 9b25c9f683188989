//! `gpu_check`: one bounded run that holds candle-pe on a device to the CPU's values and times
//! it there, for a GPU machine that has no Rust toolchain (scripts/gpu-check.sh builds it here
//! and bundles it).
//!
//! ```text
//! gpu_check --device cuda --out OUT    # on the GPU: OUT/gpu-report.md and OUT/gpu-report.json
//! gpu_check --device cpu --out OUT     # the dry run: the same checks, the generic candle-op
//!                                      # path on the CPU in place of the GPU, small sizes
//! gpu_check --device cpu --sizes full --only tables,rotation,models --out OUT
//!                                      # the GPU run's sizes, timed on the CPU (its plan)
//! ```
//!
//! Four sections, each timed:
//! - `tables`: every table family (sinusoidal presets, rotary for every rope fixture, M-RoPE,
//!   multi-axis, grids, ALiBi) in f32, f16, bf16 and f64 at positions up to 2^31 - 1, built on
//!   the device and held to the CPU's f64 tables (exact to 1e-9) within the dtype's bound;
//! - `rotation`: every rotation entry point on the device against the CPU within the dtype's
//!   bound, and the device's fast paths against their plain twins;
//! - `speed`: the `bench_report` cases on the device, interleaved, synchronised medians;
//! - `models`: the reference decoders' logits on the device against the CPU's, and decode
//!   tokens/s against candle-transformers' model on the same device.
//!
//! The exit code is 0 when every check passed, 1 when one failed, 2 on bad arguments or when
//! the device cannot be opened.

mod compare;
mod models;
mod report;
mod rotation;
mod speed;
mod tables;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::Device;
use candle_pe_core::TableBackend;

use report::Report;

/// The target: the device, the backend the checked side builds with, and the sizes.
pub struct Target {
    pub device: Device,
    /// What the checked side builds with: the device's own path (`Auto`: the kernels) on a
    /// GPU; the same kernels' host build in the CPU dry run.
    pub backend: TableBackend,
    /// Full sizes (the GPU) or small ones (the CPU dry run).
    pub full: bool,
}

impl Target {
    /// The device's name for the report.
    pub fn name(&self) -> &'static str {
        match self.device {
            Device::Cpu => "cpu (the kernels' host build)",
            Device::Cuda(_) => "cuda",
            Device::Metal(_) => "metal",
        }
    }

    /// Waits for the device's queued work.
    pub fn sync(&self) -> Result<()> {
        Ok(self.device.synchronize()?)
    }
}

struct Args {
    device: String,
    out: PathBuf,
    sections: Vec<String>,
    /// `--sizes full|small`; default full on a GPU, small on the CPU.
    full: Option<bool>,
}

const SECTIONS: [&str; 4] = ["tables", "rotation", "speed", "models"];

const USAGE: &str =
    "usage: gpu_check --device cuda|cpu --out DIR [--only tables,rotation,speed,models] [--sizes full|small]";

fn parse_args() -> Result<Args> {
    let mut device = None;
    let mut out = None;
    let mut sections: Vec<String> = SECTIONS.iter().map(|s| s.to_string()).collect();
    let mut full = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--device" => device = Some(value()?),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--only" => {
                sections = value()?.split(',').map(str::to_string).collect();
                if let Some(bad) = sections.iter().find(|s| !SECTIONS.contains(&s.as_str())) {
                    bail!(
                        "--only: no section {bad:?} (the sections: {})",
                        SECTIONS.join(", ")
                    )
                }
            }
            "--sizes" => {
                full = Some(match value()?.as_str() {
                    "full" => true,
                    "small" => false,
                    other => bail!("--sizes must be full or small, got {other:?}"),
                })
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let device = device.with_context(|| format!("--device is required\n{USAGE}"))?;
    if device != "cuda" && device != "cpu" {
        bail!("--device must be cuda or cpu, got {device:?}")
    }
    let out = out.with_context(|| format!("--out is required\n{USAGE}"))?;
    Ok(Args {
        device,
        out,
        sections,
        full,
    })
}

fn target(device: &str) -> Result<Target> {
    Ok(match device {
        "cuda" => Target {
            device: Device::new_cuda(0).context(
                "cannot open CUDA device 0 (no GPU, or no CUDA driver: is libcuda.so.1 on the \
                 library path?)",
            )?,
            backend: TableBackend::Auto,
            full: true,
        },
        _ => Target {
            device: Device::Cpu,
            backend: TableBackend::Kernel,
            full: false,
        },
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("gpu_check: {e:#}");
            return ExitCode::from(2);
        }
    };
    let target = match target(&args.device) {
        Ok(t) => Target {
            full: args.full.unwrap_or(t.full),
            ..t
        },
        Err(e) => {
            eprintln!("gpu_check: {e:#}");
            return ExitCode::from(2);
        }
    };
    let mut report = Report::new(&target);
    let start = Instant::now();
    for section in &args.sections {
        let t = Instant::now();
        eprintln!("== {section}");
        let result = match section.as_str() {
            "tables" => tables::run(&target, &mut report),
            "rotation" => rotation::run(&target, &mut report),
            "speed" => speed::run(&target, &mut report),
            _ => models::run(&target, &mut report),
        };
        if let Err(e) = result {
            // A section that stops halfway is a failure with its reason; the others still run.
            report.fail(section, &format!("{e:#}"));
        }
        report.section_time(section, t.elapsed().as_secs_f64());
        eprintln!("== {section}: {:.1} s", t.elapsed().as_secs_f64());
    }
    report.total_s = start.elapsed().as_secs_f64();
    if let Err(e) = report.write(&args.out) {
        eprintln!(
            "gpu_check: cannot write the report to {}: {e:#}",
            args.out.display()
        );
        return ExitCode::from(2);
    }
    println!("{}", report.summary());
    match report.failures() {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}
