//! Time against sequence length, the sweep that `bench_report` (the CPU) and `gpu_check` (a
//! GPU) record and `pe plot bench` draws: the rows of a fairseq f32 table ending at one
//! position, generated, viewed in a cache that holds them, and copied from it, at a few
//! lengths, interleaved.

use anyhow::Result;
use candle_core::{DType, Device};
use candle_pe_core::{PeCache, PeSpec, SinusoidalEncoding, TableBackend};
use serde_json::{json, Value};

use crate::race::{Case, Race};

/// The sweep's cases, in the order they are drawn.
pub const SWEPT: [&str; 3] = ["generated", "cached view", "cached copy"];

/// The full sweep's last position and its lengths, each with the rounds of its race: the one
/// `bench_report` (the CPU) and `gpu_check` (a GPU) both run, so that `pe plot bench` draws
/// the two together.
pub const SWEEP_AT: usize = 1_000_000;
pub const SWEEP_LENGTHS: [(usize, usize); 5] =
    [(1, 501), (16, 201), (256, 101), (4096, 21), (65_536, 7)];

/// Where a sweep runs and what it times.
pub struct Sweep<'a> {
    /// What `pe plot bench`'s legend calls it: `CPU (AMD EPYC)`, `GPU (cuda)`.
    pub label: String,
    pub device: &'a Device,
    pub backend: TableBackend,
    /// The table's width.
    pub width: usize,
    /// The last row's position.
    pub at: usize,
    /// Each length, with the rounds of its race.
    pub lengths: &'a [(usize, usize)],
    /// Called after every timed run (a device synchronisation), inside its time.
    pub sync: Option<&'a dyn Fn() -> Result<()>>,
}

impl Sweep<'_> {
    /// Runs the sweep (each race's summary on stderr) and returns it as `pe plot bench` reads
    /// it: `{label, rows, lengths, series: [{name, ms}]}`, medians in milliseconds.
    pub fn run(&self) -> Result<Value> {
        let dev = self.device;
        let pe = SinusoidalEncoding::new(PeSpec::fairseq(self.width))?.with_backend(self.backend);
        let cache = PeCache::new(pe.clone());
        cache.range(0, self.at + 1, DType::F32, dev)?;
        let mut ms = vec![Vec::new(); SWEPT.len()];
        for &(n, rounds) in self.lengths {
            eprintln!("{n} rows ending at {}:", self.at);
            let start = self.at + 1 - n;
            let race = match self.sync {
                Some(sync) => Race::new(rounds).sync(sync),
                None => Race::new(rounds),
            };
            let measured = race.run(vec![
                Case::new(SWEPT[0], || Ok(pe.range(start, n, DType::F32, dev)?)),
                Case::new(SWEPT[1], || Ok(cache.range(start, n, DType::F32, dev)?)),
                Case::new(SWEPT[2], || {
                    Ok(cache.range_owned(start, n, DType::F32, dev)?)
                }),
            ])?;
            measured.print_summary("ms");
            for (times, name) in ms.iter_mut().zip(SWEPT) {
                times.push(measured.median(name));
            }
        }
        let series: Vec<Value> = SWEPT
            .iter()
            .zip(&ms)
            .map(|(name, ms)| json!({ "name": name, "ms": ms }))
            .collect();
        let rows = format!(
            "fairseq d {} f32, rows ending at position {}",
            grouped(self.width),
            grouped(self.at)
        );
        Ok(json!({
            "label": self.label,
            "rows": rows,
            "lengths": self.lengths.iter().map(|&(n, _)| n).collect::<Vec<_>>(),
            "series": series,
        }))
    }
}

/// `n` with its thousands separated by commas: `1,000,000`.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::grouped;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1024), "1,024");
        assert_eq!(grouped(1_000_000), "1,000,000");
    }
}
