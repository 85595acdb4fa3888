//! A BERT encoder's forward pass over one text at a time, as the built-in model runs it
//! ([`super::local`]). One unpadded text needs no attention mask, so none is built or
//! broadcast; the query, key and value projections are one product, with the attention's
//! `1/√d` scale folded into the query's weights at load time. The layers are BERT's
//! (Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers for Language
//! Understanding", 2019), read with the tensor names of Hugging Face's `BertModel`.

use candle_core::{Device, Module, Result, Tensor};
use candle_nn::{LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

/// The activation between a layer's two feed-forward products (`hidden_act` in
/// `config.json`, named as Hugging Face's `transformers` names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Activation {
    /// GELU with the exact error function.
    #[serde(rename = "gelu")]
    Gelu,
    /// GELU by its tanh approximation.
    #[serde(alias = "gelu_new", alias = "gelu_fast", rename = "gelu_pytorch_tanh")]
    GeluTanh,
    #[serde(rename = "relu")]
    Relu,
}

/// The fields of a BERT `config.json` the forward pass reads; others are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    /// Longest input in tokens the position embeddings cover.
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
}

struct Layer {
    /// Query, key and value in one projection, query first.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    up: Linear,
    down: Linear,
    out_norm: LayerNorm,
}

/// The encoder's weights, ready to run.
pub struct BertEncoder {
    word: Tensor,
    position: Tensor,
    /// The embedding of token type 0, the only type a single text has.
    token_type: Tensor,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    hidden: usize,
    activation: Activation,
}

fn linear(vb: VarBuilder, inputs: usize, outputs: usize) -> Result<(Tensor, Tensor)> {
    Ok((
        vb.get((outputs, inputs), "weight")?,
        vb.get(outputs, "bias")?,
    ))
}

fn layer_norm(vb: VarBuilder, size: usize, eps: f64) -> Result<LayerNorm> {
    Ok(LayerNorm::new(
        vb.get(size, "weight")?,
        vb.get(size, "bias")?,
        eps,
    ))
}

impl BertEncoder {
    /// Reads the weights `config` describes from `vb`, under `embeddings.` and `encoder.` or
    /// the same under `bert.`. Errors: a tensor is missing or of another shape, or the
    /// hidden size is not a multiple of the heads.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let hidden = config.hidden_size;
        let heads = config.num_attention_heads;
        if heads == 0 || !hidden.is_multiple_of(heads) {
            candle_core::bail!(
                "hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
            );
        }
        let eps = config.layer_norm_eps;
        let e = vb.pp("embeddings");
        let word = e.get((config.vocab_size, hidden), "word_embeddings.weight")?;
        let position = e.get(
            (config.max_position_embeddings, hidden),
            "position_embeddings.weight",
        )?;
        let token_type = e
            .get(
                (config.type_vocab_size, hidden),
                "token_type_embeddings.weight",
            )?
            .get(0)?;
        let embeddings_norm = layer_norm(e.pp("LayerNorm"), hidden, eps)?;
        let scale = 1.0 / ((hidden / heads) as f64).sqrt();
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let l = vb.pp(format!("encoder.layer.{i}"));
                let a = l.pp("attention");
                let (qw, qb) = linear(a.pp("self.query"), hidden, hidden)?;
                let (kw, kb) = linear(a.pp("self.key"), hidden, hidden)?;
                let (vw, vb_) = linear(a.pp("self.value"), hidden, hidden)?;
                let qkv = Linear::new(
                    Tensor::cat(&[(qw * scale)?, kw, vw], 0)?,
                    Some(Tensor::cat(&[(qb * scale)?, kb, vb_], 0)?),
                );
                let (ow, ob) = linear(a.pp("output.dense"), hidden, hidden)?;
                let (uw, ub) =
                    linear(l.pp("intermediate.dense"), hidden, config.intermediate_size)?;
                let (dw, db) = linear(l.pp("output.dense"), config.intermediate_size, hidden)?;
                Ok(Layer {
                    qkv,
                    attention_out: Linear::new(ow, Some(ob)),
                    attention_norm: layer_norm(a.pp("output.LayerNorm"), hidden, eps)?,
                    up: Linear::new(uw, Some(ub)),
                    down: Linear::new(dw, Some(db)),
                    out_norm: layer_norm(l.pp("output.LayerNorm"), hidden, eps)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            word,
            position,
            token_type,
            embeddings_norm,
            layers,
            heads,
            hidden,
            activation: config.hidden_act,
        })
    }

    /// The last layer's states of the tokens `ids` (special tokens included), one row per
    /// token: shape `(ids.len(), hidden_size)`. Errors: no ids, more ids than position
    /// embeddings, or an id outside the vocabulary.
    pub fn forward(&self, ids: &[u32]) -> Result<Tensor> {
        self.forward_paced(ids, &mut || {})
    }

    /// [`BertEncoder::forward`], calling `pause` before each matrix product of each layer
    /// (five a layer), so that a caller can wait between them.
    pub fn forward_paced(&self, ids: &[u32], pause: &mut dyn FnMut()) -> Result<Tensor> {
        let n = ids.len();
        if n == 0 || n > self.position.dim(0)? {
            candle_core::bail!(
                "{n} tokens: between 1 and {} are read",
                self.position.dim(0)?
            );
        }
        let (hidden, heads) = (self.hidden, self.heads);
        let head_size = hidden / heads;
        let x = self
            .word
            .index_select(&Tensor::new(ids, &Device::Cpu)?, 0)?;
        let x = (x + self.position.narrow(0, 0, n)?)?.broadcast_add(&self.token_type)?;
        let mut x = self.embeddings_norm.forward(&x)?;
        for layer in &self.layers {
            pause();
            let qkv = layer.qkv.forward(&x)?;
            // (tokens, 3 · hidden) → three (heads, tokens, head size).
            let head = |i: usize| {
                qkv.narrow(1, i * hidden, hidden)?
                    .reshape((n, heads, head_size))?
                    .transpose(0, 1)?
                    .contiguous()
            };
            let (q, k, v) = (head(0)?, head(1)?, head(2)?);
            pause();
            let probs = candle_nn::ops::softmax_last_dim(&q.matmul(&k.t()?)?)?;
            let context = probs
                .matmul(&v)?
                .transpose(0, 1)?
                .contiguous()?
                .reshape((n, hidden))?;
            pause();
            let attended = layer
                .attention_norm
                .forward(&(layer.attention_out.forward(&context)? + &x)?)?;
            pause();
            let up = layer.up.forward(&attended)?;
            let up = match self.activation {
                Activation::Gelu => up.gelu_erf()?,
                Activation::GeluTanh => up.gelu()?,
                Activation::Relu => up.relu()?,
            };
            pause();
            x = layer
                .out_norm
                .forward(&(layer.down.forward(&up)? + &attended)?)?;
        }
        Ok(x)
    }
}
