//! [`SinusoidalEmbedding`]: token embedding, embedding scale and sinusoidal positional encoding, the block
//! that starts every encoder and decoder. Build it from a checkpoint with
//! [`sinusoidal_embedding`], like any candle-nn layer.
//!
//! ```
//! use candle_core::{DType, Device, Module, Tensor};
//! use candle_nn::{VarBuilder, VarMap};
//! use candle_pe_nn::{sinusoidal_embedding, EmbeddingScale, Preset, SinusoidalEmbeddingConfig};
//!
//! let dev = Device::Cpu;
//! let varmap = VarMap::new();
//! let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
//! let cfg = SinusoidalEmbeddingConfig {
//!     embedding_scale: EmbeddingScale::SqrtD,
//!     ..SinusoidalEmbeddingConfig::for_preset(Preset::Marian)
//! };
//! let embed = sinusoidal_embedding(1000, 64, cfg, vb.pp("model.encoder.embed_tokens"))?;
//!
//! let ids = Tensor::new(&[[5u32, 17, 42], [7, 8, 9]], &dev)?;
//! let x = embed.forward(&ids)?; // sqrt(64) * embedding(ids) + PE(0..3)
//! assert_eq!(x.dims(), &[2, 3, 64]);
//!
//! // Decoding with a KV cache: one token at position 3.
//! let next = embed.forward_with_offset(&Tensor::new(&[[11u32], [12]], &dev)?, 3)?;
//! assert_eq!(next.dims(), &[2, 1, 64]);
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, DType, Module, Result, Tensor};
use candle_nn::{Embedding, Init, VarBuilder};
use candle_pe_core::{
    PeCache, SinusoidalEncoding, TableBackend, ToPositions, TokenPositions, MAX_POSITION,
};

use crate::config::{PositionMode, SinusoidalEmbeddingConfig, StoredTable};

/// Where the positional rows come from.
#[derive(Clone, Debug)]
enum Table {
    /// Generated exactly, cached and shared between clones.
    Generated(PeCache),
    /// A table read from the checkpoint, row `p` for position `p`.
    Stored(Tensor),
}

/// `embedding_scale * embedding(ids) + PE(positions)`, in the embedding's dtype.
#[derive(Clone, Debug)]
pub struct SinusoidalEmbedding {
    embedding: Embedding,
    embedding_scale: f64,
    mode: PositionMode,
    padding_idx: Option<u32>,
    /// Positions must be below this.
    position_limit: usize,
    table: Table,
}

/// Builds the block from a checkpoint: the token table is `weight` under `vb`'s prefix, shape
/// `(vocab, width)`; a stored positional table is read by its full name if `cfg.stored_table`
/// asks.
pub fn sinusoidal_embedding(
    vocab: usize,
    width: usize,
    cfg: SinusoidalEmbeddingConfig,
    vb: VarBuilder,
) -> Result<SinusoidalEmbedding> {
    check_declared("vocab", cfg.vocab, vocab)?;
    check_declared("width", cfg.width, width)?;
    let init = Init::Randn {
        mean: 0.,
        stdev: 1.,
    };
    let weight = vb.get_with_hints((vocab, width), "weight", init)?;
    let embedding = Embedding::new(weight, width);
    match &cfg.stored_table {
        StoredTable::Ignore => SinusoidalEmbedding::new(embedding, &cfg),
        StoredTable::Check { name, .. } | StoredTable::Load { name } => {
            let root = vb.root();
            if !root.contains_tensor(name) {
                bail!("checkpoint tensor {name} (cfg.stored_table) is not in the checkpoint")
            }
            let table = root.get_unchecked_dtype(name, vb.dtype())?;
            SinusoidalEmbedding::from_stored_table(embedding, &cfg, name, &table)
        }
    }
}

fn check_declared(name: &str, declared: Option<usize>, given: usize) -> Result<()> {
    match declared {
        Some(declared) if declared != given => {
            bail!("cfg.{name} is {declared} but the block is built with {name} {given}")
        }
        _ => Ok(()),
    }
}

