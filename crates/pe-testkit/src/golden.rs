//! Golden files of bit hashes: [`BitCases`] collects one [`bits_hash`](crate::bits_hash) per
//! named case and compares them with a committed text file, `name  hash` a line (`#` starts a
//! comment), failing with every case that changed (old and new hash), every case the file lacks
//! and every case it has that was not computed. With `PE_BLESS=1` in the environment it writes
//! the file instead: a change that moves bits on purpose commits the new file with it, so that a
//! refactor that should move none proves it by leaving the file alone.
//!
//! A case whose bits depend on the machine (a matmul whose kernel is picked by the CPU's vector
//! extensions) is named with the machine's class, `name@class` ([`machine_class`]). It is
//! compared only with the lines of the same class, and where the file has none of this class
//! (a CPU of another family) those cases are skipped, with a notice: they cannot be judged
//! there, and blessing on such a machine adds its class beside the others.
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use pe_testkit::BitCases;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("bits.txt");
//! let mut cases = BitCases::new();
//! cases.add("ones", &[&Tensor::ones(3, candle_core::DType::F32, &Device::Cpu)?])?;
//! std::fs::write(&path, "ones  0000000000000000\n")?;
//! let err = cases.compare(&path)?.unwrap_err();
//! assert!(err.contains("changed  ones  old 0000000000000000 new "), "{err}");
//! cases.write(&path, "# a test file")?;
//! assert!(cases.compare(&path)?.is_ok());
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::Tensor;

use crate::bits_hash;

/// The environment variable that makes [`BitCases::check`] rewrite the file.
pub const BLESS_VAR: &str = "PE_BLESS";

/// The class of this machine for cases whose bits depend on it: the vector extension candle's
/// f32 matmul (gemm) picks at run time, `avx512f`, `avx2` or `base` on x86-64, else the
/// architecture.
pub fn machine_class() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512f";
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return "avx2";
        }
        "base"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH
    }
}

/// The class part of a case name: `group@class/...` or `name@class`.
fn class_of(name: &str) -> Option<&str> {
    name.split_once('@')
        .map(|(_, rest)| rest.split('/').next().unwrap_or(rest))
}

/// The path of the golden file `name` under pe-testkit's `golden/` (it may not exist yet).
pub fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(name)
}

/// Named hashes, in the order they were added.
#[derive(Clone, Debug, Default)]
pub struct BitCases {
    cases: Vec<(String, u64)>,
    names: HashSet<String>,
}

impl BitCases {
    /// No cases yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds case `name` (no whitespace, not added before): the hash of `tensors` in order.
    pub fn add(&mut self, name: impl Into<String>, tensors: &[&Tensor]) -> Result<()> {
        let name = name.into();
        let hash = bits_hash(tensors).with_context(|| format!("case {name}"))?;
        self.add_hash(name, hash)
    }

    /// Adds case `name` with a hash computed elsewhere.
    pub fn add_hash(&mut self, name: String, hash: u64) -> Result<()> {
        if name.is_empty() || name.contains(char::is_whitespace) {
            bail!("bit case name {name:?} must be nonempty and without whitespace")
        }
        if !self.names.insert(name.clone()) {
            bail!("bit case {name} added twice")
        }
        self.cases.push((name, hash));
        Ok(())
    }

    /// How many cases there are.
    pub fn len(&self) -> usize {
        self.cases.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.cases.is_empty()
    }

    /// With `PE_BLESS=1`, writes the file ([`write`](Self::write)); otherwise compares with it
    /// and fails listing every difference, and how to bless.
    pub fn check(&self, path: &Path, header: &str) -> Result<()> {
        if std::env::var(BLESS_VAR).as_deref() == Ok("1") {
            self.bless(path, header)?;
            eprintln!(
                "{BLESS_VAR}=1: wrote {} cases to {}",
                self.len(),
                path.display()
            );
            return Ok(());
        }
        if let Err(report) = self.compare(path)? {
            bail!(
                "{report}\nIf the change is deliberate, rerun with {BLESS_VAR}=1 and commit {} with it.",
                path.display()
            )
        }
        Ok(())
    }

