//! The one benchmark harness of the workspace: cases that are compared run in interleaved
//! rounds (A B C A B C ...), so that a change in the machine's load hits all of them alike, and
//! are reported as medians; a ratio is the median of the per-round ratios (each round's runs
//! are back to back, so a drift between rounds cancels out). `bench_report`, `gpu_check`'s
//! speed section and pe-models' real-file races all measure through it.
//!
//! A [`Case`] is timed: it runs once per round and its sample is the wall time in
//! milliseconds, after an optional synchronisation of the device ([`Race::sync`]). A
//! [`Sampled`] case measures itself (a decode's tokens per second) and returns its sample.
//!
//! ```
//! use pe_testkit::race::{median, Case, Race};
//!
//! let rounds = Race::new(5).run(vec![
//!     Case::new("sum", || Ok((0..1000u64).sum::<u64>())),
//!     Case::new("squares", || Ok((0..1000u64).map(|x| x * x).collect::<Vec<_>>())),
//! ])?;
//! assert_eq!(rounds.samples("sum").len(), 5);
//! let versus = rounds.versus("sum", "squares");
//! assert!(versus.ours > 0.0 && versus.reference > 0.0 && versus.ratio > 0.0);
//! assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::any::Any;
use std::time::Instant;

use anyhow::Result;

/// The median of `values`: the middle one once sorted, the upper middle one of an even count.
/// Panics on an empty slice.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A run that returns what it built, boxed, so that it is dropped after the clock stops.
type Run<'a> = Box<dyn FnMut() -> Result<Box<dyn Any>> + 'a>;

/// One timed case: a name and a run whose wall time is its sample (milliseconds).
pub struct Case<'a> {
    name: String,
    run: Run<'a>,
}

impl<'a> Case<'a> {
    /// The case `name`, timed running `f`; what `f` returns is dropped after the clock stops.
    pub fn new<T: 'static>(name: impl Into<String>, mut f: impl FnMut() -> Result<T> + 'a) -> Self {
        Self {
            name: name.into(),
            run: Box::new(move || Ok(Box::new(f()?) as Box<dyn Any>)),
        }
    }
}

/// One case that measures itself: each run returns its sample (a rate, a time).
pub struct Sampled<'a> {
    name: String,
    run: Box<dyn FnMut() -> Result<f64> + 'a>,
}

impl<'a> Sampled<'a> {
    /// The case `name`, whose sample is what `f` returns.
    pub fn new(name: impl Into<String>, f: impl FnMut() -> Result<f64> + 'a) -> Self {
        Self {
            name: name.into(),
            run: Box::new(f),
        }
    }
}

/// How the rounds run: how many, whether each case first runs once unmeasured, whether the
/// order reverses every other round, and what ends a timed run (a device synchronisation).
pub struct Race<'s> {
    rounds: usize,
    warm_up: bool,
    alternate: bool,
    sync: Option<&'s dyn Fn() -> Result<()>>,
}

impl<'s> Race<'s> {
    /// `rounds` rounds in the same order, after one warm-up run of each case.
    pub fn new(rounds: usize) -> Self {
        Self {
            rounds,
            warm_up: true,
            alternate: false,
            sync: None,
        }
    }

    /// Whether each case first runs once, unmeasured (the default).
    pub fn warm_up(self, warm_up: bool) -> Self {
        Self { warm_up, ..self }
    }

    /// Reverses the order of the cases every other round (A B, B A, ...), so that an effect
    /// of going first or second cancels out.
    pub fn alternate(self) -> Self {
        Self {
            alternate: true,
            ..self
        }
    }

    /// Calls `sync` after every run of a timed case, inside its time: a device's queued work
    /// counts where it is done.
    pub fn sync(self, sync: &'s dyn Fn() -> Result<()>) -> Self {
        Self {
            sync: Some(sync),
            ..self
        }
    }

    /// Times `cases` in interleaved rounds, in milliseconds.
    pub fn run(&self, cases: Vec<Case<'_>>) -> Result<Rounds> {
        let sync = self.sync;
        let sampled = cases
            .into_iter()
            .map(|mut case| {
                Sampled::new(case.name, move || {
                    let start = Instant::now();
                    let out = (case.run)()?;
                    if let Some(sync) = sync {
                        sync()?;
                    }
                    let ms = start.elapsed().as_secs_f64() * 1e3;
                    drop(out);
                    Ok(ms)
                })
            })
            .collect();
        self.sample(sampled)
    }

