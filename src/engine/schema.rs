//! The session's default schema over a dataset: the tables the dataset holds,
//! and for each catalog table it lacks, the error a query naming it gets
//! (raised while the query is planned, so nothing runs and nothing empty is
//! printed).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::error::{DataFusionError, Result};

use crate::error::Error;

/// Wraps the session's default schema; names in `absent` are errors.
#[derive(Debug)]
pub struct DatasetSchema {
    inner: Arc<dyn SchemaProvider>,
    /// Table name -> (what is missing, what to do).
    absent: HashMap<String, (String, String)>,
}

impl DatasetSchema {
    /// `inner` with the tables of `absent` refused by name.
    pub fn new(inner: Arc<dyn SchemaProvider>, absent: HashMap<String, (String, String)>) -> Self {
        DatasetSchema { inner, absent }
    }

    /// The wrapped schema.
    pub fn inner(&self) -> Arc<dyn SchemaProvider> {
        Arc::clone(&self.inner)
    }
}

#[async_trait]
impl SchemaProvider for DatasetSchema {
    fn table_names(&self) -> Vec<String> {
        self.inner.table_names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        match self.inner.table(name).await? {
            Some(t) => Ok(Some(t)),
            None => match self.absent.get(name) {
                Some((what, hint)) => {
                    Err(DataFusionError::External(Box::new(Error::NotFound { what: what.clone(), hint: hint.clone() })))
                }
                None => Ok(None),
            },
        }
    }

    fn register_table(&self, name: String, table: Arc<dyn TableProvider>) -> Result<Option<Arc<dyn TableProvider>>> {
        self.inner.register_table(name, table)
    }

    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        self.inner.deregister_table(name)
    }

    fn table_exist(&self, name: &str) -> bool {
        self.inner.table_exist(name)
    }
}
