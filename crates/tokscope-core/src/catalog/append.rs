//! How a row a format makes reaches its table without the reader naming the
//! table: the row says which table it belongs to and how it is appended
//! ([`TableRow`]), every `table!` builder can be held without its type
//! ([`TableBuilder`]), and the reader keeps one builder per table that a
//! slice of lines gave rows to.
//!
//! `requests`, `tokens` and `profiles` (whose rows also make `tokens` rows,
//! and which the reader sizes from the last slice) are appended by the
//! reader itself; every other table a format fills goes through these
//! traits. Adding such a table: its module here (a `table!` declaration, the
//! row type and its [`TableRow`] impl), the format that makes its rows
//! (`Row::table(row)`), and its line in [`super::CATALOG`].

use std::any::Any;
use std::fmt::Debug;

use arrow_array::RecordBatch;

use super::TableDef;
use crate::error::Result;
use crate::record::LineOrigin;
use crate::redact::Redactor;

/// A `table!` builder seen without its type (the macro implements it).
pub trait TableBuilder: Send + Any {
    /// The table it builds.
    fn def(&self) -> &'static TableDef;
    /// Rows appended since the last [`TableBuilder::finish`].
    fn rows(&self) -> usize;
    /// The rows appended so far as one batch; the builder starts empty again.
    fn finish_batch(&mut self) -> Result<RecordBatch>;
    /// The builder itself, for a row to append to it by its own type.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A `table!` builder by its type: the table it builds, known at compile time.
pub trait DeclaredTable: TableBuilder + Default {
    /// The table's catalog entry.
    const TABLE: &'static TableDef;
}

/// A row of one table, as a format makes it.
pub trait TableRow: Debug + Send + 'static {
    /// The builder of the row's table.
    type Builder: DeclaredTable;

    /// Appends the row. Returns its `date` partition (days since the epoch)
    /// when the table is partitioned by date, else `None`.
    fn append(&self, builder: &mut Self::Builder, origin: &LineOrigin<'_>, redaction: &Redactor) -> Option<i32>;
}

/// A [`TableRow`] of any table, as a format's `Row::Table` holds it.
pub trait AnyTableRow: Debug + Send {
    /// The row's table.
    fn table(&self) -> &'static TableDef;
    /// An empty builder of the row's table.
    fn new_builder(&self) -> Box<dyn TableBuilder>;
    /// Appends the row to `builder`, which must build [`AnyTableRow::table`];
    /// returns the row's `date` partition, if its table has one.
    fn append_to(
        &self,
        builder: &mut dyn TableBuilder,
        origin: &LineOrigin<'_>,
        redaction: &Redactor,
    ) -> Result<Option<i32>>;
    /// The row by its own type (for callers that know it).
    fn as_any(&self) -> &dyn Any;
}

impl<R: TableRow> AnyTableRow for R {
    fn table(&self) -> &'static TableDef {
        R::Builder::TABLE
    }

    fn new_builder(&self) -> Box<dyn TableBuilder> {
        Box::new(R::Builder::default())
    }

    fn append_to(
        &self,
        builder: &mut dyn TableBuilder,
        origin: &LineOrigin<'_>,
        redaction: &Redactor,
    ) -> Result<Option<i32>> {
        let (held, wanted) = (builder.def().name, R::Builder::TABLE.name);
        let typed = builder
            .as_any_mut()
            .downcast_mut::<R::Builder>()
            .ok_or_else(|| internal_err!("a {wanted} row was given the builder of {held}"))?;
        Ok(self.append(typed, origin, redaction))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
