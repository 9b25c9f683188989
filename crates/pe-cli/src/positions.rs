//! The positions a table has one row for: a range, explicit integer ids, or fractional
//! timesteps; and the table rows for any slice of them.

use std::str::FromStr;

use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use candle_pe_core::SinusoidalEncoding;

/// The positions of the rows of a table, in row order.
#[derive(Clone, Debug, PartialEq)]
pub enum Positions {
    /// `offset .. offset + len`.
    Range { offset: usize, len: usize },
    /// Integer position ids.
    Ids(Vec<i64>),
    /// Fractional timesteps.
    Timesteps(Vec<f64>),
}

impl Positions {
    /// The positions named by exactly one of `--len` (with `--offset`), `--positions` and
    /// `--timesteps`; clap has already checked that exactly one is given.
    pub fn from_args(
        len: Option<usize>,
        offset: Option<usize>,
        ids: Option<Vec<i64>>,
        timesteps: Option<Vec<f64>>,
    ) -> Result<Self> {
        match (len, ids, timesteps) {
            (Some(len), None, None) => Ok(Positions::Range {
                offset: offset.unwrap_or(0),
                len,
            }),
            (None, Some(ids), None) => Ok(Positions::Ids(ids)),
            // pe-core checks them where it builds the table (`--timesteps` is named there).
            (None, None, Some(timesteps)) => Ok(Positions::Timesteps(timesteps)),
            _ => bail!("give exactly one of --len, --positions and --timesteps"),
        }
    }

    /// The flag that gives these positions, with its value when it is a number: `--len 4096`,
    /// `--positions` or `--timesteps`.
    pub fn flag(&self) -> String {
        match self {
            Positions::Range { len, .. } => format!("--len {len}"),
            Positions::Ids(_) => "--positions".to_string(),
            Positions::Timesteps(_) => "--timesteps".to_string(),
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        match self {
            Positions::Range { len, .. } => *len,
            Positions::Ids(ids) => ids.len(),
            Positions::Timesteps(ts) => ts.len(),
        }
    }

    /// Rows `start .. end` (clamped to the rows there are).
    pub fn slice(&self, start: usize, end: usize) -> Positions {
        let end = end.min(self.len());
        let start = start.min(end);
        match self {
            Positions::Range { offset, .. } => Positions::Range {
                offset: offset + start,
                len: end - start,
            },
            Positions::Ids(ids) => Positions::Ids(ids[start..end].to_vec()),
            Positions::Timesteps(ts) => Positions::Timesteps(ts[start..end].to_vec()),
        }
    }

    /// The position of row `i`, as a number.
    pub fn value(&self, i: usize) -> f64 {
        match self {
            Positions::Range { offset, .. } => (offset + i) as f64,
            Positions::Ids(ids) => ids[i] as f64,
            Positions::Timesteps(ts) => ts[i],
        }
    }

    /// The position of row `i` as written in a CSV file.
    pub fn label(&self, i: usize) -> String {
        match self {
            Positions::Range { offset, .. } => (offset + i).to_string(),
            Positions::Ids(ids) => ids[i].to_string(),
            Positions::Timesteps(ts) => ts[i].to_string(),
        }
    }

    /// The rows for these positions, shape `(len, d)`, built on `device`.
    pub fn encode(
        &self,
        encoding: &SinusoidalEncoding,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let table = match self {
            Positions::Range { offset, len } => encoding.range(*offset, *len, dtype, device)?,
            Positions::Ids(ids) => {
                let ids = Tensor::from_slice(ids, ids.len(), device)?;
                encoding.at(&ids, dtype)?
            }
            Positions::Timesteps(ts) => {
                let ts = Tensor::from_slice(ts, ts.len(), device)?;
                encoding.timesteps(&ts, dtype)?
            }
        };
        Ok(table)
    }

    /// Checks the positions, the dtype and the device without building the whole table (one
    /// row, or the rows of the smallest and largest id).
    pub fn validate(
        &self,
        encoding: &SinusoidalEncoding,
        dtype: DType,
        device: &Device,
    ) -> Result<()> {
        let probe = match self {
            Positions::Range { offset, len } => {
                candle_pe_core::Positions::check_range(*offset, *len)?;
                Positions::Range { offset: 0, len: 1 }
            }
            Positions::Ids(ids) => match (ids.iter().min(), ids.iter().max()) {
                (Some(&min), Some(&max)) => Positions::Ids(vec![min, max]),
                _ => Positions::Range { offset: 0, len: 1 },
            },
            Positions::Timesteps(ts) => Positions::Timesteps(ts.iter().take(1).copied().collect()),
        };
        probe.encode(encoding, dtype, device)?;
        Ok(())
    }

    /// At most `max` rows spread evenly over these positions (all of them when there are
    /// fewer), as explicit ids or timesteps.
    pub fn sample(&self, max: usize) -> Positions {
        let n = self.len();
        if n <= max {
            return self.clone();
        }
        let pick = |k: usize| ((k as f64 + 0.5) * n as f64 / max as f64) as usize;
        match self {
            Positions::Timesteps(ts) => {
                Positions::Timesteps((0..max).map(|k| ts[pick(k)]).collect())
            }
            _ => Positions::Ids((0..max).map(|k| self.value(pick(k)) as i64).collect()),
        }
    }
}

/// A comma-separated list given as one command-line value, e.g. `--timesteps -1.5,2`: a leading
/// minus sign belongs to the value, where clap would take `-1.5,2` for a flag.
#[derive(Clone, Debug, PartialEq)]
pub struct List<T>(pub Vec<T>);

/// A type a [`List`] holds, and what its items are called in error messages.
pub trait ListItem: FromStr {
    /// E.g. `an integer`.
    const WHAT: &'static str;
}

impl ListItem for i64 {
    const WHAT: &'static str = "an integer";
}

impl ListItem for f64 {
    const WHAT: &'static str = "a number";
}

impl<T: ListItem> FromStr for List<T> {
    type Err = String;

    /// The items between commas; an error names the first that does not parse.
    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .enumerate()
            .map(|(i, item)| {
                item.trim()
                    .parse()
                    .map_err(|_| format!("'{item}' (number {}) is not {}", i + 1, T::WHAT))
            })
            .collect::<Result<_, _>>()
            .map(List)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_and_samples() {
        let range = Positions::Range {
            offset: 10,
            len: 100,
        };
        assert_eq!(range.slice(5, 8), Positions::Range { offset: 15, len: 3 });
        assert_eq!(range.slice(98, 200).len(), 2);
        let sampled = range.sample(4);
        assert_eq!(sampled, Positions::Ids(vec![22, 47, 72, 97]));
        assert_eq!(range.sample(1000), range);
        let ts = Positions::Timesteps(vec![0.5, 1.5, 2.5]);
        assert_eq!(ts.label(1), "1.5");
        assert_eq!(ts.sample(1), Positions::Timesteps(vec![1.5]));
    }

    #[test]
    fn lists_parse_negative_items_and_name_a_bad_one() {
        assert_eq!("-1.5,2".parse(), Ok(List(vec![-1.5, 2.0])));
        assert_eq!("-1, 2".parse(), Ok(List(vec![-1i64, 2])));
        assert_eq!(
            "1,x".parse::<List<i64>>(),
            Err("'x' (number 2) is not an integer".to_string())
        );
        assert_eq!(
            "1,,2".parse::<List<f64>>(),
            Err("'' (number 2) is not a number".to_string())
        );
    }
}
