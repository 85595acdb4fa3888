//! The built-in embedding model (`EMBEDDING_MODEL=local`): a sentence-transformers folder of a
//! BERT-family encoder (`config.json`, `tokenizer.json`, `model.safetensors`) run in-process on
//! the CPU with candle; mean pooling over the attention mask, then L2 normalisation, as the
//! model's own sentence-transformers pipeline does (docs/knowledge.md § Embeddings).
//!
//! The model runs on two rayon pools of its own, never on a tokio worker thread: chunk
//! batches on `EMBEDDING_THREADS` threads at the lowest scheduling priority, chat queries on
//! one thread at normal priority, so a query never waits behind chunk batches.

use std::{panic::AssertUnwindSafe, path::Path, sync::Arc};

use anyhow::{anyhow, bail, Context};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use sha2::{Digest, Sha256};
use tokenizers::{Tokenizer, TruncationParams};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::bert::{BertEncoder, Config as BertConfig};
use crate::foreground::Foreground;

/// Texts per chunk job; a job runs them one after another on one thread of the pool.
pub const LOCAL_BATCH: usize = 4;
/// Chunk batches queued or running at most; `embed` waits for a place beyond it.
pub const CHUNK_QUEUE: usize = 8;
/// Chat queries queued at most; past it a query fails at once (the chat uses BM25 alone).
pub const QUERY_QUEUE: usize = 64;

/// Chunk-batch threads when `EMBEDDING_THREADS` is unset: one per core. They run at the
/// lowest priority, so they take only the CPU time nothing else wants.
pub fn default_threads(cores: usize) -> usize {
    cores.max(1)
}

/// Puts the calling thread under Linux's `SCHED_IDLE` policy (sched(7)): it runs
/// only on a core no other thread wants, and any thread of the request runtimes that wakes up
/// takes the core from it at once. Elsewhere the thread keeps its priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{
            set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
            ThreadPriority, ThreadSchedulePolicy,
        };
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        if let Err(err) =
            set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle)
        {
            tracing::warn!(error = ?err, "could not lower the embedding thread's priority");
        }
    }
}

