//! [`QwenVlConfig`]: the `(3, batch, seq)` M-RoPE position ids of Qwen2-VL, Qwen2.5-VL and
//! Qwen3-VL, built from the token stream as transformers 5.24's `get_rope_index` builds them,
//! and the `rope_deltas` that continue them while decoding ([`QwenVlPositions::decode`]).
//!
//! A run of text tokens counts on from the position where the run starts, the same on the three
//! rows (temporal, height, width). A run of image or video tokens (consecutive tokens with the
//! config's `image_token_id` or `video_token_id`) takes the next grid `(t, h, w)` of its kind:
//! with `m = spatial_merge_size`, it holds `t * (h / m) * (w / m)` tokens, row-major (frame,
//! then row, then column), at height `start + row`, width `start + column` and time `start +
//! frame` (Qwen2.5-VL's videos: `start + trunc(frame * tokens_per_second *
//! second_per_grid_ts)`, in f32 as transformers computes it). The next run starts at `start +
//! max(h, w) / m`. Qwen3-VL gives each video frame its own run (a timestamp separates them).
//! Left padding (a zero in the attention mask) is skipped, and its positions are 0.
//! `rope_deltas[b]` is the largest position of sequence `b` plus one, minus its attended tokens.
//! [`QwenVlPositions::decode_from_last`] continues instead as transformers' `generate` does, each
//! row from the prompt's last token.
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use candle_pe_formats::{FromHfConfig, QwenVlConfig};
//!
//! let json = serde_json::json!({"model_type": "qwen2_vl", "image_token_id": 151655,
//!     "video_token_id": 151656, "vision_config": {"spatial_merge_size": 2}});
//! let config = QwenVlConfig::from_hf_config(&json)?;
//! // Two text tokens, a 4 x 4 patch image (2 x 2 tokens after merging), one text token.
//! let img = 151655i64;
//! let ids = Tensor::new(&[[1i64, 2, img, img, img, img, 3]], &Device::Cpu)?;
//! let positions = config.positions(&ids, &[[1, 4, 4]], &[], None, None)?;
//! assert_eq!(
//!     positions.position_ids().to_vec3::<i64>()?,
//!     [[[0, 1, 2, 2, 2, 2, 4]], [[0, 1, 2, 2, 3, 3, 4]], [[0, 1, 2, 3, 2, 3, 4]]]
//! );
//! assert_eq!(positions.rope_deltas().to_vec1::<i64>()?, [-2]);
//! // The next token, decoded after the 7 tokens of the prompt: 7 + (-2) on every row.
//! assert_eq!(positions.decode(&[7], 1)?.to_vec3::<i64>()?, [[[5]], [[5]], [[5]]]);
//! # Ok::<(), candle_pe_formats::Error>(())
//! ```

use candle_core::{DType, Tensor};
use serde_json::Value;

use candle_pe_core::MAX_POSITION;

use candle_pe_core::Error as CoreError;

use crate::{ConfigFields, Error, FromHfConfig, HfModelType, QwenVlVersion, Result};

/// What `get_rope_index` reads from a Qwen-VL `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct QwenVlConfig {
    /// The generation.
    pub version: QwenVlVersion,
    /// The token id of an image patch.
    pub image_token_id: i64,
    /// The token id of a video patch.
    pub video_token_id: i64,
    /// `vision_config.spatial_merge_size`: patches merged per token along height and width.
    pub spatial_merge_size: usize,
    /// `vision_config.tokens_per_second` (Qwen2.5-VL; transformers' default 4).
    pub tokens_per_second: f64,
}

/// The ids of a batch: `position_ids` `(3, batch, seq)` and `rope_deltas` `(batch,)`, i64.
#[derive(Clone, Debug)]
pub struct QwenVlPositions {
    position_ids: Tensor,
    rope_deltas: Tensor,
    deltas: Vec<i64>,
    /// Per sequence: its attended tokens, and the ids of the last of them (0s when none).
    prompt: Vec<(usize, [i64; 3])>,
}

