//! `pe rope --config qwen-vl.json --input-ids ids.npy`: the M-RoPE position ids of Qwen2-VL,
//! Qwen2.5-VL and Qwen3-VL, built from the token ids and the image and video grids as
//! transformers' `get_rope_index` builds them (pe-formats' `QwenVlConfig`), written with the
//! `rope_deltas` that continue them and the `cos` and `sin` at those positions.
//!
//! ```text
//! pe rope --config qwen2.5-vl/config.json --input-ids ids.npy --image-grid-thw 1,28,42 \
//!     --video-grid-thw 8,20,30 --second-per-grid-ts 1.0 --attention-mask mask.npy \
//!     --out vl.safetensors
//! ```

use std::path::Path;

use anyhow::{bail, Result};
use candle_core::{DType, Device};
use candle_pe_core::At;
use candle_pe_core::{Error, Rope};
use candle_pe_formats::Error as FormatsError;
use candle_pe_formats::{QwenVlConfig, QwenVlPositions};

use crate::rope::RopeArgs;
use crate::vision_grids::Grids;

/// The flag of the value an error of `QwenVlConfig::positions` is about.
fn flag_of(err: &FormatsError) -> &'static str {
    let core = match err {
        FormatsError::VisionTokens { .. } | FormatsError::VisionGrids { .. } => {
            return "--input-ids / --image-grid-thw / --video-grid-thw"
        }
        FormatsError::Core(core) => core,
        _ => return "--input-ids",
    };
    match core {
        Error::Config { field, .. } if field == "image_grid_thw" => "--image-grid-thw",
        Error::Config { field, .. } if field == "video_grid_thw" => "--video-grid-thw",
        Error::ShapeMismatch {
            name: "second_per_grid_ts",
            ..
        } => "--second-per-grid-ts",
        Error::ShapeMismatch {
            name: "attention_mask",
            ..
        } => "--attention-mask",
        _ => "--input-ids",
    }
}

/// `pe rope --config C --input-ids I ..`: position_ids, rope_deltas, cos and sin.
pub fn write(args: &RopeArgs) -> Result<()> {
    let Some(path) = &args.config else {
        bail!("--input-ids needs --config: a Qwen-VL config.json gives the vision token ids");
    };
    let input_ids = args.input_ids.as_deref().expect("called with --input-ids");
    crate::rope::check_extension(&args.out)?;
    if args.layer.is_some() || args.layer_type.is_some() {
        bail!("--input-ids: Qwen-VL has one rope; drop --layer and --layer-type");
    }
    let in_config = |e: Error| anyhow::anyhow!("--config {}: {e}", path.display());
    let qwen: QwenVlConfig = crate::rope::read_hf_config(path)?;
    let (config, _) = args.resolve_rope()?;
    let rope = Rope::new(config.clone()).map_err(in_config)?;
    let positions = positions(args, &qwen, input_ids)?;
    let dtype: DType = args.dtype.into();
    let device = args.device.open()?;
    let position_ids = positions.position_ids().to_device(&device)?;
    let (cos, sin) = rope.at(At::mrope(&position_ids), dtype).map_err(|e| {
        anyhow::anyhow!(
            "--config {}: {e} (M-RoPE needs the text config's mrope_section)",
            path.display()
        )
    })?;
    let (cos, sin) = (cos.to_device(&Device::Cpu)?, sin.to_device(&Device::Cpu)?);
    let metadata = [
        ("config", serde_json::to_string(&config)?),
        (
            "positions",
            format!("get_rope_index of {}", input_ids.display()),
        ),
        ("model_type", format!("{:?}", qwen.version)),
        ("attention_scaling", rope.attention_scaling().to_string()),
    ];
    crate::output::write_safetensors(
        &args.out,
        &[
            ("position_ids", positions.position_ids()),
            ("rope_deltas", positions.rope_deltas()),
            ("cos", &cos),
            ("sin", &sin),
        ],
        &metadata,
    )
}

/// The position ids of the token ids of `input_ids` (`(S,)` or `(batch, S)`), with the grids,
/// seconds and mask of the flags; an error names the flag at fault.
fn positions(args: &RopeArgs, qwen: &QwenVlConfig, input_ids: &Path) -> Result<QwenVlPositions> {
    let ids = crate::npy::read_i64(input_ids, "--input-ids")?;
    let ids = match ids.rank() {
        1 => ids.unsqueeze(0)?,
        2 => ids,
        _ => bail!(
            "--input-ids {}: the token ids must be shaped (S,) or (batch, S), got {:?}",
            input_ids.display(),
            ids.dims()
        ),
    };
    let mask = match &args.attention_mask {
        Some(p) => Some(crate::npy::read_i64(p, "--attention-mask")?),
        None => None,
    };
    let grids = |g: &Option<Grids>| g.as_ref().map_or(Vec::new(), |g| g.0.clone());
    let seconds = args.second_per_grid_ts.as_ref().map(|s| s.0.clone());
    qwen.positions(
        &ids,
        &grids(&args.image_grid_thw),
        &grids(&args.video_grid_thw),
        seconds.as_deref(),
        mask.as_ref(),
    )
    .map_err(|e| {
        let flag = flag_of(&e);
        anyhow::Error::from(e).context(flag)
    })
}
