//! [`Rope`]: a checked [`RopeConfig`] that builds the cos and sin tables of
//! `candle_nn::rotary_emb::{rope, rope_i, rope_thd}`.
//!
//! A rotary table is a sinusoidal table with the rope type's frequencies: `cos[p, i] =
//! a cos(p w_i)`, `sin[p, i] = a sin(p w_i)` (`a` the attention factor, 1 for most types), so it
//! is built by the same exact generators as the sinusoidal tables.
//!
//! ```
//! use candle_core::{DType, Device};
//! use pe_core::rope::{Rope, RopeConfig};
//!
//! let rope = Rope::new(RopeConfig::new(128, 500_000.0))?;
//! let (cos, sin) = rope.tables(100_000, 16, DType::BF16, &Device::Cpu)?;
//! assert_eq!((cos.dims(), sin.dims()), (&[16, 64][..], &[16, 64][..]));
//! # Ok::<(), pe_core::Error>(())
//! ```

use std::sync::Arc;

use candle_core::{DType, Device, Tensor};

use super::config::RopeConfig;
use super::types::{invalid, positive, Context};
use crate::describe::freq::Plan;
use crate::describe::positions::{self, Request};
use crate::generate::{Backend, Generator};
use crate::{Error, Result, MAX_WIDTH};

/// A checked [`RopeConfig`], ready to build cos/sin tables.
#[derive(Clone, Debug)]
pub struct Rope {
    config: RopeConfig,
    backend: Backend,
    /// The generator of every sequence up to `fixed_up_to` positions.
    fixed: Arc<Generator>,
    fixed_up_to: Option<usize>,
}

impl Rope {
    /// Checks `config`: head and rotary widths, `rope_theta`, and the rope type's parameters.
    pub fn new(config: RopeConfig) -> Result<Self> {
        positive("rope_theta", config.rope_theta)?;
        let p = config.partial_rotary_factor;
        if !(p > 0.0 && p <= 1.0) {
            return Err(invalid("partial_rotary_factor", "in (0, 1]", p));
        }
        if config.head_dim > MAX_WIDTH {
            return Err(Error::InvalidWidth {
                width: config.head_dim,
                max: MAX_WIDTH,
            });
        }
        let dim = config.rotary_dim();
        if dim < 2 || dim % 2 == 1 {
            return Err(invalid(
                "head_dim * partial_rotary_factor (the rotary dim)",
                "even and at least 2",
                dim as f64,
            ));
        }
        let ctx = context(&config, 0);
        let formula = config.rope_type.formula();
        formula.check(&ctx)?;
        let fixed_up_to = formula.fixed_up_to(&ctx);
        let fixed = Arc::new(generator(&config, Backend::Auto, 0)?);
        Ok(Self {
            config,
            backend: Backend::Auto,
            fixed,
            fixed_up_to,
        })
    }

    /// The same rope built by another generator.
    pub fn with_backend(mut self, backend: Backend) -> Self {
        let plan = self.fixed.plan().clone();
        self.fixed = Arc::new(Generator::new(plan, backend));
        self.backend = backend;
        self
    }

    /// The config.
    pub fn config(&self) -> &RopeConfig {
        &self.config
    }

    /// The generator in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Columns of each table: `rotary_dim / 2`.
    pub fn half_dim(&self) -> usize {
        self.config.rotary_dim() / 2
    }

    /// The longest sequence whose tables are those of any shorter one, `None` when the
    /// frequencies never depend on the length (all rope types but dynamic NTK).
    pub fn fixed_up_to(&self) -> Option<usize> {
        self.fixed_up_to
    }

    /// The attention factor the tables include (YaRN's, as HF's tables do); 1 for most types.
    pub fn attention_scaling(&self) -> f64 {
        self.fixed.plan().amplitude()
    }

    /// The angular frequencies `w_i` for a sequence of `seq_len` positions, rounded to f64 (the
    /// tables use them to double-double precision).
    pub fn inv_freq(&self, seq_len: usize) -> Vec<f64> {
        let ctx = context(&self.config, seq_len);
        let w = self.config.rope_type.formula().frequencies(&ctx);
        w.into_iter().map(|w| w.to_f64()).collect()
    }

    /// `(cos, sin)` for positions `offset .. offset + len`, each `(len, rotary_dim / 2)` and
    /// contiguous, as `candle_nn::rotary_emb::rope` takes them. The frequencies are those of a
    /// sequence of `offset + len` positions.
    pub fn tables(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        self.build(positions::range(offset, len)?, dtype, device)
    }

    /// `(cos, sin)` for integer position ids of any shape, each `ids.dims() + [rotary_dim / 2]`;
    /// the frequencies are those of a sequence reaching the largest id.
    pub fn tables_for_ids(&self, ids: &Tensor, dtype: DType) -> Result<(Tensor, Tensor)> {
        self.build(positions::ids(ids)?, dtype, ids.device())
    }

    fn build(&self, request: Request, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
        let h = self.half_dim();
        if request.n_rows() == 0 {
            // Fresh empty tables: a narrowed view of an empty one would point past its storage.
            crate::generate::check_dtype(dtype)?;
            let mut shape = request.lead.clone();
            shape.push(h);
            let empty = Tensor::zeros(shape, dtype, device)?;
            return Ok((empty.clone(), empty));
        }
        match self.fixed_up_to {
            Some(limit) if request.end > limit => {
                generator(&self.config, self.backend, request.end)?.halves(&request, dtype, device)
            }
            _ => self.fixed.halves(&request, dtype, device),
        }
    }
}

fn context(config: &RopeConfig, seq_len: usize) -> Context {
    Context {
        rope_theta: config.rope_theta,
        rotary_dim: config.rotary_dim(),
        max_position_embeddings: config.max_position_embeddings,
        seq_len,
    }
}

/// The generator of `config`'s tables for a sequence of `seq_len` positions.
fn generator(config: &RopeConfig, backend: Backend, seq_len: usize) -> Result<Generator> {
    let ctx = context(config, seq_len);
    let formula = config.rope_type.formula();
    let plan = Plan::from_frequencies(&formula.frequencies(&ctx), formula.attention_factor(&ctx))?;
    Ok(Generator::new(plan, backend))
}
