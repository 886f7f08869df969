//! The files of a Hugging Face model directory, parsed and validated before
//! any weight is used: `config.json` ([`config`]), `tokenizer.json`
//! ([`tokenizer`]) and safetensors checkpoints ([`tensors`]). The replay
//! decoder (`tokscope::replay`) builds on them; they live here so that they
//! are fuzzed without the query engine. Behind the `model` feature.

pub mod config;
pub mod tensors;
pub mod tokenizer;
