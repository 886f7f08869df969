//! Which breaches were already notified: `_alerts.json` beside the
//! dataset's `_manifest.jsonl`, replaced whole the way the other side files
//! are (a temporary file renamed over it locally, one put on an object
//! store), under the run's lease.
//!
//! A breach found by a run is recorded `pending` before the export is
//! published, and `notified` once `on_alert` succeeded (or, without
//! `on_alert`, once the export holding it is published). A run killed in
//! between leaves it pending, and the next run that still finds it sends it
//! then: one notification overall. A breach no longer found is forgotten,
//! so when it recurs it fires again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Alert;
use crate::dataset::DatasetRoot;
use crate::error::{Error, Result};

/// The state file's name in the dataset's root.
pub const STATE_FILE: &str = "_alerts.json";

/// Where a breach stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Found, not yet notified: the next run sends it if it still holds.
    Pending,
    /// Notified: not sent again while it lasts.
    Notified,
}

/// One recorded breach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Breach {
    /// Where it stands.
    pub status: Status,
    /// When a run first found it (RFC 3339, UTC).
    pub since: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StateFile {
    version: u32,
    breaches: BTreeMap<String, Breach>,
}

/// The breaches recorded with a dataset, by alert id.
#[derive(Debug, Default)]
pub struct AlertState {
    breaches: BTreeMap<String, Breach>,
    changed: bool,
}

impl AlertState {
    /// Reads the dataset's state (none yet: nothing recorded).
    pub fn load(dataset: &DatasetRoot, rt: &tokio::runtime::Runtime) -> Result<Self> {
        let Some(bytes) = dataset.read_side_file(STATE_FILE, rt)? else { return Ok(Self::default()) };
        let file: StateFile =
            serde_json::from_slice(&bytes).map_err(|source| Error::Json { path: STATE_FILE.into(), source })?;
        Ok(AlertState { breaches: file.breaches, changed: false })
    }

    /// Records the breaches active now: a new one pending, one no longer
    /// active forgotten. Sets each alert's `since` and `fired` (new or still
    /// pending) and returns the ids fired, in `active`'s order.
    pub fn observe(&mut self, active: &mut [Alert], now: &str) -> Vec<String> {
        let before = self.breaches.len();
        self.breaches.retain(|id, _| active.iter().any(|a| &a.id == id));
        self.changed |= self.breaches.len() != before;
        let mut fired = Vec::new();
        for alert in active.iter_mut() {
            let breach = self.breaches.entry(alert.id.clone()).or_insert_with(|| {
                self.changed = true;
                Breach { status: Status::Pending, since: now.to_string() }
            });
            alert.since = breach.since.clone();
            alert.fired = breach.status == Status::Pending;
            if alert.fired && !fired.contains(&alert.id) {
                fired.push(alert.id.clone());
            }
        }
        fired
    }

    /// Marks `ids` notified.
    pub fn notified(&mut self, ids: &[String]) {
        for id in ids {
            if let Some(breach) = self.breaches.get_mut(id).filter(|b| b.status != Status::Notified) {
                breach.status = Status::Notified;
                self.changed = true;
            }
        }
    }

    /// Writes the state if it changed since it was read or last saved.
    pub fn save(&mut self, dataset: &DatasetRoot, rt: &tokio::runtime::Runtime) -> Result<()> {
        if !self.changed {
            return Ok(());
        }
        let file = StateFile { version: 1, breaches: self.breaches.clone() };
        let bytes =
            serde_json::to_vec_pretty(&file).map_err(|source| Error::Json { path: STATE_FILE.into(), source })?;
        dataset.write_side_file(STATE_FILE, bytes, rt)?;
        self.changed = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(id: &str) -> Alert {
        Alert {
            id: id.to_string(),
            rule: "r".into(),
            kind: "threshold",
            job: "eos".into(),
            column: "c".into(),
            keys: Default::default(),
            value: 1.0,
            direction: "above",
            threshold: 0.0,
            budget: None,
            message: String::new(),
            since: String::new(),
            fired: false,
        }
    }

    #[test]
    fn a_breach_fires_until_notified_and_again_after_it_ended() {
        let mut state = AlertState::default();
        let mut active = vec![alert("a"), alert("b")];
        assert_eq!(state.observe(&mut active, "t1"), ["a", "b"]);
        // Not notified (a killed run): fired again, since kept.
        assert_eq!(state.observe(&mut active, "t2"), ["a", "b"]);
        assert_eq!(active[0].since, "t1");
        state.notified(&["a".to_string()]);
        assert_eq!(state.observe(&mut active, "t3"), ["b"]);
        assert!(!active[0].fired && active[1].fired);
        state.notified(&["b".to_string()]);
        assert!(state.observe(&mut active, "t4").is_empty());
        // `a` ends, then recurs: a new breach.
        assert!(state.observe(&mut [alert("b")], "t5").is_empty());
        let mut recurred = vec![alert("a"), alert("b")];
        assert_eq!(state.observe(&mut recurred, "t6"), ["a"]);
        assert_eq!(recurred[0].since, "t6");
    }
}