/// The token kinds of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Image,
    Video,
}

impl FromHfConfig for QwenVlConfig {
    /// Reads `model_type`, `image_token_id`, `video_token_id` and `vision_config`'s
    /// `spatial_merge_size` (default 2) and `tokens_per_second` (default 4).
    fn from_hf_config(config: &Value) -> Result<Self> {
        let root = ConfigFields::new(config)?;
        let model_type: String = root.require("model_type")?;
        let Some(version) = HfModelType::of(&model_type).qwen_vl else {
            return Err(root.invalid(
                "model_type",
                format!(
                    "{model_type:?} is not a Qwen-VL model ({})",
                    HfModelType::qwen_vl_names().join(", ")
                ),
            ));
        };
        let vision = root.object("vision_config")?;
        let vision_field = |name: &str| -> Result<Option<f64>> {
            match &vision {
                Some(v) => v.get::<f64>(name),
                None => Ok(None),
            }
        };
        let merge = vision_field("spatial_merge_size")?.unwrap_or(2.0);
        if !(merge >= 1.0 && merge.fract() == 0.0 && merge < MAX_POSITION as f64) {
            return Err(root.invalid(
                "vision_config.spatial_merge_size",
                format!("must be a positive integer, got {merge}"),
            ));
        }
        let tokens_per_second = vision_field("tokens_per_second")?.unwrap_or(4.0);
        if !(tokens_per_second.is_finite() && tokens_per_second >= 0.0) {
            return Err(root.invalid(
                "vision_config.tokens_per_second",
                format!("must be finite and >= 0, got {tokens_per_second}"),
            ));
        }
        Ok(Self {
            version,
            image_token_id: root.require("image_token_id")?,
            video_token_id: root.require("video_token_id")?,
            spatial_merge_size: merge as usize,
            tokens_per_second,
        })
    }
}

impl QwenVlConfig {
    /// The position ids and deltas of `input_ids` `(batch, seq)` (any integer dtype) with the
    /// grids `(t, h, w)` of the images and videos in the order their runs appear (across the
    /// batch), Qwen2.5-VL's `second_per_grid_ts` (one per video, 1 when not given) and an
    /// optional `attention_mask` `(batch, seq)` (0 for padding). A run whose length is not its
    /// grid's token count ([`Error::VisionTokens`]), or more or fewer runs than grids
    /// ([`Error::VisionGrids`]), is an error naming them.
    pub fn positions(
        &self,
        input_ids: &Tensor,
        image_grid_thw: &[[usize; 3]],
        video_grid_thw: &[[usize; 3]],
        second_per_grid_ts: Option<&[f64]>,
        attention_mask: Option<&Tensor>,
    ) -> Result<QwenVlPositions> {
        let tokens = Tokens::read(input_ids, attention_mask)?;
        self.check_grids(image_grid_thw, video_grid_thw)?;
        let runs = self.runs(&tokens);
        let videos = self.videos(video_grid_thw, second_per_grid_ts, &runs)?;
        let grids = Grids {
            images: image_grid_thw,
            videos: &videos,
        };
        grids.check_counts(&runs)?;
        let mut placed = Placed::new(tokens.batch, tokens.seq);
        let mut cursor = Cursor::default();
        for (b, runs) in runs.iter().enumerate() {
            self.place_sequence(&mut placed, b, runs, &grids, &mut cursor)?;
        }
        placed.into_positions(input_ids.device())
    }

