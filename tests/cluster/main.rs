//! Work spread out: a Ballista cluster, scheduled runs, the dashboard in Chromium.
//!
//! One test binary per area, each area's files as modules: every binary
//! links DataFusion, so a few binaries build and link far faster than one
//! per file (docs/ARCHITECTURE.md, "Tests").

#[path = "../common/mod.rs"]
mod common;
#[path = "../dashboard_support/mod.rs"]
mod dashboard_support;

mod alerts;
mod cluster_faults;
mod dashboard;
mod distributed;
mod export_faults;
mod loopback;
mod readers_during_writes;
mod scheduled;
mod serve;
