//! `.npy` files read as positions: the header is checked against the file's length before
//! anything is allocated, so a file that claims a huge shape is an error naming the flag, not
//! an aborted allocation.
//!
//! ```text
//! pe rope --head-dim 64 --positions ids.npy --out rope.safetensors
//! ```

use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Tensor};

/// The int64 tensor of the `.npy` file `path` given with `flag` (positions), once its header's
/// shape and dtype account for exactly the bytes the file holds.
pub fn read_i64(path: &Path, flag: &str) -> Result<Tensor> {
    let t = read_checked(path, flag)?;
    if t.dtype() != DType::I64 {
        bail!(
            "{flag} {}: the values must be int64, got {:?}",
            path.display(),
            t.dtype()
        );
    }
    Ok(t)
}

/// The int64 or float64 tensor of the `.npy` file `path` given with `flag` (integer ids or real
/// coordinates), checked as [`read_i64`] checks it.
pub fn read_positions(path: &Path, flag: &str) -> Result<Tensor> {
    let t = read_checked(path, flag)?;
    if !matches!(t.dtype(), DType::I64 | DType::F64) {
        bail!(
            "{flag} {}: the positions must be int64 ids or float64 coordinates, got {:?}",
            path.display(),
            t.dtype()
        );
    }
    Ok(t)
}

/// The tensor of `path`, once its header accounts for exactly the bytes the file holds.
fn read_checked(path: &Path, flag: &str) -> Result<Tensor> {
    check_size(path).with_context(|| format!("{flag} {}", path.display()))?;
    Tensor::read_npy(path)
        .with_context(|| format!("{flag} {}: cannot read it as .npy", path.display()))
}

/// Fails unless the header of `path` is a readable `.npy` header whose shape times the item size
/// of its dtype is the length of the data that follows it.
fn check_size(path: &Path) -> Result<()> {
    use std::io::Read;
    let file = std::fs::File::open(path).context("cannot open it")?;
    let len = file.metadata().context("cannot read its size")?.len();
    // The magic, the version, the header's length, and at most 64 KiB of header.
    let mut head = Vec::new();
    file.take(10 + 65_536).read_to_end(&mut head)?;
    if head.len() < 10 || &head[..6] != b"\x93NUMPY" {
        bail!("not a .npy file (no \\x93NUMPY magic)")
    }
    let (header_len, start) = match head[6] {
        1 => (u16::from_le_bytes([head[8], head[9]]) as usize, 10),
        2 | 3 if head.len() >= 12 => (
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize,
            12,
        ),
        v => bail!(".npy version {v} is not supported"),
    };
    let Some(header) = head.get(start..start + header_len) else {
        bail!("the .npy header claims {header_len} bytes, past the end of the file")
    };
    let header = String::from_utf8_lossy(header);
    let item = item_size(&header)?;
    let shape = shape(&header)?;
    let data = len - (start + header_len) as u64;
    let claimed = shape
        .iter()
        .try_fold(item, |n, &d| n.checked_mul(d))
        .filter(|&n| n == data);
    if claimed.is_none() {
        bail!(
            "the .npy header claims shape {shape:?} of {item}-byte values, but the file holds {data} bytes of data"
        )
    }
    Ok(())
}

/// The byte size of the header's `descr` (`'<i8'`: 8).
fn item_size(header: &str) -> Result<u64> {
    let descr = field(header, "descr")?;
    let digits: String = descr.chars().filter(char::is_ascii_digit).collect();
    match digits.parse::<u64>() {
        Ok(size) if size > 0 => Ok(size),
        _ => bail!("the .npy header's descr {descr} has no item size"),
    }
}

/// The header's `shape` tuple.
fn shape(header: &str) -> Result<Vec<u64>> {
    let tuple = field(header, "shape")?;
    let inner = tuple.trim_start_matches('(').trim_end_matches(')');
    inner
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.parse::<u64>()
                .with_context(|| format!("the .npy header's shape {tuple} is not a shape"))
        })
        .collect()
}

/// The text of the value of `key` in the header's dictionary, up to the next key.
fn field<'a>(header: &'a str, key: &str) -> Result<&'a str> {
    let quoted = format!("'{key}':");
    let Some(at) = header.find(&quoted) else {
        bail!("the .npy header has no {key}")
    };
    let rest = header[at + quoted.len()..].trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')').map(|i| i + 1)
    } else {
        rest.find(',')
    };
    Ok(rest[..end.unwrap_or(rest.len())].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.npy` file with `header` (a dictionary) and `data` bytes.
    fn npy(header: &str, data: &[u8]) -> tempfile::NamedTempFile {
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        file
    }

    #[test]
    fn a_header_must_account_for_the_data() {
        let ok = npy(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }\n",
            &[0; 24],
        );
        let t = read_i64(ok.path(), "--positions").unwrap();
        assert_eq!(t.dims(), &[3]);
        let huge = npy(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (1099511627776, 8), }\n",
            &[0; 24],
        );
        let err = format!("{:#}", read_i64(huge.path(), "--positions").unwrap_err());
        assert!(
            err.starts_with("--positions ")
                && err.contains("claims shape [1099511627776, 8] of 8-byte values")
                && err.contains("holds 24 bytes"),
            "{err}"
        );
        let overflow = npy(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n",
            &[],
        );
        let err = format!(
            "{:#}",
            read_i64(overflow.path(), "--positions").unwrap_err()
        );
        assert!(
            err.contains("claims shape [4294967296, 4294967296]"),
            "{err}"
        );
        let short = npy("{'descr': '<i8', 'shape': (3,), }\n", &[0; 23]);
        let err = format!("{:#}", read_i64(short.path(), "--positions").unwrap_err());
        assert!(err.contains("holds 23 bytes"), "{err}");
        let floats = npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n",
            &[0; 24],
        );
        let err = format!("{:#}", read_i64(floats.path(), "--positions").unwrap_err());
        assert!(err.ends_with("the values must be int64, got F64"), "{err}");
        let garbage = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(garbage.path(), b"hello").unwrap();
        let err = format!("{:#}", read_i64(garbage.path(), "--positions").unwrap_err());
        assert!(err.contains("not a .npy file"), "{err}");
    }
}