impl SinusoidalEmbedding {
    /// The block from a token table already loaded; the encoding is generated.
    /// `cfg.stored_table` must be `Ignore`: a table stored in the checkpoint is read, checked
    /// or used by [`sinusoidal_embedding`].
    pub fn new(embedding: Embedding, cfg: &SinusoidalEmbeddingConfig) -> Result<Self> {
        if cfg.stored_table != StoredTable::Ignore {
            bail!("cfg.stored_table is {:?}: build with sinusoidal_embedding, which reads the stored table from the checkpoint", cfg.stored_table)
        }
        let d = embedding.hidden_size();
        let dims = embedding.embeddings().dims();
        if dims.len() != 2 || dims[1] != d {
            bail!("the token table has shape {dims:?}, expected (vocab, {d})")
        }
        let padding_idx = cfg.padding_idx;
        if cfg.positions == PositionMode::PaddingAware && padding_idx.is_none() {
            bail!("cfg.positions is PaddingAware but cfg.padding_idx is not set")
        }
        let embedding_scale = cfg.embedding_scale.factor(d);
        if !embedding_scale.is_finite() {
            bail!("cfg.embedding_scale must be finite, got {embedding_scale}")
        }
        let extra = match cfg.positions {
            PositionMode::PaddingAware => padding_idx.map_or(0, |p| p as usize + 1),
            PositionMode::Plain => 0,
        };
        let position_limit = match cfg.max_positions {
            Some(max) => (max.saturating_add(extra)).min(MAX_POSITION as usize),
            None => MAX_POSITION as usize,
        };
        let encoding = SinusoidalEncoding::new(cfg.spec(d))?;
        // A declared context is cached whole; otherwise the cache's default limit applies.
        let cache = match cfg.max_positions {
            Some(_) => PeCache::new(encoding).with_limit(position_limit),
            None => PeCache::new(encoding),
        };
        Ok(Self {
            embedding,
            embedding_scale,
            mode: cfg.positions,
            padding_idx,
            position_limit,
            table: Table::Generated(cache),
        })
    }

    /// The block with a positional table read from a checkpoint (tensor `name`, shape
    /// `(rows, d)`), used or checked as `cfg.stored_table` says.
    fn from_stored_table(
        embedding: Embedding,
        cfg: &SinusoidalEmbeddingConfig,
        name: &str,
        table: &Tensor,
    ) -> Result<Self> {
        let mode = cfg.stored_table.clone();
        let mut block = Self::new(
            embedding,
            &SinusoidalEmbeddingConfig {
                stored_table: StoredTable::Ignore,
                ..cfg.clone()
            },
        )?;
        let d = block.width();
        let rows = match cfg.max_positions {
            Some(_) => block.position_limit,
            None => table.dims().first().copied().unwrap_or(0),
        };
        if table.dims() != [rows, d] {
            bail!(
                "checkpoint tensor {name} has shape {:?}, expected [{rows}, {d}] (rows from cfg.max_positions)",
                table.dims()
            )
        }
        match mode {
            StoredTable::Ignore => {}
            StoredTable::Check { tolerance, .. } => {
                let tolerance = tolerance.unwrap_or(match table.dtype() {
                    DType::F16 => 2e-3,
                    DType::BF16 => 8e-3,
                    _ => 1e-3,
                });
                let worst = block.max_difference(table)?;
                if worst > tolerance {
                    bail!("checkpoint tensor {name} is not the {:?} encoding of this config: values differ by up to {worst:.3e} (tolerance {tolerance:e})", cfg.spec(d))
                }
            }
            StoredTable::Load { .. } => {
                block.table = Table::Stored(table.to_dtype(block.dtype())?);
                block.position_limit = rows;
            }
        }
        Ok(block)
    }

    /// The largest difference between `table` and the generated rows `0 .. rows`, ignoring the
    /// padding row in padding-aware mode (fairseq stores it as zeros).
    fn max_difference(&self, table: &Tensor) -> Result<f64> {
        let Table::Generated(cache) = &self.table else {
            bail!("internal: max_difference needs a generated table")
        };
        let rows = table.dim(0)?;
        let generated = cache
            .encoding()
            .range(0, rows, DType::F64, table.device())?;
        let diff = (table.to_dtype(DType::F64)? - generated)?.abs()?.max(1)?;
        let mut diff = diff.to_vec1::<f64>()?;
        if let (PositionMode::PaddingAware, Some(pad)) = (self.mode, self.padding_idx) {
            if let Some(row) = diff.get_mut(pad as usize) {
                *row = 0.0;
            }
        }
        Ok(diff.into_iter().fold(0.0, f64::max))
    }

    /// The same block with the encoding built by `backend`: `TableBackend::Generic` turns off the
    /// fused CPU forward (candle ops everywhere, as on CUDA). The result has a cache of its own,
    /// not shared with `self`.
    pub fn with_backend(mut self, backend: TableBackend) -> Self {
        if let Table::Generated(cache) = &self.table {
            let encoding = cache.encoding().clone().with_backend(backend);
            self.table = Table::Generated(PeCache::new(encoding).with_limit(cache.limit()));
        }
        self
    }

    /// The token embedding.
    pub fn embedding(&self) -> &Embedding {
        &self.embedding
    }

    /// The width `d`.
    pub fn width(&self) -> usize {
        self.embedding.hidden_size()
    }