    /// Compares with the file at `path`: `Ok(Err(report))` lists each case that changed (old
    /// and new hash), is missing from the file or is in the file only. Fails if the file cannot
    /// be read or a line is malformed.
    pub fn compare(&self, path: &Path) -> Result<std::result::Result<(), String>> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!("reading {} (create it with {BLESS_VAR}=1)", path.display())
        })?;
        let old = parse(&text).with_context(|| format!("in {}", path.display()))?;
        let here = machine_class();
        let recorded_here = old.keys().any(|name| class_of(name) == Some(here));
        let skipped = self
            .cases
            .iter()
            .filter(|(name, _)| class_of(name).is_some() && !recorded_here)
            .count();
        if skipped > 0 {
            eprintln!(
                "bit check: {skipped} cases depend on the machine and {} records none of class {here}: not compared here",
                path.display()
            );
        }
        let mut lines = vec![];
        for (name, new) in &self.cases {
            if class_of(name).is_some() && !recorded_here {
                continue;
            }
            match old.get(name.as_str()) {
                Some(&(_, old)) if old == *new => {}
                Some(&(_, old)) => {
                    lines.push(format!("changed  {name}  old {old:016x} new {new:016x}"))
                }
                None => lines.push(format!("missing  {name}  new {new:016x} (not in the file)")),
            }
        }
        let mut extra: Vec<_> = old
            .iter()
            .filter(|(name, _)| !self.names.contains(**name))
            .filter(|(name, _)| class_of(name).is_none_or(|class| class == here))
            .map(|(name, &(line, old))| (line, *name, old))
            .collect();
        extra.sort();
        for (line, name, old) in extra {
            lines.push(format!(
                "extra    {name}  old {old:016x} (line {line} of the file, not computed)"
            ));
        }
        if lines.is_empty() {
            return Ok(Ok(()));
        }
        Ok(Err(format!(
            "bit check: {} of {} cases differ from {}:\n  {}",
            lines.len(),
            self.len(),
            path.display(),
            lines.join("\n  ")
        )))
    }

    /// Writes every case to `path` as [`write`](Self::write) does, keeping the file's lines of
    /// other machine classes (those cases were not computed here).
    pub fn bless(&self, path: &Path, header: &str) -> Result<()> {
        let here = machine_class();
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let old = parse(&text).with_context(|| format!("in {}", path.display()))?;
        let mut all = self.clone();
        for (name, &(_, hash)) in &old {
            if class_of(name).is_some_and(|class| class != here) && !all.names.contains(*name) {
                all.add_hash(name.to_string(), hash)?;
            }
        }
        all.write(path, header)
    }

    /// Writes every case to `path`, after `header` (lines that start with `#`).
    pub fn write(&self, path: &Path, header: &str) -> Result<()> {
        let mut text = String::new();
        for line in header.lines() {
            if !line.starts_with('#') {
                bail!("golden file header line {line:?} must start with '#'")
            }
            writeln!(text, "{line}")?;
        }
        let width = self.cases.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        for (name, hash) in &self.cases {
            writeln!(text, "{name:<width$}  {hash:016x}")?;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }
}

/// The cases of a golden file: name to (line number, hash).
fn parse(text: &str) -> Result<BTreeMap<&str, (usize, u64)>> {
    let mut cases = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, hash] = fields[..] else {
            bail!("line {line_no}: expected `name  hash`, got {line:?}")
        };
        let hash = u64::from_str_radix(hash, 16)
            .ok()
            .filter(|_| hash.len() == 16)
            .with_context(|| format!("line {line_no}: {hash:?} is not 16 hex digits"))?;
        if cases.insert(name, (line_no, hash)).is_some() {
            bail!("line {line_no}: case {name} appears twice")
        }
    }
    Ok(cases)
}