/// A loaded model: the encoder, its tokenizer (truncating to `max_tokens`) and its name.
pub struct LocalModel {
    bert: BertEncoder,
    tokenizer: Tokenizer,
    /// Longest input in tokens, special tokens included; longer texts are truncated.
    pub max_tokens: usize,
    /// `local:<folder name>:<first 12 hex digits of model.safetensors' SHA-256>` (the name
    /// of `EMBEDDING_MODEL_PATH`'s last component, as given): another model, or other weights
    /// under the same folder name, is another name, so its vectors are made anew.
    pub name: String,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("name", &self.name)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

fn read(dir: &Path, file: &str) -> anyhow::Result<Vec<u8>> {
    let path = dir.join(file);
    if !path.is_file() {
        bail!(
            "EMBEDDING_MODEL_PATH: {} has no {file} (a sentence-transformers folder has config.json, tokenizer.json and model.safetensors)",
            dir.display()
        );
    }
    std::fs::read(&path)
        .map_err(|e| anyhow!("EMBEDDING_MODEL_PATH: cannot read {}: {e}", path.display()))
}

fn json(dir: &Path, file: &str) -> anyhow::Result<serde_json::Value> {
    serde_json::from_slice(&read(dir, file)?).map_err(|e| {
        anyhow!(
            "EMBEDDING_MODEL_PATH: {} is not valid JSON: {e}",
            dir.join(file).display()
        )
    })
}

impl LocalModel {
    /// Loads the model in `dir`. Errors (one line naming `EMBEDDING_MODEL_PATH`): the folder
    /// or one of its files is missing, the model is not BERT, its pooling is not the mean, or
    /// a file cannot be parsed.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        if !dir.is_dir() {
            bail!(
                "EMBEDDING_MODEL_PATH: {} is not a folder (EMBEDDING_MODEL=local needs a sentence-transformers model folder)",
                dir.display()
            );
        }
        let config = json(dir, "config.json")?;
        let model_type = config["model_type"].as_str().unwrap_or("unknown");
        if model_type != "bert" {
            bail!(
                "EMBEDDING_MODEL_PATH: {} holds a model of type `{model_type}`; only BERT encoders (model_type \"bert\") are supported",
                dir.display()
            );
        }
        let bert_config: BertConfig = serde_json::from_value(config.clone()).map_err(|e| {
            anyhow!(
                "EMBEDDING_MODEL_PATH: {}/config.json is not a supported BERT configuration: {e}",
                dir.display()
            )
        })?;
        let pooling = dir.join("1_Pooling").join("config.json");
        if pooling.is_file() {
            let pooling = json(dir, "1_Pooling/config.json")?;
            if pooling["pooling_mode_mean_tokens"] != serde_json::Value::Bool(true) {
                bail!(
                    "EMBEDDING_MODEL_PATH: {} pools otherwise than by the mean of its tokens; only mean pooling is supported",
                    dir.display()
                );
            }
        }
        let mut max_tokens = bert_config.max_position_embeddings;
        if dir.join("sentence_bert_config.json").is_file() {
            let st = json(dir, "sentence_bert_config.json")?;
            if let Some(n) = st["max_seq_length"].as_u64() {
                max_tokens = max_tokens.min(n as usize);
            }
        }
        let mut tokenizer = Tokenizer::from_bytes(read(dir, "tokenizer.json")?).map_err(|e| {
            anyhow!(
                "EMBEDDING_MODEL_PATH: {}/tokenizer.json cannot be read as a tokenizer: {e}",
                dir.display()
            )
        })?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| anyhow!("EMBEDDING_MODEL_PATH: truncation to {max_tokens} tokens: {e}"))?;
        tokenizer.with_padding(None);
        let weights = read(dir, "model.safetensors")?;
        let digest = hex::encode(Sha256::digest(&weights));
        let folder = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .or_else(|| {
                let real = dir.canonicalize().ok()?;
                Some(real.file_name()?.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "model".into());
        let name = format!("local:{folder}:{}", &digest[..12]);
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu).map_err(
            |e| {
                anyhow!(
                    "EMBEDDING_MODEL_PATH: {}/model.safetensors cannot be read: {e}",
                    dir.display()
                )
            },
        )?;
        let bert = BertEncoder::load(vb, &bert_config).map_err(|e| {
            anyhow!(
                "EMBEDDING_MODEL_PATH: {}/model.safetensors does not hold the BERT weights config.json describes: {e}",
                dir.display()
            )
        })?;
        Ok(Self {
            bert,
            tokenizer,
            max_tokens,
            name,
        })
    }

    /// The token ids of `text`, special tokens added, truncated to [`LocalModel::max_tokens`].
    pub fn tokens(&self, text: &str) -> anyhow::Result<Vec<u32>> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| anyhow!("tokenizing failed: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The unit embeddings of `texts`, in order, computed on the calling thread (and the
    /// current rayon pool). Errors: tokenizing or a tensor operation failed.
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
        self.embed_paced(texts, &mut || {})
    }

    /// [`LocalModel::embed`], calling `pause` before each step of the model
    /// ([`BertEncoder::forward_paced`]).
    pub fn embed_paced(
        &self,
        texts: &[String],
        pause: &mut dyn FnMut(),
    ) -> anyhow::Result<Vec<Vec<f32>>> {
        texts
            .iter()
            .map(|text| self.embed_one(text, pause))
            .collect()
    }

    /// One text through the model alone: no padding, so no attention mask.
    fn embed_one(&self, text: &str, pause: &mut dyn FnMut()) -> anyhow::Result<Vec<f32>> {
        let hidden = self.bert.forward_paced(&self.tokens(text)?, pause)?;
        Ok(mean_normalized(&hidden)?)
    }
}