    /// The vocabulary size.
    pub fn vocab(&self) -> usize {
        self.embedding.embeddings().dim(0).unwrap_or(0)
    }

    /// The dtype of the output (the embedding's).
    pub fn dtype(&self) -> DType {
        self.embedding.embeddings().dtype()
    }

    /// The factor on token embeddings.
    pub fn embedding_scale(&self) -> f64 {
        self.embedding_scale
    }

    /// The positional cache shared by clones of this block (`None` with a loaded stored table).
    pub fn cache(&self) -> Option<&PeCache> {
        match &self.table {
            Table::Generated(cache) => Some(cache),
            Table::Stored(_) => None,
        }
    }

    /// The block for token ids `(batch, seq)` whose first token is at `offset` (the number of
    /// tokens already in the KV cache). In padding-aware mode `offset` is fairseq's past length.
    pub fn forward_with_offset(&self, ids: &Tensor, offset: usize) -> Result<Tensor> {
        let (_, seq) = self.check_ids("ids", ids)?;
        match self.mode {
            PositionMode::Plain => {
                let end = offset as u128 + seq as u128;
                if end > self.position_limit as u128 {
                    bail!("offset {offset} + sequence length {seq} = {end} exceeds the {} positions this block supports", self.position_limit)
                }
                self.forward_impl(ids, TokenPositions::Offset(offset))
            }
            PositionMode::PaddingAware => {
                let pad = self.padding_idx.unwrap_or_default();
                let positions = candle_pe_core::padding_aware_positions(ids, pad, offset)?;
                self.forward_at(ids, &positions)
            }
        }
    }

    /// The block for token ids `(batch, seq)` at explicit integer positions of the same shape
    /// (in padding-aware mode, positions equal to `padding_idx` get no encoding).
    pub fn forward_at(&self, ids: &Tensor, positions: &impl ToPositions) -> Result<Tensor> {
        self.check_ids("ids", ids)?;
        let positions = positions.to_positions()?;
        if positions.dims() != ids.dims() {
            bail!(
                "positions have shape {:?}, expected the shape of ids {:?}",
                positions.dims(),
                ids.dims()
            )
        }
        if let Some(max) = positions
            .max()
            .filter(|&max| max >= self.position_limit as i64)
        {
            bail!(
                "position {max} is outside 0 .. {} for this block",
                self.position_limit
            )
        }
        let positions = &positions;
        let positions = match (self.mode, self.padding_idx) {
            (PositionMode::PaddingAware, Some(padding_idx)) => TokenPositions::PaddedIds {
                positions,
                padding_idx,
            },
            _ => TokenPositions::Ids(positions),
        };
        self.forward_impl(ids, positions)
    }

    /// Checks rank and dtype; returns `(batch, seq)`.
    fn check_ids(&self, name: &str, t: &Tensor) -> Result<(usize, usize)> {
        if !t.dtype().is_int() {
            bail!(
                "{name} must be an integer tensor, got dtype {:?}",
                t.dtype()
            )
        }
        match t.dims() {
            &[batch, seq] => Ok((batch, seq)),
            dims => bail!("{name} must have shape (batch, seq), got {dims:?}"),
        }
    }

    fn forward_impl(&self, ids: &Tensor, positions: TokenPositions) -> Result<Tensor> {
        let weights = self.embedding.embeddings();
        let table = match &self.table {
            Table::Generated(cache) => {
                return Ok(cache.embed(weights, ids, positions, self.embedding_scale)?)
            }
            Table::Stored(table) => table,
        };
        // The fused path checks the tokens in pe-core's embed; this one the same way.
        candle_pe_core::check_tokens(ids, self.vocab())?;
        // Half-precision blocks add in f32 and round once at the end.
        let dtype = self.dtype();
        let compute = match dtype {
            DType::F16 | DType::BF16 => DType::F32,
            other => other,
        };
        let x = self
            .embedding
            .forward(ids)?
            .to_dtype(compute)?
            .affine(self.embedding_scale, 0.0)?;
        let pe = match positions {
            TokenPositions::Offset(offset) => table.narrow(0, offset, ids.dim(1)?)?,
            TokenPositions::Ids(p) | TokenPositions::PaddedIds { positions: p, .. } => {
                let p = p.tensor();
                let flat = table.index_select(&p.flatten_all()?.to_dtype(DType::U32)?, 0)?;
                flat.reshape((p.dim(0)?, p.dim(1)?, self.width()))?
            }
        };
        x.broadcast_add(&pe.to_dtype(compute)?)?.to_dtype(dtype)
    }
}

impl Module for SinusoidalEmbedding {
    /// The block for token ids `(batch, seq)` at offset 0.
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        self.forward_with_offset(ids, 0)
    }
}