    /// Every grid's sizes are positive, its height and width multiples of the merge size, and
    /// its tokens (`t * h/m * w/m`) a number.
    fn check_grids(&self, images: &[[usize; 3]], videos: &[[usize; 3]]) -> Result<()> {
        let m = self.spatial_merge_size;
        for (name, grids) in [("image_grid_thw", images), ("video_grid_thw", videos)] {
            for g in grids {
                let tokens = g[0]
                    .checked_mul(g[1] / m)
                    .and_then(|n| n.checked_mul(g[2] / m));
                let message = if g.contains(&0) || g[1] % m != 0 || g[2] % m != 0 {
                    format!(
                        "every size must be positive, h and w multiples of spatial_merge_size {m}"
                    )
                } else if tokens.is_none() {
                    format!("its tokens, t * h/{m} * w/{m}, are more than a usize holds")
                } else {
                    continue;
                };
                return Err(Error::Core(CoreError::Config {
                    field: name.into(),
                    message: format!("grid (t, h, w) = {g:?}: {message}"),
                }));
            }
        }
        Ok(())
    }

    /// The video grids as the runs take them, with their seconds per grid: Qwen3-VL gives each
    /// frame of a video a grid of its own (`t = 1`, one second).
    fn videos(
        &self,
        grids: &[[usize; 3]],
        seconds: Option<&[f64]>,
        runs: &[Vec<Run>],
    ) -> Result<Videos> {
        let seconds = match seconds {
            Some(s) if s.len() != grids.len() => {
                return Err(Error::Core(CoreError::ShapeMismatch {
                    name: "second_per_grid_ts",
                    expected: format!("one per video grid: ({},)", grids.len()),
                    shape: vec![s.len()],
                }))
            }
            Some(s) => {
                if let Some((i, t)) = s
                    .iter()
                    .enumerate()
                    .find(|(_, t)| !(t.is_finite() && **t >= 0.0))
                {
                    return Err(Error::Core(CoreError::Config {
                        field: "second_per_grid_ts".into(),
                        message: format!("video {i}: must be finite and >= 0, got {t}"),
                    }));
                }
                s.to_vec()
            }
            None => vec![1.0; grids.len()],
        };
        Ok(match self.version {
            QwenVlVersion::Qwen3Vl => {
                // More frames than video runs can be are not made.
                let count = grids.iter().fold(0usize, |n, g| n.saturating_add(g[0]));
                let video_runs = runs.iter().flatten().filter(|r| r.kind == Kind::Video);
                let video_runs = video_runs.count();
                if count > video_runs {
                    return Err(Error::VisionGrids {
                        kind: "video frame",
                        runs: video_runs,
                        grids: count,
                    });
                }
                let frames: Vec<[usize; 3]> = grids
                    .iter()
                    .flat_map(|&[t, h, w]| std::iter::repeat_n([1, h, w], t))
                    .collect();
                let seconds = vec![1.0; frames.len()];
                Videos {
                    grids: frames,
                    name: "video frame",
                    seconds,
                }
            }
            _ => Videos {
                grids: grids.to_vec(),
                name: "video",
                seconds,
            },
        })
    }

    /// The runs of attended tokens of each sequence: consecutive tokens of one kind.
    fn runs(&self, tokens: &Tokens) -> Vec<Vec<Run>> {
        let kind_of = |id: i64| match id {
            id if id == self.image_token_id => Kind::Image,
            id if id == self.video_token_id => Kind::Video,
            _ => Kind::Text,
        };
        let seq = tokens.seq;
        (0..tokens.batch)
            .map(|b| {
                let mut runs: Vec<Run> = Vec::new();
                for i in (0..seq).filter(|&i| tokens.attended[b * seq + i]) {
                    let kind = kind_of(tokens.ids[b * seq + i]);
                    match runs.last_mut() {
                        Some(run) if run.kind == kind => run.tokens.push(i),
                        _ => runs.push(Run {
                            kind,
                            tokens: vec![i],
                        }),
                    }
                }
                runs
            })
            .collect()
    }

