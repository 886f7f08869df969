//! The interventions of causal mediation analysis on the replay decoder:
//! `interventions` (corrupt / restore / perturb through the replay hooks),
//! `trace` (the causal-tracing grid, with activation reuse), `layers` (each
//! layer changed in turn, measured by the total and the direct path) and
//! `bleu` (the BLEU-4 outcome over token ids). Measuring logged requests and storing the
//! rows is the `tokscope` crate's `mediation::mediate` and `mediation::table`.

pub mod bleu;
pub mod interventions;
pub mod layers;
pub mod trace;
