//! Table files: `.npy` (numpy), `.safetensors` (one tensor named `pe`) and `.csv` (one row per
//! position), written row chunk by row chunk so that a table never has to fit in memory twice;
//! and `.safetensors` files of several named tensors ([`write_safetensors`]); and the check that
//! an output fits on its filesystem ([`check_free_space`]).

use std::fmt::{Display, LowerExp, Write as _};
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use half::{bf16, f16};

use crate::atomic::{directory_of, AtomicFile};
use crate::positions::Positions;

/// The file formats a table can be written in, chosen by the output's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// numpy's `.npy`, C order, little endian.
    Npy,
    /// `.safetensors` with one tensor, `pe`, and the spec as metadata.
    Safetensors,
    /// Text: a header line, then one line per position (the position, then the values).
    Csv,
}

impl Format {
    /// The format named by `path`'s extension.
    pub fn from_path(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("npy") => Ok(Format::Npy),
            Some("safetensors") => Ok(Format::Safetensors),
            Some("csv") => Ok(Format::Csv),
            _ => bail!(
                "--out {}: unknown table format; the extension must be .npy, .safetensors or .csv",
                path.display()
            ),
        }
    }

    /// Fails for a dtype the format cannot store (bf16 in `.npy`).
    pub fn check_dtype(self, dtype: DType, path: &Path) -> Result<()> {
        if self == Format::Npy && dtype == DType::BF16 {
            bail!(
                "--out {}: numpy's .npy format has no bfloat16; write .safetensors for bf16, \
                 or use another --dtype",
                path.display()
            );
        }
        Ok(())
    }
}

/// Bytes of the file `format` makes of a `(rows, width)` table of `dtype` with `metadata`:
/// exact for `.npy` and `.safetensors` (header and data); for `.csv` a lower bound, at least
/// two bytes per value (a comma and a digit).
pub fn table_bytes(
    format: Format,
    dtype: DType,
    (rows, width): (usize, usize),
    metadata: &[(&str, String)],
) -> Result<u128> {
    let data = rows as u128 * width as u128 * dtype.size_in_bytes() as u128;
    Ok(match format {
        Format::Npy => npy_header(dtype, &[rows, width]).len() as u128 + data,
        Format::Safetensors => safetensors_bytes(&["pe"], dtype, (rows, width), metadata)?,
        // `position`, `,c` per column and a newline; each row, the position, `,v` per value and
        // a newline.
        Format::Csv => (9 + 2 * width as u128) + rows as u128 * (2 + 2 * width as u128),
    })
}

/// Bytes of the `.safetensors` file of the tensors `names`, each a `(rows, width)` table of
/// `dtype`, with `metadata`: header and data.
pub fn safetensors_bytes(
    names: &[&str],
    dtype: DType,
    (rows, width): (usize, usize),
    metadata: &[(&str, String)],
) -> Result<u128> {
    let shape = [rows, width];
    let tensors: Vec<(&str, DType, &[usize])> = names
        .iter()
        .map(|&name| (name, dtype, &shape[..]))
        .collect();
    let header = safetensors_header(&tensors, metadata)?;
    let data = rows as u128 * width as u128 * dtype.size_in_bytes() as u128;
    Ok(header.len() as u128 + names.len() as u128 * data)
}

/// Fails when an output of at least `bytes` bytes at `path` is larger than the space free on
/// the filesystem that holds its directory, with a message that starts with `flag_hint`: the
/// flags the size comes from, e.g. `--len 4096 (4096 rows x 512 columns of f32)`.
pub fn check_free_space(path: &Path, bytes: u128, flag_hint: &str) -> Result<()> {
    let dir = directory_of(path);
    // A directory that cannot be examined is reported when the file is created.
    let Ok(free) = fs4::available_space(dir) else {
        return Ok(());
    };
    if bytes > u128::from(free) {
        bail!(
            "{flag_hint}: {} needs at least {bytes} bytes ({}), but the filesystem of {} has \
             only {free} bytes ({}) free; ask for fewer rows",
            path.display(),
            human_bytes(bytes),
            dir.display(),
            human_bytes(free.into())
        );
    }
    Ok(())
}

