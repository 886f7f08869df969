//! Where a scheduled run's listings of its sources stopped (`_listing.json`
//! in the dataset), for buckets whose keys sort by time (LiteLLM's date
//! folders, Bedrock's `YYYY/MM/DD/HH`): with `[ingest] list_after_last`, a
//! run lists each source in a store from after the last key the runs before
//! it listed (S3's `start-after`) instead of the whole bucket, and every
//! `full_listing_every`-th run lists it all, to catch objects written late
//! under keys that sort before that one. The manifest still decides what is
//! new, so a key listed twice is never ingested twice; the state is written
//! after the run's commit, so a run that fails lists from the same key again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dataset::DatasetRoot;
use crate::error::{Error, Result};
use crate::ingest::source::ListedUpTo;

/// The side file's name.
pub const LISTING: &str = "_listing.json";

/// Runs between two full listings by default.
pub const DEFAULT_FULL_LISTING_EVERY: u32 = 24;

/// What `_listing.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListingState {
    /// Per source, the last key listed.
    pub after: BTreeMap<String, String>,
    /// Runs since the last full listing.
    pub runs_since_full: u32,
}

impl ListingState {
    /// The dataset's state (none yet: empty, so the first run lists all).
    pub fn load(dataset: &DatasetRoot, rt: &tokio::runtime::Runtime) -> Result<Self> {
        match dataset.read_side_file(LISTING, rt)? {
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| Error::Json { path: LISTING.into(), source })
            }
            None => Ok(ListingState::default()),
        }
    }

    /// Where this run lists each source from: nowhere (a full listing) on
    /// the first run and once `every` runs have listed from where the last
    /// stopped, else from the last key listed.
    pub fn starts(&self, every: u32) -> ListedUpTo {
        if self.after.is_empty() || self.runs_since_full + 1 >= every {
            return ListedUpTo::new();
        }
        self.after.clone()
    }

    /// The state after a run that listed from `starts` (empty: a full
    /// listing) up to `listed`: each source's last key, or the one before
    /// where it listed nothing.
    pub fn after_run(&self, starts: &ListedUpTo, listed: ListedUpTo) -> ListingState {
        let full = starts.is_empty();
        let mut after = if full { BTreeMap::new() } else { self.after.clone() };
        for (source, key) in listed {
            let entry = after.entry(source).or_default();
            if key > *entry {
                *entry = key;
            }
        }
        ListingState { after, runs_since_full: if full { 0 } else { self.runs_since_full + 1 } }
    }

    /// Writes the state to the dataset.
    pub fn save(&self, dataset: &DatasetRoot, rt: &tokio::runtime::Runtime) -> Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(|source| Error::Json { path: LISTING.into(), source })?;
        dataset.write_side_file(LISTING, json, rt)
    }
}

#[cfg(test)]
mod tests {
    use super::ListingState;
    use crate::ingest::source::ListedUpTo;

    fn keys(pairs: &[(&str, &str)]) -> ListedUpTo {
        pairs.iter().map(|(s, k)| (s.to_string(), k.to_string())).collect()
    }

    /// Every 3rd run lists everything: the first (no state), then after two
    /// runs listing from the last key; a source that listed nothing keeps
    /// its key, and a full listing starts the keys afresh.
    #[test]
    fn every_nth_run_lists_everything_and_the_others_start_after_the_last_key() {
        let s3 = "s3://logs/litellm/";
        let first = ListingState::default();
        assert!(first.starts(3).is_empty());
        let one = first.after_run(&first.starts(3), keys(&[(s3, "litellm/2026/01/01/b.json")]));
        assert_eq!((one.runs_since_full, one.starts(3)), (0, keys(&[(s3, "litellm/2026/01/01/b.json")])));
        let two = one.after_run(&one.starts(3), keys(&[(s3, "litellm/2026/01/02/c.json")]));
        assert_eq!((two.runs_since_full, two.starts(3)), (1, keys(&[(s3, "litellm/2026/01/02/c.json")])));
        let three = two.after_run(&two.starts(3), ListedUpTo::new());
        assert_eq!(three.after, keys(&[(s3, "litellm/2026/01/02/c.json")]));
        assert!(three.starts(3).is_empty(), "{three:?}");
        let full = three.after_run(&three.starts(3), keys(&[(s3, "litellm/2026/01/01/z.json")]));
        assert_eq!((full.runs_since_full, full.after), (0, keys(&[(s3, "litellm/2026/01/01/z.json")])));
    }
}