    /// Places the positions of sequence `b`, run after run, then records its delta and the
    /// ids of its last attended token.
    fn place_sequence(
        &self,
        placed: &mut Placed,
        b: usize,
        runs: &[Run],
        grids: &Grids,
        cursor: &mut Cursor,
    ) -> Result<()> {
        let mut start = 0i64;
        placed.largest = None;
        for run in runs {
            let Some(vision) = self.vision_run(run.kind, grids, cursor) else {
                for (j, &i) in run.tokens.iter().enumerate() {
                    placed.put(b, i, [start + j as i64; 3]);
                }
                start += run.tokens.len() as i64;
                continue;
            };
            start += vision.place(placed, b, &run.tokens, start, self.spatial_merge_size)?;
        }
        let len = runs.iter().map(|run| run.tokens.len()).sum::<usize>();
        let delta = placed.largest.map_or(0, |l| l + 1 - len as i64);
        placed.deltas.push(delta);
        let last = runs
            .last()
            .and_then(|run| run.tokens.last())
            .map_or([0; 3], |&i| placed.ids_at(b, i));
        placed.prompt.push((len, last));
        Ok(())
    }

    /// The grid, time interval and name of the next image or video run (`None` for text).
    fn vision_run(&self, kind: Kind, grids: &Grids, cursor: &mut Cursor) -> Option<VisionRun> {
        match kind {
            Kind::Text => None,
            Kind::Image => {
                cursor.images += 1;
                let index = cursor.images - 1;
                Some(VisionRun {
                    grid: grids.images[index],
                    interval: None,
                    name: "image",
                    index,
                })
            }
            Kind::Video => {
                cursor.videos += 1;
                let index = cursor.videos - 1;
                let interval = (self.version == QwenVlVersion::Qwen25Vl)
                    .then(|| self.tokens_per_second as f32 * grids.videos.seconds[index] as f32);
                Some(VisionRun {
                    grid: grids.videos.grids[index],
                    interval,
                    name: grids.videos.name,
                    index,
                })
            }
        }
    }
}

/// The input ids of a batch, flattened, and which of them are attended.
struct Tokens {
    batch: usize,
    seq: usize,
    ids: Vec<i64>,
    attended: Vec<bool>,
}

impl Tokens {
    /// Checks the ids' shape and dtype and decodes the mask (every token attended when none).
    fn read(input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Self> {
        let (batch, seq) = match input_ids.dims() {
            &[b, s] => (b, s),
            dims => {
                return Err(Error::Core(CoreError::ShapeMismatch {
                    name: "input_ids",
                    expected: "(batch, seq)".into(),
                    shape: dims.to_vec(),
                }))
            }
        };
        if !input_ids.dtype().is_int() {
            return Err(Error::Core(CoreError::NotInteger {
                name: "input ids",
                dtype: input_ids.dtype(),
            }));
        }
        let ids = input_ids
            .to_dtype(DType::I64)?
            .flatten_all()?
            .to_vec1::<i64>()?;
        let attended = match attention_mask {
            None => vec![true; ids.len()],
            Some(mask) => decode_mask(mask, batch, seq)?,
        };
        Ok(Self {
            batch,
            seq,
            ids,
            attended,
        })
    }
}

/// The attention mask `(batch, seq)` as one flag per token: attended where not 0.
fn decode_mask(mask: &Tensor, batch: usize, seq: usize) -> Result<Vec<bool>> {
    if mask.dims() != [batch, seq] {
        return Err(Error::Core(CoreError::ShapeMismatch {
            name: "attention_mask",
            expected: format!("(batch, seq) = ({batch}, {seq}), as the input ids"),
            shape: mask.dims().to_vec(),
        }));
    }
    let mask = mask.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    Ok(mask.iter().map(|&v| v != 0.0).collect())
}

/// The video grids the runs take, in order, their name in errors, and their seconds per grid.
struct Videos {
    grids: Vec<[usize; 3]>,
    name: &'static str,
    seconds: Vec<f64>,
}

/// The grids the vision runs of a batch take, in order.
struct Grids<'a> {
    images: &'a [[usize; 3]],
    videos: &'a Videos,
}