/// `bytes` in decimal units with one decimal, e.g. `281.5 TB`, or `512 bytes`.
fn human_bytes(bytes: u128) -> String {
    const UNITS: [&str; 8] = ["kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"];
    if bytes < 1000 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    // 999.96 kB prints as 1.0 MB, not 1000.0 kB.
    while value >= 999.95 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A table file being written; rows arrive in order, in chunks.
pub struct TableWriter {
    file: AtomicFile,
    format: Format,
    dtype: DType,
    width: usize,
    rows: usize,
    written: usize,
    text: String,
}

impl TableWriter {
    /// Opens `path` and writes the header of a `(rows, width)` table of `dtype`;
    /// `metadata` goes into the `.safetensors` header.
    pub fn create(
        path: &Path,
        format: Format,
        dtype: DType,
        (rows, width): (usize, usize),
        metadata: &[(&str, String)],
    ) -> Result<Self> {
        format.check_dtype(dtype, path)?;
        let header = match format {
            Format::Npy => npy_header(dtype, &[rows, width]),
            Format::Safetensors => safetensors_header(&[("pe", dtype, &[rows, width])], metadata)?,
            Format::Csv => {
                let mut line = String::from("position");
                for col in 0..width {
                    write!(line, ",{col}")?;
                }
                line.push('\n');
                line.into_bytes()
            }
        };
        let mut file = AtomicFile::create(path)?;
        file.write_all(&header)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Self {
            file,
            format,
            dtype,
            width,
            rows,
            written: 0,
            text: String::new(),
        })
    }

    /// Appends the rows of `table` (shape `(n, width)`, on the CPU), at `positions`.
    pub fn write_rows(&mut self, table: &Tensor, positions: &Positions) -> Result<()> {
        let (n, width) = table.dims2()?;
        if width != self.width || self.written + n > self.rows || n != positions.len() {
            bail!(
                "internal error: got {n} rows of width {width} after {} of {} rows of width {}",
                self.written,
                self.rows,
                self.width
            );
        }
        let flat = table.to_dtype(self.dtype)?.flatten_all()?;
        let bytes = if self.format == Format::Csv {
            let text = &mut self.text;
            text.clear();
            match self.dtype {
                DType::F32 => csv_rows(text, &flat.to_vec1::<f32>()?, width, positions, |v| v),
                DType::F64 => csv_rows(text, &flat.to_vec1::<f64>()?, width, positions, |v| v),
                DType::F16 => {
                    csv_rows(text, &flat.to_vec1::<f16>()?, width, positions, f16::to_f32)
                }
                DType::BF16 => csv_rows(
                    text,
                    &flat.to_vec1::<bf16>()?,
                    width,
                    positions,
                    bf16::to_f32,
                ),
                other => bail!("dtype {other:?} cannot be written"),
            }
            None
        } else {
            Some(le_bytes_of(&flat)?)
        };
        let bytes = bytes.as_deref().unwrap_or(self.text.as_bytes());
        self.file
            .write_all(bytes)
            .with_context(|| format!("cannot write {}", self.file.path().display()))?;
        self.written += n;
        Ok(())
    }

    /// Checks that every row arrived and moves the file into place.
    pub fn finish(self) -> Result<()> {
        if self.written != self.rows {
            bail!(
                "internal error: wrote {} of {} rows of {}",
                self.written,
                self.rows,
                self.file.path().display()
            );
        }
        self.file.commit()
    }
}

/// The little-endian bytes of the 1-d CPU tensor `flat`.
fn le_bytes_of(flat: &Tensor) -> Result<Vec<u8>> {
    Ok(match flat.dtype() {
        DType::F32 => le_bytes(&flat.to_vec1::<f32>()?, f32::to_le_bytes),
        DType::F64 => le_bytes(&flat.to_vec1::<f64>()?, f64::to_le_bytes),
        DType::F16 => le_bytes(&flat.to_vec1::<f16>()?, f16::to_le_bytes),
        DType::BF16 => le_bytes(&flat.to_vec1::<bf16>()?, bf16::to_le_bytes),
        DType::I64 => le_bytes(&flat.to_vec1::<i64>()?, i64::to_le_bytes),
        other => bail!("dtype {other:?} cannot be written"),
    })
}