/// A sentence embedding from token states `hidden` (tokens, dims): their mean divided by its
/// L2 norm (sentence-transformers' `Pooling` with `pooling_mode_mean_tokens`, then
/// `Normalize`).
pub fn mean_normalized(hidden: &Tensor) -> candle_core::Result<Vec<f32>> {
    let mean = hidden.mean(0)?;
    let norm = mean.sqr()?.sum_all()?.sqrt()?.to_scalar::<f32>()?;
    (mean / f64::from(norm.max(1e-12)))?.to_vec1()
}

/// A job's answer: the vectors in order, or why the model failed.
type Answer = Result<Vec<Vec<f32>>, String>;

/// The model behind its two pools. Dropping it lets the queued jobs finish, then stops the
/// threads. Chunk batches are background work: each step waits for a gap in the instance's
/// [`Foreground`] work; a query is foreground work.
pub struct LocalEmbedder {
    model: Arc<LocalModel>,
    foreground: Arc<Foreground>,
    chunk_pool: rayon::ThreadPool,
    query_pool: rayon::ThreadPool,
    chunk_slots: Arc<Semaphore>,
    query_slots: Arc<Semaphore>,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("name", &self.name())
            .field("threads", &self.threads())
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir` and starts its pool of `threads` (`None`: [`default_threads`]);
    /// chunk batches yield to `foreground`. Errors: as [`LocalModel::load`], or the threads
    /// cannot be started.
    pub fn start(
        dir: &Path,
        threads: Option<usize>,
        foreground: Arc<Foreground>,
    ) -> anyhow::Result<Self> {
        let model = Arc::new(LocalModel::load(dir)?);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = threads.unwrap_or_else(|| default_threads(cores)).max(1);
        let chunk_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("embed-{i}"))
            .start_handler(|_| lower_priority())
            .build()
            .context("starting the embedding threads")?;
        let query_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "embed-query".into())
            .build()
            .context("starting the query embedding thread")?;
        Ok(Self {
            model,
            foreground,
            chunk_pool,
            query_pool,
            chunk_slots: Arc::new(Semaphore::new(CHUNK_QUEUE)),
            query_slots: Arc::new(Semaphore::new(QUERY_QUEUE)),
        })
    }

    /// The model's name ([`LocalModel::name`]).
    pub fn name(&self) -> &str {
        &self.model.name
    }

    /// Threads of the chunk-batch pool.
    pub fn threads(&self) -> usize {
        self.chunk_pool.current_num_threads()
    }

    /// Runs `texts` through the model on `pool`, holding the queue place `slot` until the
    /// job is over (or skipped because nobody waits for its answer any more).
    /// With `background`, each step of the model waits for its turn ([`crate::foreground::Gate::pause`]).
    fn run(
        &self,
        pool: &rayon::ThreadPool,
        texts: Vec<String>,
        slot: OwnedSemaphorePermit,
        background: bool,
    ) -> oneshot::Receiver<Answer> {
        let (reply, answer) = oneshot::channel();
        let model = self.model.clone();
        let mut gate = background.then(|| self.foreground.gate());
        pool.spawn(move || {
            if !reply.is_closed() {
                let mut pause = || {
                    if let Some(gate) = &mut gate {
                        gate.pause();
                    }
                };
                let _ = reply.send(run(&model, &texts, &mut pause));
            }
            drop(slot);
        });
        answer
    }

    /// The embeddings of `texts`, in order: in jobs of [`LOCAL_BATCH`], each queued for the
    /// chunk pool once one of [`CHUNK_QUEUE`] places is free. Errors: the model failed, with
    /// the reason.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let mut pending = Vec::new();
        for batch in texts.chunks(LOCAL_BATCH) {
            let permit = self
                .chunk_slots
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| "the embedding queue is closed".to_string())?;
            // The place goes with the batch and is given back when the model is done with
            // it, not when this caller reads the answer: a caller with more batches than
            // places would otherwise wait for itself.
            let answer = self.run(&self.chunk_pool, batch.to_vec(), permit, true);
            pending.push((batch.len(), answer));
        }
        let mut out = Vec::with_capacity(texts.len());
        for (len, answer) in pending {
            let vectors = answer
                .await
                .map_err(|_| "the embedding thread stopped".to_string())??;
            if vectors.len() != len {
                return Err("the model returned a vector count unlike the text count".into());
            }
            out.extend(vectors);
        }
        Ok(out)
    }

    /// The embedding of a chat query, on the query thread (never behind chunk batches, which
    /// wait while it runs). Errors: [`QUERY_QUEUE`] queries are already waiting, or the model
    /// failed.
    pub async fn embed_query(&self, text: &str) -> Result<Vec<f32>, String> {
        let slot = self
            .query_slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| format!("{QUERY_QUEUE} queries are already waiting"))?;
        let _busy = self.foreground.busy();
        let answer = self.run(&self.query_pool, vec![text.to_string()], slot, false);
        let mut vectors = answer
            .await
            .map_err(|_| "the embedding thread stopped".to_string())??;
        vectors
            .pop()
            .ok_or_else(|| "the model returned no vector".into())
    }
}

/// One job: the model's vectors for `texts`, or why it failed (a panic included).
fn run(model: &LocalModel, texts: &[String], pause: &mut dyn FnMut()) -> Answer {
    match std::panic::catch_unwind(AssertUnwindSafe(|| model.embed_paced(texts, pause))) {
        Ok(Ok(vectors)) => Ok(vectors),
        Ok(Err(err)) => Err(format!("{err:#}")),
        Err(_) => Err("the model panicked".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::{path::PathBuf, sync::Mutex};

    /// The reference model's folder, as `test_support::embedding_model_path` finds it (that
    /// crate depends on this one, so it cannot be used here).
    fn test_model_path() -> PathBuf {
        if let Some(path) = std::env::var_os("AGENTCHAT_TEST_EMBEDDING_MODEL_PATH") {
            return PathBuf::from(path);
        }
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        home.join(".cache/agentchat/models/all-MiniLM-L6-v2")
    }

    #[test]
    fn chunk_threads_default_to_every_core_at_the_lowest_priority() {
        assert_eq!(default_threads(0), 1);
        assert_eq!(default_threads(2), 2);
        assert_eq!(default_threads(16), 16);
        let embedder = LocalEmbedder::start(&reference(), Some(2), Arc::default()).unwrap();
        let policy = |pool: &rayon::ThreadPool| {
            pool.install(thread_priority::thread_schedule_policy)
                .unwrap()
        };
        let idle = thread_priority::ThreadSchedulePolicy::Normal(
            thread_priority::NormalThreadSchedulePolicy::Idle,
        );
        assert_eq!(
            policy(&embedder.chunk_pool),
            idle,
            "chunk batches run only on cores nothing else wants"
        );
        assert_ne!(policy(&embedder.query_pool), idle);
    }

    #[test]
    fn pooling_takes_the_mean_of_the_tokens_and_normalises() {
        // Three tokens in 2 dimensions: mean (2, 0), so (1, 0).
        let hidden =
            Tensor::from_vec(vec![1f32, 0., 3., 0., 2., 0.], (3, 2), &Device::Cpu).unwrap();
        let pooled = mean_normalized(&hidden).unwrap();
        assert!(
            (pooled[0] - 1.0).abs() < 1e-6 && pooled[1].abs() < 1e-6,
            "{pooled:?}"
        );
        // Not axis-aligned: (3, 4) / 5.
        let hidden = Tensor::from_vec(vec![3f32, 4., 3., 4.], (2, 2), &Device::Cpu).unwrap();
        let pooled = mean_normalized(&hidden).unwrap();
        assert!((pooled[0] - 0.6).abs() < 1e-6 && (pooled[1] - 0.8).abs() < 1e-6);
    }

    /// The reference model (scripts/setup.sh installs it); a test without it fails.
    pub(crate) fn reference() -> PathBuf {
        let path = test_model_path();
        assert!(
            path.join("model.safetensors").is_file(),
            "the reference embedding model (all-MiniLM-L6-v2) is not at {}: run scripts/setup.sh, or set AGENTCHAT_TEST_EMBEDDING_MODEL_PATH to its folder",
            path.display()
        );
        path
    }

    fn error_of(dir: &Path) -> String {
        LocalModel::load(dir).unwrap_err().to_string()
    }

    #[test]
    fn startup_errors_name_the_variable_and_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent");
        let err = error_of(&missing);
        assert!(
            err.starts_with("EMBEDDING_MODEL_PATH: ") && err.contains("is not a folder"),
            "{err}"
        );

        let err = error_of(dir.path());
        assert!(err.contains("has no config.json"), "{err}");

        std::fs::write(
            dir.path().join("config.json"),
            r#"{"model_type": "xlm-roberta"}"#,
        )
        .unwrap();
        let err = error_of(dir.path());
        assert!(
            err.contains("type `xlm-roberta`") && err.contains("only BERT"),
            "{err}"
        );

        std::fs::write(dir.path().join("config.json"), "not json").unwrap();
        let err = error_of(dir.path());
        assert!(err.contains("is not valid JSON"), "{err}");

        // A real configuration without the tokenizer or the weights.
        let reference = reference();
        std::fs::copy(
            reference.join("config.json"),
            dir.path().join("config.json"),
        )
        .unwrap();
        let err = error_of(dir.path());
        assert!(err.contains("has no tokenizer.json"), "{err}");
        std::fs::copy(
            reference.join("tokenizer.json"),
            dir.path().join("tokenizer.json"),
        )
        .unwrap();
        let err = error_of(dir.path());
        assert!(err.contains("has no model.safetensors"), "{err}");
        std::fs::write(dir.path().join("model.safetensors"), b"garbage").unwrap();
        let err = error_of(dir.path());
        assert!(err.contains("model.safetensors cannot be read"), "{err}");

        std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
        std::fs::write(
            dir.path().join("1_Pooling/config.json"),
            r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
        )
        .unwrap();
        let err = error_of(dir.path());
        assert!(err.contains("only mean pooling"), "{err}");
        for err in [error_of(&missing), error_of(dir.path())] {
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }

    #[test]
    fn embeddings_match_sentence_transformers_on_the_reference_sentences() {
        let fixture: serde_json::Value = serde_json::from_str(include_str!(
            "../../../tests/fixtures/embeddings/reference.json"
        ))
        .unwrap();
        let model = LocalModel::load(&reference()).unwrap();
        assert_eq!(
            model.max_tokens,
            fixture["maxSeqLength"].as_u64().unwrap() as usize
        );
        let folder = reference();
        let folder = folder.file_name().unwrap().to_string_lossy();
        assert_eq!(model.name, format!("local:{folder}:53aa51172d14"));
        let cases = fixture["cases"].as_array().unwrap();
        let texts: Vec<String> = cases
            .iter()
            .map(|c| c["text"].as_str().unwrap().to_string())
            .collect();
        // All in one call and one per call give the same.
        let together = model.embed(&texts).unwrap();
        for (i, case) in cases.iter().enumerate() {
            let want: Vec<f32> = case["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            let tokens = model.tokens(&texts[i]).unwrap().len();
            let untruncated = case["untruncatedTokens"].as_u64().unwrap() as usize;
            assert_eq!(tokens, untruncated.min(model.max_tokens), "case {i}");
            let alone = model
                .embed(std::slice::from_ref(&texts[i]))
                .unwrap()
                .remove(0);
            for got in [&together[i], &alone] {
                assert_eq!(got.len(), want.len());
                let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
                assert!((norm - 1.0).abs() < 1e-4, "case {i}: norm {norm}");
                let cos = crate::knowledge::search::vectors::cosine(got, &want);
                assert!(cos >= 0.999, "case {i} ({:?}): cosine {cos}", &texts[i]);
            }
        }
    }

    #[tokio::test]
    async fn a_query_goes_before_queued_chunk_batches() {
        let embedder = LocalEmbedder::start(&reference(), Some(1), Arc::default()).unwrap();
        let long = "word ".repeat(200);
        // Fill the queue with chunk batches, then ask a query: it is answered before the
        // chunk batches queued ahead of it.
        let texts: Vec<String> = (0..LOCAL_BATCH * CHUNK_QUEUE)
            .map(|_| long.clone())
            .collect();
        let done = Arc::new(Mutex::new(Vec::<&str>::new()));
        let chunks = {
            let done = done.clone();
            let embedder = &embedder;
            async move {
                embedder.embed(&texts).await.unwrap();
                done.lock().unwrap().push("chunks");
            }
        };
        let query = {
            let done = done.clone();
            let embedder = &embedder;
            async move {
                // Let the chunk batches be queued first.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                let v = embedder
                    .embed_query("When is my car due for service?")
                    .await
                    .unwrap();
                assert_eq!(v.len(), 384);
                done.lock().unwrap().push("query");
            }
        };
        tokio::join!(chunks, query);
        assert_eq!(*done.lock().unwrap(), ["query", "chunks"]);
    }

    #[tokio::test]
    async fn chunk_batches_wait_while_the_instance_is_busy_and_run_once_it_is_quiet() {
        let foreground = Arc::new(Foreground::default());
        let embedder = LocalEmbedder::start(&reference(), Some(1), foreground.clone()).unwrap();
        let texts = vec!["word ".repeat(200)];
        // The time of the text on a quiet instance (whatever this build's speed).
        let started = std::time::Instant::now();
        embedder.embed(&texts).await.unwrap();
        let quiet = started.elapsed();
        let busy = foreground.busy();
        let mut chunks = std::pin::pin!(embedder.embed(&texts));
        // Busy without a pause: forced steps only (a thirtieth of the text each, for 0.5 %
        // of a core), so three times the quiet time is far from enough; a query meanwhile is
        // answered.
        let early = tokio::time::timeout(3 * quiet, chunks.as_mut()).await;
        assert!(
            early.is_err(),
            "a chunk was embedded while the instance was busy"
        );
        assert_eq!(embedder.embed_query("a question").await.unwrap().len(), 384);
        drop(busy);
        let vectors = tokio::time::timeout(60 * quiet, chunks)
            .await
            .expect("the chunk is embedded once the instance is quiet")
            .unwrap();
        assert_eq!(vectors[0].len(), 384);
    }

    #[tokio::test]
    async fn a_call_with_more_batches_than_queue_places_completes() {
        let embedder = LocalEmbedder::start(&reference(), Some(1), Arc::default()).unwrap();
        // Three times the batches the queue holds: each place must come back as the model
        // finishes a batch, not when this caller reads its answers. The bound only tells a
        // wait on itself from slow progress: chunk threads run at `SCHED_IDLE`, so beside a
        // busy machine (a build, other tests) a debug build's batches take minutes.
        let texts: Vec<String> = (0..LOCAL_BATCH * CHUNK_QUEUE * 3)
            .map(|n| format!("sentence number {n}"))
            .collect();
        let vectors =
            tokio::time::timeout(std::time::Duration::from_secs(900), embedder.embed(&texts))
                .await
                .expect("embedding more batches than places must not wait for itself")
                .unwrap();
        assert_eq!(vectors.len(), texts.len());
        assert!(vectors.iter().all(|v| v.len() == 384));
    }
}
