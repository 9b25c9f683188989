//! What a run found: checks (passed or failed, with the largest difference and its bound),
//! timings, and the time each section took; written as markdown and JSON.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::{json, Value};

use crate::Target;

/// One comparison.
pub struct Check {
    pub section: String,
    pub name: String,
    /// `bits` (must be equal), `bound` (within the bound), or `failed` (the check stopped).
    pub kind: &'static str,
    pub max_diff: f64,
    pub bound: f64,
    pub passed: bool,
    pub note: String,
}

/// One timed case against its reference; times in milliseconds.
pub struct Timing {
    pub case: String,
    pub ours_ms: f64,
    pub reference: String,
    pub reference_ms: Option<f64>,
    /// The median of the per-round ratios ours / reference.
    pub ratio: Option<f64>,
}

pub struct Report {
    pub device: String,
    pub machine: String,
    pub checks: Vec<Check>,
    pub timings: Vec<Timing>,
    pub notes: Vec<String>,
    pub sections: Vec<(String, f64)>,
    pub total_s: f64,
    /// Time against sequence length (`pe_testkit::Sweep`), which `pe plot bench` draws.
    pub sweep: Option<Value>,
}

impl Report {
    pub fn new(target: &Target) -> Self {
        Report {
            device: target.name().to_string(),
            machine: machine(),
            checks: Vec::new(),
            timings: Vec::new(),
            notes: Vec::new(),
            sections: Vec::new(),
            total_s: 0.0,
            sweep: None,
        }
    }

    /// Records a comparison: bits where `bound` is 0, else within `bound`.
    pub fn check(&mut self, section: &str, name: &str, max_diff: f64, bound: f64) {
        let passed = max_diff <= bound; // NaN fails
        if !passed {
            eprintln!("  FAIL {name}: {max_diff:e} > {bound:e}");
        }
        self.checks.push(Check {
            section: section.into(),
            name: name.into(),
            kind: if bound == 0.0 { "bits" } else { "bound" },
            max_diff,
            bound,
            passed,
            note: String::new(),
        });
    }

    /// Adds a remark to the last check.
    pub fn annotate(&mut self, note: &str) {
        if let Some(c) = self.checks.last_mut() {
            c.note = note.into();
        }
    }

    /// Records a section that stopped halfway, with the reason.
    pub fn fail(&mut self, section: &str, why: &str) {
        self.failed(section, &format!("{section} (stopped)"), why);
    }

    /// Runs one case; an error it returns is recorded as a failed check named `name`, and
    /// the run goes on with the next case.
    pub fn attempt(
        &mut self,
        section: &str,
        name: &str,
        f: impl FnOnce(&mut Report) -> Result<()>,
    ) {
        if let Err(e) = f(self) {
            self.failed(section, name, &format!("{e:#}"));
        }
    }

    /// A check that could not run to its end.
    fn failed(&mut self, section: &str, name: &str, why: &str) {
        eprintln!("  FAIL {name}: {why}");
        self.checks.push(Check {
            section: section.into(),
            name: name.into(),
            kind: "failed",
            max_diff: f64::NAN,
            bound: 0.0,
            passed: false,
            note: why.into(),
        });
    }