/// The little-endian bytes of `values`.
fn le_bytes<T: Copy, const N: usize>(values: &[T], to_le: fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&to_le(v));
    }
    out
}

/// Appends one CSV line per row: the position, then the values, each printed with the fewest
/// digits that read back to the same value.
fn csv_rows<T: Copy, F: Copy + Display + LowerExp + Into<f64>>(
    out: &mut String,
    values: &[T],
    width: usize,
    positions: &Positions,
    to_float: impl Fn(T) -> F,
) {
    for (i, row) in values.chunks_exact(width.max(1)).enumerate() {
        out.push_str(&positions.label(i));
        for &v in row {
            let v = to_float(v);
            let magnitude = v.into().abs();
            // Plain decimals, except for tiny values that would print dozens of zeros.
            if magnitude == 0.0 || magnitude >= 1e-5 {
                let _ = write!(out, ",{v}");
            } else {
                let _ = write!(out, ",{v:e}");
            }
        }
        out.push('\n');
    }
}

/// numpy format 1.0: magic, header length, a dict padded with spaces to a multiple of 64.
fn npy_header(dtype: DType, shape: &[usize]) -> Vec<u8> {
    let descr = match dtype {
        DType::F16 => "<f2",
        DType::F64 => "<f8",
        DType::I64 => "<i8",
        _ => "<f4",
    };
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    // A 1-tuple needs its comma: (n,).
    let dims = if dims.len() == 1 {
        format!("{},", dims[0])
    } else {
        dims.join(", ")
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}");
    // magic (6) + version (2) + length (2) + dict + '\n' is a multiple of 64.
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// The safetensors name of `dtype`.
fn safetensors_dtype(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::F64 => "F64",
        DType::I64 => "I64",
        _ => "F32",
    }
}

/// The safetensors header: its length, then JSON describing `tensors` (name, dtype, shape),
/// whose data follow one another in this order.
fn safetensors_header(
    tensors: &[(&str, DType, &[usize])],
    metadata: &[(&str, String)],
) -> Result<Vec<u8>> {
    let metadata: serde_json::Map<String, serde_json::Value> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
        .collect();
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), metadata.into());
    let mut offset: u128 = 0;
    for &(name, dtype, shape) in tensors {
        let bytes = shape
            .iter()
            .fold(dtype.size_in_bytes() as u128, |n, &d| n * d as u128);
        let end = offset + bytes;
        header.insert(
            name.to_string(),
            serde_json::json!({
                "dtype": safetensors_dtype(dtype),
                "shape": shape,
                "data_offsets": [u64::try_from(offset)?, u64::try_from(end)?],
            }),
        );
        offset = end;
    }
    let mut json = serde_json::to_string(&serde_json::Value::Object(header))?;
    // The data starts 8-byte aligned.
    while json.len() % 8 != 0 {
        json.push(' ');
    }
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    Ok(out)
}

/// Writes `tensor` (any shape, f32/f16/f64) to the `.npy` file `path`, atomically.
pub fn write_npy(path: &Path, tensor: &Tensor) -> Result<()> {
    Format::Npy.check_dtype(tensor.dtype(), path)?;
    let mut file = AtomicFile::create(path)?;
    let context = || format!("cannot write {}", path.display());
    file.write_all(&npy_header(tensor.dtype(), tensor.dims()))
        .with_context(context)?;
    let flat = tensor.flatten_all()?.to_device(&Device::Cpu)?;
    file.write_all(&le_bytes_of(&flat)?).with_context(context)?;
    file.commit()
}