    /// Runs `cases` in interleaved rounds and keeps what each run returns.
    pub fn sample(&self, mut cases: Vec<Sampled<'_>>) -> Result<Rounds> {
        if self.warm_up {
            for case in cases.iter_mut() {
                (case.run)()?;
            }
        }
        let mut samples = vec![Vec::with_capacity(self.rounds); cases.len()];
        for round in 0..self.rounds {
            let mut order: Vec<usize> = (0..cases.len()).collect();
            if self.alternate && round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                samples[i].push((cases[i].run)()?);
            }
        }
        Ok(Rounds {
            names: cases.into_iter().map(|c| c.name).collect(),
            samples,
        })
    }
}

/// The samples of interleaved cases, `samples[case][round]`, looked up by the cases' names.
#[derive(Clone, Debug)]
pub struct Rounds {
    names: Vec<String>,
    samples: Vec<Vec<f64>>,
}

/// A ratio row's numbers: the medians of a case and of its reference, and the median of the
/// per-round ratios case / reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Versus {
    /// The case's median.
    pub ours: f64,
    /// The reference's median.
    pub reference: f64,
    /// The median over rounds of case / reference.
    pub ratio: f64,
}

impl Rounds {
    /// The samples of the case `name`, one a round. Panics on a name no case has.
    pub fn samples(&self, name: &str) -> &[f64] {
        match self.names.iter().position(|n| n == name) {
            Some(i) => &self.samples[i],
            None => panic!("no case {name:?} in this race ({:?})", self.names),
        }
    }

    /// The median of the case `name`.
    pub fn median(&self, name: &str) -> f64 {
        median(self.samples(name))
    }

    /// Each round's `case / reference`.
    pub fn ratios(&self, case: &str, reference: &str) -> Vec<f64> {
        let (a, b) = (self.samples(case), self.samples(reference));
        a.iter().zip(b).map(|(x, y)| x / y).collect()
    }

    /// The median over rounds of `case / reference`.
    pub fn ratio(&self, case: &str, reference: &str) -> f64 {
        median(&self.ratios(case, reference))
    }

    /// The ratio row of `case` against `reference`.
    pub fn versus(&self, case: &str, reference: &str) -> Versus {
        Versus {
            ours: self.median(case),
            reference: self.median(reference),
            ratio: self.ratio(case, reference),
        }
    }

    /// Prints each case's median, min and max (in `unit`) to stderr.
    pub fn print_summary(&self, unit: &str) {
        for (name, t) in self.names.iter().zip(&self.samples) {
            let (min, max) = t
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            eprintln!(
                "  {name}: median {:.4} {unit} (min {min:.4}, max {max:.4})",
                median(t)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn the_median_is_the_upper_middle() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(&[5.0]), 5.0);
    }

    #[test]
    fn rounds_interleave_and_alternate() {
        let order = RefCell::new(Vec::new());
        let case = |name: &'static str, value: f64| {
            let order = &order;
            Sampled::new(name, move || {
                order.borrow_mut().push(name);
                Ok(value)
            })
        };
        let rounds = Race::new(3)
            .warm_up(false)
            .alternate()
            .sample(vec![case("a", 2.0), case("b", 4.0)])
            .unwrap();
        assert_eq!(*order.borrow(), ["a", "b", "b", "a", "a", "b"]);
        assert_eq!(rounds.samples("a"), [2.0; 3]);
        assert_eq!(
            rounds.versus("a", "b"),
            Versus {
                ours: 2.0,
                reference: 4.0,
                ratio: 0.5
            }
        );
    }

    #[test]
    fn warm_up_runs_are_not_kept() {
        let runs = RefCell::new(0);
        let rounds = Race::new(2)
            .run(vec![Case::new("count", || {
                *runs.borrow_mut() += 1;
                Ok(())
            })])
            .unwrap();
        assert_eq!((*runs.borrow(), rounds.samples("count").len()), (3, 2));
    }
}