    pub fn timing(&mut self, t: Timing) {
        self.timings.push(t);
    }

    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        eprintln!("  note: {note}");
        self.notes.push(note);
    }

    pub fn section_time(&mut self, section: &str, seconds: f64) {
        self.sections.push((section.into(), seconds));
    }

    pub fn failures(&self) -> usize {
        self.checks.iter().filter(|c| !c.passed).count()
    }

    /// The one line printed at the end.
    pub fn summary(&self) -> String {
        format!(
            "gpu_check on {}: {} checks, {} failed; {} timings; {:.0} s",
            self.device,
            self.checks.len(),
            self.failures(),
            self.timings.len(),
            self.total_s
        )
    }

    pub fn write(&self, out: &Path) -> Result<()> {
        std::fs::create_dir_all(out)?;
        std::fs::write(out.join("gpu-report.md"), self.markdown())?;
        std::fs::write(
            out.join("gpu-report.json"),
            serde_json::to_string_pretty(&self.json())?,
        )?;
        Ok(())
    }

    fn markdown(&self) -> String {
        let mut s = String::new();
        self.markdown_head(&mut s);
        self.markdown_speed(&mut s);
        if !self.notes.is_empty() {
            let _ = writeln!(s, "\n## Notes\n");
            for n in &self.notes {
                let _ = writeln!(s, "- {n}");
            }
        }
        self.markdown_checks(&mut s);
        s
    }

    /// The device, the machine, the summary, the sections' times and the failed checks.
    fn markdown_head(&self, s: &mut String) {
        let _ = writeln!(s, "# gpu_check report\n");
        let _ = writeln!(s, "- device: {}", self.device);
        let _ = writeln!(s, "- machine: {}", self.machine);
        let _ = writeln!(s, "- build: {}", build());
        let _ = writeln!(s, "- {}", self.summary());
        let times: Vec<String> = self
            .sections
            .iter()
            .map(|(n, t)| format!("{n} {t:.1} s"))
            .collect();
        let _ = writeln!(s, "- sections: {}\n", times.join(", "));
        let failed: Vec<&Check> = self.checks.iter().filter(|c| !c.passed).collect();
        if !failed.is_empty() {
            let _ = writeln!(s, "## Failed\n");
            for c in &failed {
                let _ = writeln!(
                    s,
                    "- {} / {}: {:e} against {} {:e} {}",
                    c.section, c.name, c.max_diff, c.kind, c.bound, c.note
                );
            }
            let _ = writeln!(s);
        }
    }

    /// The timings' table.
    fn markdown_speed(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "## Speed (medians; ratio = median of per-round ratios)\n"
        );
        let _ = writeln!(s, "| case | candle-pe | reference | ratio |");
        let _ = writeln!(s, "|---|---:|---|---:|");
        for t in &self.timings {
            let reference = match t.reference_ms {
                Some(ms) => format!("{}: {}", t.reference, fmt_ms(ms)),
                None => t.reference.clone(),
            };
            let ratio = t.ratio.map_or(String::new(), |r| format!("{r:.2}"));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                t.case,
                fmt_ms(t.ours_ms),
                reference,
                ratio
            );
        }
    }

    /// The checks' table.
    fn markdown_checks(&self, s: &mut String) {
        let _ = writeln!(s, "\n## Checks\n");
        let _ = writeln!(s, "| section | check | max diff | bound | | |");
        let _ = writeln!(s, "|---|---|---:|---:|---|---|");
        for c in &self.checks {
            let bound = match c.kind {
                "bits" => "bits".to_string(),
                _ => format!("{:.1e}", c.bound),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {:.1e} | {} | {} | {} |",
                c.section,
                c.name,
                c.max_diff,
                bound,
                if c.passed { "ok" } else { "FAIL" },
                c.note
            );
        }
    }

    fn json(&self) -> Value {
        let num = |v: f64| if v.is_finite() { json!(v) } else { Value::Null };
        let mut json = json!({
            "device": self.device,
            "machine": self.machine,
            "build": build(),
            "total_s": self.total_s,
            "failures": self.failures(),
            "sections": self.sections.iter().map(|(n, t)| json!({"name": n, "seconds": t})).collect::<Vec<_>>(),
            "checks": self.checks.iter().map(|c| json!({
                "section": c.section, "name": c.name, "kind": c.kind,
                "max_diff": num(c.max_diff), "bound": c.bound, "passed": c.passed, "note": c.note,
            })).collect::<Vec<_>>(),
            "timings": self.timings.iter().map(|t| json!({
                "case": t.case, "ours_ms": t.ours_ms, "reference": t.reference,
                "reference_ms": t.reference_ms, "ratio": t.ratio,
            })).collect::<Vec<_>>(),
            "notes": self.notes,
        });
        if let Some(sweep) = &self.sweep {
            json["sweep"] = sweep.clone();
        }
        json
    }
}

fn fmt_ms(ms: f64) -> String {
    match ms {
        ms if ms < 1.0 => format!("{:.1} us", ms * 1e3),
        ms => format!("{ms:.2} ms"),
    }
}

/// How this binary was built: debug or release and the opt-level (build.rs), and whether debug
/// assertions are on.
fn build() -> String {
    let assertions = if cfg!(debug_assertions) { "on" } else { "off" };
    format!(
        "{}, debug assertions {assertions}",
        env!("PE_GPU_CHECK_BUILD")
    )
}

/// The CPU, the GPU as nvidia-smi names it (where there is one), and the load average.
fn machine() -> String {
    let (cpu, threads) = (pe_testkit::cpu_model(), pe_testkit::threads());
    let gpu = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,driver_version,memory.total",
            "--format=csv,noheader",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let load = pe_testkit::load();
    match gpu {
        Some(gpu) => format!("{gpu}; {cpu}, {threads} threads; load {load}"),
        None => format!("{cpu}, {threads} threads; load {load}"),
    }
}