/// Writes `tensors` (named, any shape, f32/f16/bf16/f64, on any device) to the `.safetensors`
/// file `path`, with `metadata`, atomically; at most about 32 MiB is converted at a time.
pub fn write_safetensors(
    path: &Path,
    tensors: &[(&str, &Tensor)],
    metadata: &[(&str, String)],
) -> Result<()> {
    let entries: Vec<(&str, DType, &[usize])> = tensors
        .iter()
        .map(|&(name, t)| (name, t.dtype(), t.dims()))
        .collect();
    let header = safetensors_header(&entries, metadata)?;
    let context = || format!("cannot write {}", path.display());
    let mut file = AtomicFile::create(path)?;
    file.write_all(&header).with_context(context)?;
    for &(_, tensor) in tensors {
        let flat = tensor.flatten_all()?;
        let n = flat.elem_count();
        let step = ((32usize << 20) / tensor.dtype().size_in_bytes()).max(1);
        let mut start = 0;
        while start < n {
            let len = step.min(n - start);
            let part = flat.narrow(0, start, len)?.to_device(&Device::Cpu)?;
            file.write_all(&le_bytes_of(&part)?).with_context(context)?;
            start += len;
        }
    }
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_pe_core::{PeSpec, SinusoidalEncoding};

    #[test]
    fn table_bytes_is_exact_except_for_csv_where_it_is_a_lower_bound() {
        let dir = tempfile::tempdir().unwrap();
        let encoding = SinusoidalEncoding::new(PeSpec::vaswani(8)).unwrap();
        let metadata = [("preset", "vaswani".to_string())];
        let cases = [
            (Positions::Range { offset: 0, len: 1 }, DType::F32),
            (Positions::Ids(vec![0, 1000, 123_456_789]), DType::F16),
            (Positions::Timesteps(vec![0.5, -3.25]), DType::F64),
        ];
        for (format, ext) in [
            (Format::Npy, "npy"),
            (Format::Safetensors, "safetensors"),
            (Format::Csv, "csv"),
        ] {
            for (rows, dtype) in &cases {
                let path = dir.path().join(format!("t.{ext}"));
                let shape = (rows.len(), 8);
                let table = rows.encode(&encoding, *dtype, &Device::Cpu).unwrap();
                let mut writer =
                    TableWriter::create(&path, format, *dtype, shape, &metadata).unwrap();
                writer.write_rows(&table, rows).unwrap();
                writer.finish().unwrap();
                let written = u128::from(std::fs::metadata(&path).unwrap().len());
                let bytes = table_bytes(format, *dtype, shape, &metadata).unwrap();
                // Position 0 is one digit and its values are 0 and 1: the bound is reached.
                let exact = format != Format::Csv || *rows == cases[0].0;
                assert!(bytes <= written, "{ext} {rows:?}: {bytes} > {written}");
                assert!(
                    !exact || bytes == written,
                    "{ext} {rows:?}: {bytes} != {written}"
                );
            }
        }
    }

    #[test]
    fn safetensors_bytes_is_the_size_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        let t = Tensor::zeros((5, 3), DType::BF16, &Device::Cpu).unwrap();
        write_safetensors(&path, &[("cos", &t), ("sin", &t)], &[]).unwrap();
        let bytes = safetensors_bytes(&["cos", "sin"], DType::BF16, (5, 3), &[]).unwrap();
        assert_eq!(bytes, u128::from(std::fs::metadata(&path).unwrap().len()));
    }

    #[test]
    fn free_space_is_checked_against_the_output_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.npy");
        check_free_space(&path, 1, "--len 1").unwrap();
        let err = check_free_space(&path, u128::from(u64::MAX) + 1, "--len 9").unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("--len 9: "), "{message}");
        assert!(
            message.contains("18446744073709551616 bytes (18.4 EB)"),
            "{message}"
        );
        // A missing directory is left for the file's creation to report.
        check_free_space(&dir.path().join("no/t.npy"), u128::MAX, "--len 9").unwrap();
    }

    #[test]
    fn human_bytes_use_decimal_units() {
        assert_eq!(human_bytes(999), "999 bytes");
        assert_eq!(human_bytes(1500), "1.5 kB");
        assert_eq!(human_bytes(999_960), "1.0 MB");
        assert_eq!(human_bytes(281_474_976_579_712), "281.5 TB");
    }
}
