//! `pe table`: build an encoding table in chunks of rows and write it to a file, with a
//! progress bar on stderr for large tables.

use std::path::PathBuf;

use anyhow::Result;
use candle_core::DType;
use candle_pe_core::{PeSpec, Preset};
use indicatif::{ProgressBar, ProgressStyle};

use crate::device::DeviceArg;
use crate::options;
use crate::output::{self, Format, TableWriter};
use crate::positions::Positions;

/// Tables of more bytes than this show a progress bar.
const PROGRESS_BYTES: u128 = 256 << 20;

/// Rows are built and written about this many bytes at a time.
const CHUNK_BYTES: usize = 32 << 20;

/// Everything `pe table` needs.
#[derive(Debug)]
pub struct TableRequest {
    /// The encoding (preset plus overrides).
    pub spec: PeSpec,
    /// The preset it came from, recorded in `.safetensors` metadata.
    pub preset: Preset,
    /// One row per position.
    pub rows: Positions,
    /// Element type of the output.
    pub dtype: DType,
    /// Where the table is built.
    pub device: DeviceArg,
    /// The output file; its extension picks the format.
    pub out: PathBuf,
    /// Rows per chunk, instead of about [`CHUNK_BYTES`] worth.
    pub chunk_rows: Option<usize>,
}

/// Builds the table and writes it to `request.out`.
pub fn write(request: &TableRequest) -> Result<()> {
    let format = Format::from_path(&request.out)?;
    format.check_dtype(request.dtype, &request.out)?;
    let encoding = options::encoding(request.spec)?;
    let device = request.device.open()?;
    let (rows, width) = (request.rows.len(), request.spec.width);
    let named = |err| options::name_flag(err, Some(&request.rows));
    request
        .rows
        .validate(&encoding, request.dtype, &device)
        .map_err(named)?;

    let metadata = [
        ("preset", request.preset.name().to_string()),
        ("spec", options::describe(&request.spec)),
        ("positions", describe_positions(&request.rows)),
    ];
    let dtype = request.dtype.as_str();
    output::check_free_space(
        &request.out,
        output::table_bytes(format, request.dtype, (rows, width), &metadata)?,
        &format!(
            "{} ({rows} rows x {width} columns of {dtype})",
            request.rows.flag()
        ),
    )?;
    let mut writer = TableWriter::create(
        &request.out,
        format,
        request.dtype,
        (rows, width),
        &metadata,
    )?;
    let bytes = rows as u128 * width as u128 * request.dtype.size_in_bytes() as u128;
    let progress = if bytes > PROGRESS_BYTES {
        progress_bar(rows as u64)
    } else {
        ProgressBar::hidden()
    };
    let chunk = request
        .chunk_rows
        .unwrap_or_else(|| chunk_rows(width, request.dtype));
    let mut start = 0;
    while start < rows {
        let positions = request.rows.slice(start, start + chunk);
        let table = positions
            .encode(&encoding, request.dtype, &device)
            .map_err(named)?
            .to_device(&candle_core::Device::Cpu)?;
        writer.write_rows(&table, &positions)?;
        start += positions.len();
        progress.set_position(start as u64);
    }
    progress.finish_and_clear();
    writer.finish()
}

/// Rows per chunk: about [`CHUNK_BYTES`]. (A row's values depend only on its position, so a
/// chunked table is the table built at once.)
fn chunk_rows(width: usize, dtype: DType) -> usize {
    let row_bytes = (width * dtype.size_in_bytes()).max(1);
    (CHUNK_BYTES / row_bytes).max(1)
}

/// A progress bar on stderr (drawn only when stderr is a terminal).
fn progress_bar(rows: u64) -> ProgressBar {
    let bar = ProgressBar::new(rows);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} writing rows {pos}/{len} [{bar:40}] {percent}% eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// The positions, as recorded in `.safetensors` metadata (long lists by their count).
fn describe_positions(rows: &Positions) -> String {
    fn list<T: ToString>(kind: &str, values: &[T]) -> String {
        if values.len() > 32 {
            return format!("{} {kind}", values.len());
        }
        let values: Vec<String> = values.iter().map(T::to_string).collect();
        format!("{kind} {}", values.join(","))
    }
    match rows {
        Positions::Range { offset, len } => format!("range {offset}..{}", offset + len),
        Positions::Ids(ids) => list("ids", ids),
        Positions::Timesteps(ts) => list("timesteps", ts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_about_32_mib() {
        let rows = chunk_rows(512, DType::F32);
        assert_eq!(rows * 512 * 4, CHUNK_BYTES);
        assert_eq!(chunk_rows(1 << 24, DType::F64), 1);
    }
}
