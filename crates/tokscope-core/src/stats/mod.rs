//! Statistics shared by the SQL functions and jobs: pure functions over
//! plain values, each the one implementation of a definition in
//! `docs/metrics.md`.

pub mod bleu;
pub mod bootstrap;
pub mod kl;