impl Grids<'_> {
    /// As many image runs as image grids, and video runs as video grids (or frames).
    fn check_counts(&self, runs: &[Vec<Run>]) -> Result<()> {
        for (kind, name, grids) in [
            (Kind::Image, "image", self.images.len()),
            (Kind::Video, self.videos.name, self.videos.grids.len()),
        ] {
            let count = runs.iter().flatten().filter(|r| r.kind == kind).count();
            if count != grids {
                return Err(Error::VisionGrids {
                    kind: name,
                    runs: count,
                    grids,
                });
            }
        }
        Ok(())
    }
}

/// A run of attended tokens of one kind: its indices in the sequence.
struct Run {
    kind: Kind,
    tokens: Vec<usize>,
}

/// How many image and video grids the runs so far have taken.
#[derive(Default)]
struct Cursor {
    images: usize,
    videos: usize,
}

/// An image or video run's grid, its time step (Qwen2.5-VL's videos), and its name and index
/// for errors.
struct VisionRun {
    grid: [usize; 3],
    interval: Option<f32>,
    name: &'static str,
    index: usize,
}

impl VisionRun {
    /// Places the run's tokens from `start`, frame by frame, row-major, and returns how far
    /// the next run starts after this one: `max(h, w) / m`.
    fn place(
        &self,
        placed: &mut Placed,
        b: usize,
        tokens: &[usize],
        start: i64,
        m: usize,
    ) -> Result<i64> {
        let [t, h, w] = self.grid;
        let (h, w) = (h / m, w / m);
        let expected = t * h * w;
        if tokens.len() != expected {
            return Err(Error::VisionTokens {
                sequence: b,
                kind: self.name,
                index: self.index,
                tokens: tokens.len(),
                grid: self.grid,
                expected,
            });
        }
        let mut slots = tokens.iter();
        for frame in 0..t {
            let time = match self.interval {
                // transformers: (arange(t) * interval).long(), in f32, truncated.
                Some(interval) => (frame as f32 * interval) as i64,
                None => frame as i64,
            };
            // A video's seconds per grid may stretch its time past every position.
            let temporal = start as i128 + time as i128;
            if temporal >= MAX_POSITION as i128 {
                return Err(Error::Core(CoreError::PositionOutOfRange {
                    name: "temporal position",
                    value: temporal,
                }));
            }
            for row in 0..h {
                for column in 0..w {
                    let &i = slots.next().expect("the run holds t * h * w tokens");
                    let ids = [temporal as i64, start + row as i64, start + column as i64];
                    placed.put(b, i, ids);
                }
            }
        }
        Ok(h.max(w) as i64)
    }
}

/// The positions placed so far, `(3, batch, seq)` flattened, the largest of the sequence being
/// placed, and each placed sequence's delta and prompt (attended tokens, ids of the last).
struct Placed {
    batch: usize,
    seq: usize,
    out: Vec<i64>,
    largest: Option<i64>,
    deltas: Vec<i64>,
    prompt: Vec<(usize, [i64; 3])>,
}

impl Placed {
    fn new(batch: usize, seq: usize) -> Self {
        Self {
            batch,
            seq,
            out: vec![0i64; 3 * batch * seq],
            largest: None,
            deltas: Vec::with_capacity(batch),
            prompt: Vec::with_capacity(batch),
        }
    }

    /// Puts the ids of token `i` of sequence `b` on the three rows, tracking the largest.
    fn put(&mut self, b: usize, i: usize, ids: [i64; 3]) {
        for (axis, v) in ids.into_iter().enumerate() {
            self.out[(axis * self.batch + b) * self.seq + i] = v;
            self.largest = Some(self.largest.map_or(v, |l| l.max(v)));
        }
    }

    /// The three ids of token `i` of sequence `b`.
    fn ids_at(&self, b: usize, i: usize) -> [i64; 3] {
        [0, 1, 2].map(|axis| self.out[(axis * self.batch + b) * self.seq + i])
    }

    fn into_positions(self, device: &candle_core::Device) -> Result<QwenVlPositions> {
        Ok(QwenVlPositions {
            position_ids: Tensor::from_vec(self.out, (3, self.batch, self.seq), device)?,
            rope_deltas: Tensor::new(self.deltas.as_slice(), device)?,
            deltas: self.deltas,
            prompt: self.prompt,
        })
    }
}

impl QwenVlPositions {
    /// `(3, batch, seq)` i64: rows temporal, height, width; padding at 0.
    pub fn position_ids(&self) -> &Tensor {
        &self.position_ids
    }

    /// `(batch,)` i64: each sequence's largest position plus one, minus its attended tokens
    /// (transformers returns it shaped `(batch, 1)`).
    pub fn rope_deltas(&self) -> &Tensor {
        &self.rope_deltas
    }

    /// The ids `(3, batch, len)` of `len` tokens decoded after `attended[b]` attended tokens of
    /// sequence `b` (the prompt's and the ones decoded since, padding not counted):
    /// `attended[b] + j + rope_deltas[b]` on every row, as transformers' `forward` continues them
    /// from a cache (and vLLM). transformers 5.24's `generate` continues from the prompt's last
    /// token instead ([`decode_from_last`](Self::decode_from_last)); the two agree when the
    /// prompt ends in text at its largest position.
    pub fn decode(&self, attended: &[usize], len: usize) -> Result<Tensor> {
        self.continue_rows(attended, len, |b, _| {
            attended[b] as i128 + self.deltas[b] as i128
        })
    }

    /// The ids `(3, batch, len)` of `len` tokens decoded after `attended[b]` attended tokens of
    /// sequence `b`, as transformers 5.24's `generate` feeds them: each row goes on one by one
    /// from the prompt's last attended token, `last[row] + 1 + (attended[b] - prompt[b]) + j`
    /// with `prompt[b]` the prompt's attended tokens. It differs from [`decode`](Self::decode)
    /// when the prompt ends in an image or video, or when a position inside it lies past its
    /// last one (Qwen2.5-VL's video time stretched by `second_per_grid_ts`, a video with more
    /// frames than merged rows and columns).
    pub fn decode_from_last(&self, attended: &[usize], len: usize) -> Result<Tensor> {
        self.continue_rows(attended, len, |b, axis| {
            let (prompt, last) = self.prompt[b];
            last[axis] as i128 + 1 + attended[b] as i128 - prompt as i128
        })
    }

    /// `start(b, axis) + j` for `j < len`, checked, as a `(3, batch, len)` tensor.
    fn continue_rows(
        &self,
        attended: &[usize],
        len: usize,
        start: impl Fn(usize, usize) -> i128,
    ) -> Result<Tensor> {
        let batch = self.deltas.len();
        if attended.len() != batch {
            return Err(Error::Core(CoreError::ShapeMismatch {
                name: "attended",
                expected: format!("one count per sequence: ({batch},)"),
                shape: vec![attended.len()],
            }));
        }
        // Each row's first position out of range, if any, before the rows are made.
        let max = MAX_POSITION as i128;
        for axis in 0..3 {
            for b in 0..batch {
                let first = start(b, axis);
                let bad = match first {
                    _ if len == 0 => None,
                    p if p < 0 || p >= max => Some(p),
                    p if p + len as i128 > max => Some(max),
                    _ => None,
                };
                if let Some(value) = bad {
                    return Err(Error::Core(CoreError::PositionOutOfRange {
                        name: "decoded position",
                        value,
                    }));
                }
            }
        }
        let mut out = Vec::new();
        out.try_reserve_exact(3 * batch * len)
            .map_err(|e| CoreError::TooLarge {
                rows: 3 * batch,
                width: len,
                dtype: DType::I64,
                bytes: 3 * batch as u128 * len as u128 * 8,
                why: format!("the allocator refused ({e})"),
            })?;
        for axis in 0..3 {
            for b in 0..batch {
                let first = start(b, axis) as i64;
                out.extend((0..len as i64).map(|j| first + j));
            }
        }
        Ok(Tensor::from_vec(
            out,
            (3, batch, len),
            self.rope_deltas.device(),
        )?)
    }
}
