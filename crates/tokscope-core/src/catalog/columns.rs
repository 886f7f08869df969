//! Column types and the `table!` macro: one declaration per table gives its
//! Arrow schema, its documentation and a batch builder whose columns are
//! appended from the declared expressions.
//!
//! A column type ([`ColumnType`]) says how one Rust value becomes one Arrow
//! value; the macro generates, for each table, a builder struct with one
//! Arrow builder per column, so appending a row costs what hand-written
//! builder code costs (no dynamic dispatch, no intermediate `Value`).

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, ListBuilder,
    StringBuilder, StructBuilder, TimestampMicrosecondBuilder, UInt64Builder,
};
use arrow_schema::{DataType, Field, Fields, TimeUnit};

/// How values of one Rust type are appended to one Arrow column.
pub trait ColumnType {
    /// The Arrow builder of the column.
    type Builder: ArrayBuilder;
    /// The value appended for one row (borrowed where possible).
    type Value<'v>;
    /// The column's Arrow type.
    fn data_type() -> DataType;
    /// A new, empty builder.
    fn new_builder() -> Self::Builder;
    /// A new, empty builder with room for `rows` values of `bytes` bytes in
    /// all (`bytes` counts for variable-length values only; list columns,
    /// rare and short, start empty).
    fn builder_with_capacity(rows: usize, bytes: usize) -> Self::Builder {
        let _ = (rows, bytes);
        Self::new_builder()
    }
    /// Bytes of the variable-length values appended so far (0 for fixed-width
    /// and list columns).
    fn value_bytes(builder: &Self::Builder) -> usize {
        let _ = builder;
        0
    }
    /// Appends one value, or a null.
    fn append(builder: &mut Self::Builder, value: Option<Self::Value<'_>>);
}

macro_rules! primitive_column {
    ($(#[$doc:meta])* $name:ident, $builder:ty, $value:ty, $data_type:expr) => {
        $(#[$doc])*
        pub struct $name;
        impl ColumnType for $name {
            type Builder = $builder;
            type Value<'v> = $value;
            fn data_type() -> DataType {
                $data_type
            }
            fn new_builder() -> Self::Builder {
                <$builder>::new()
            }
            fn builder_with_capacity(rows: usize, _bytes: usize) -> Self::Builder {
                <$builder>::with_capacity(rows)
            }
            fn append(builder: &mut Self::Builder, value: Option<$value>) {
                builder.append_option(value)
            }
        }
    };
}

primitive_column!(
    /// 32-bit signed integers.
    Int32, Int32Builder, i32, DataType::Int32
);
primitive_column!(
    /// 64-bit signed integers.
    Int64, Int64Builder, i64, DataType::Int64
);
primitive_column!(
    /// 64-bit unsigned integers.
    UInt64, UInt64Builder, u64, DataType::UInt64
);
primitive_column!(
    /// 64-bit floats.
    Float64, Float64Builder, f64, DataType::Float64
);
primitive_column!(
    /// Booleans.
    Boolean, BooleanBuilder, bool, DataType::Boolean
);

/// UTF-8 strings.
pub struct Utf8;
impl ColumnType for Utf8 {
    type Builder = StringBuilder;
    type Value<'v> = &'v str;
    fn data_type() -> DataType {
        DataType::Utf8
    }
    fn new_builder() -> Self::Builder {
        StringBuilder::new()
    }
    fn builder_with_capacity(rows: usize, bytes: usize) -> Self::Builder {
        StringBuilder::with_capacity(rows, bytes)
    }
    fn value_bytes(builder: &Self::Builder) -> usize {
        builder.values_slice().len()
    }
    fn append(builder: &mut Self::Builder, value: Option<&str>) {
        builder.append_option(value)
    }
}

/// Raw bytes.
pub struct Binary;
impl ColumnType for Binary {
    type Builder = BinaryBuilder;
    type Value<'v> = &'v [u8];
    fn data_type() -> DataType {
        DataType::Binary
    }
    fn new_builder() -> Self::Builder {
        BinaryBuilder::new()
    }
    fn builder_with_capacity(rows: usize, bytes: usize) -> Self::Builder {
        BinaryBuilder::with_capacity(rows, bytes)
    }
    fn value_bytes(builder: &Self::Builder) -> usize {
        builder.values_slice().len()
    }
    fn append(builder: &mut Self::Builder, value: Option<&[u8]>) {
        builder.append_option(value)
    }
}

/// Timestamps: microseconds since the Unix epoch, UTC.
pub struct TimestampUtc;
impl ColumnType for TimestampUtc {
    type Builder = TimestampMicrosecondBuilder;
    type Value<'v> = i64;
    fn data_type() -> DataType {
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    }
    fn new_builder() -> Self::Builder {
        TimestampMicrosecondBuilder::new().with_timezone("UTC")
    }
    fn builder_with_capacity(rows: usize, _bytes: usize) -> Self::Builder {
        TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC")
    }
    fn append(builder: &mut Self::Builder, value: Option<i64>) {
        builder.append_option(value)
    }
}

/// A list of strings; an empty list is stored as null (see the column's docs).
pub struct Utf8List;
impl ColumnType for Utf8List {
    type Builder = ListBuilder<StringBuilder>;
    type Value<'v> = &'v [&'v str];
    fn data_type() -> DataType {
        DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
    }
    fn new_builder() -> Self::Builder {
        ListBuilder::new(StringBuilder::new())
    }
    fn append(builder: &mut Self::Builder, value: Option<&[&str]>) {
        match value {
            Some(items) if !items.is_empty() => {
                for item in items {
                    builder.values().append_value(item);
                }
                builder.append(true);
            }
            _ => builder.append_null(),
        }
    }
}

/// A list of floats (a distribution over candidates); `None` is stored as null.
pub struct Float64List;
impl ColumnType for Float64List {
    type Builder = ListBuilder<Float64Builder>;
    type Value<'v> = &'v [f64];
    fn data_type() -> DataType {
        DataType::List(Arc::new(Field::new("item", DataType::Float64, true)))
    }
    fn new_builder() -> Self::Builder {
        ListBuilder::new(Float64Builder::new())
    }
    fn append(builder: &mut Self::Builder, value: Option<&[f64]>) {
        match value {
            Some(items) => {
                builder.values().append_slice(items);
                builder.append(true);
            }
            None => builder.append_null(),
        }
    }
}

/// A token's top alternatives as logged: `(token, natural-log probability)`.
/// Under redaction the texts are stored as their keyed hash (`hash`) or empty (`drop`).
#[derive(Debug, Clone, Copy)]
pub struct Alternatives<'v> {
    /// The alternatives, most likely first as logged.
    pub alternatives: &'v [(std::borrow::Cow<'v, str>, f64)],
    /// How the texts are stored.
    pub redaction: &'v crate::redact::Redactor,
}

/// `list<struct<token: utf8, logprob: float64>>`: a token's top alternatives.
/// A non-finite logprob is stored as null.
pub struct TopLogprobs;

impl TopLogprobs {
    /// Fields of the struct element.
    pub fn fields() -> Fields {
        Fields::from(vec![Field::new("token", DataType::Utf8, false), Field::new("logprob", DataType::Float64, true)])
    }

    fn item() -> Arc<Field> {
        Arc::new(Field::new("item", DataType::Struct(Self::fields()), false))
    }
}

impl ColumnType for TopLogprobs {
    type Builder = ListBuilder<StructBuilder>;
    type Value<'v> = Alternatives<'v>;
    fn data_type() -> DataType {
        DataType::List(Self::item())
    }
    fn new_builder() -> Self::Builder {
        ListBuilder::new(StructBuilder::from_fields(Self::fields(), 0)).with_field(Self::item())
    }
    fn append(builder: &mut Self::Builder, value: Option<Alternatives<'_>>) {
        let Some(value) = value else {
            builder.append(false);
            return;
        };
        let items = builder.values();
        for (text, logprob) in value.alternatives {
            let stored = value.redaction.text(Some(text.as_ref()));
            let text = stored.as_deref().unwrap_or("");
            // The builder was made from `fields()` just above: both casts hold.
            if let Some(b) = items.field_builder::<StringBuilder>(0) {
                b.append_value(text);
            }
            if let Some(b) = items.field_builder::<Float64Builder>(1) {
                b.append_option(logprob.is_finite().then_some(*logprob));
            }
            items.append(true);
        }
        builder.append(true);
    }
}

/// How much one table builder held: its rows and each column's value bytes,
/// in column order. Builders made from it (the `with_sizes` of a `table!` builder) start
/// with that room instead of growing from empty, copying their buffers at
/// every doubling.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuilderSizes {
    /// Rows appended.
    pub rows: usize,
    /// Bytes of each column's variable-length values (0 for the others).
    pub bytes: Vec<usize>,
}

impl BuilderSizes {
    /// The larger of `self` and `other`, row count and column by column.
    pub fn max(mut self, other: &BuilderSizes) -> BuilderSizes {
        self.rows = self.rows.max(other.rows);
        if self.bytes.len() < other.bytes.len() {
            self.bytes.resize(other.bytes.len(), 0);
        }
        for (mine, theirs) in self.bytes.iter_mut().zip(&other.bytes) {
            *mine = (*mine).max(*theirs);
        }
        self
    }
}

/// Declares a table: its catalog entry ([`super::TableDef`]) and a batch
/// builder that appends one row from the given arguments.
///
/// ```text
/// table! {
///     /// What one row is.
///     pub table RejectsBuilder(o: &LineOrigin<'_>, error: &str) {
///         name: "rejects", key: ["source_file", "source_line"], partition: None, written_by: Ingest,
///     } {
///         /// Input path or URL.
///         source_file: Utf8 [Dictionary] = o.file,
///         /// Why the line was rejected.
///         error: Utf8 = error,
///         /// Optional columns say `nullable` and take an `Option`.
///         source_format: Utf8 nullable = Some(o.format),
///     }
/// }
/// ```
///
/// Each column is `name: TYPE [nullable] [[flags]] = expression;` the type
/// is a [`ColumnType`], the flags are [`super::ColumnFlag`]s for the Parquet
/// writer, and the doc comment becomes the column's description in
/// `schemas/<table>.json`. A table whose files are never compressed says
/// `codec: None` after `written_by` ([`super::TableCodec`]).
macro_rules! table {
    (
        $(#[doc = $table_doc:literal])*
        $vis:vis table $builder:ident($($arg:ident: $arg_ty:ty),* $(,)?) {
            name: $name:literal,
            key: [$($key:literal),* $(,)?],
            partition: $partition:ident,
            written_by: $written_by:ident
            $(, codec: $codec:ident)? $(,)?
        } {
            $(
                $(#[doc = $doc:literal])*
                $column:ident: $kind:ident $($nullable:ident)? $([$($flag:ident),* $(,)?])? = $value:expr
            ),* $(,)?
        }
    ) => {
        $(#[doc = $table_doc])*
        ///
        /// Builds batches of this table; the columns are declared once, in the
        /// `table!` invocation that generated this type.
        $vis struct $builder {
            $( $column: <$crate::catalog::columns::$kind as $crate::catalog::columns::ColumnType>::Builder, )*
            rows: usize,
        }

        impl $builder {
            /// The table's catalog entry.
            pub const DEF: $crate::catalog::TableDef = $crate::catalog::TableDef {
                name: $name,
                about: concat!($($table_doc, "\n"),*),
                key: &[$($key),*],
                partition: $crate::catalog::Partition::$partition,
                written_by: $crate::catalog::WrittenBy::$written_by,
                codec: $crate::catalog::columns::table!(@codec $($codec)?),
                columns: &[$(
                    $crate::catalog::ColumnDef {
                        name: stringify!($column),
                        data_type: <$crate::catalog::columns::$kind as $crate::catalog::columns::ColumnType>::data_type,
                        nullable: $crate::catalog::columns::table!(@nullable $($nullable)?),
                        doc: concat!($($doc, "\n"),*),
                        flags: &[$($($crate::catalog::ColumnFlag::$flag),*)?],
                    }
                ),*],
            };

            /// The Arrow schema of the table's files (partition columns excluded).
            pub fn schema() -> arrow_schema::SchemaRef {
                static SCHEMA: std::sync::OnceLock<arrow_schema::SchemaRef> = std::sync::OnceLock::new();
                std::sync::Arc::clone(SCHEMA.get_or_init(|| Self::DEF.schema()))
            }

            /// An empty builder.
            pub fn new() -> Self {
                Self {
                    $( $column: <$crate::catalog::columns::$kind as $crate::catalog::columns::ColumnType>::new_builder(), )*
                    rows: 0,
                }
            }

            /// An empty builder with room for as many rows and value bytes as
            /// `sizes` recorded (see [`Self::sizes`]), so that a slice like the
            /// last one is built without growing a buffer.
            pub fn with_sizes(sizes: &$crate::catalog::columns::BuilderSizes) -> Self {
                let mut bytes = sizes.bytes.iter().copied();
                Self {
                    $( $column: <$crate::catalog::columns::$kind as $crate::catalog::columns::ColumnType>::builder_with_capacity(
                        sizes.rows,
                        bytes.next().unwrap_or(0),
                    ), )*
                    rows: 0,
                }
            }

            /// The rows and each column's value bytes appended since the last
            /// [`Self::finish`].
            pub fn sizes(&self) -> $crate::catalog::columns::BuilderSizes {
                $crate::catalog::columns::BuilderSizes {
                    rows: self.rows,
                    bytes: vec![$(
                        <$crate::catalog::columns::$kind as $crate::catalog::columns::ColumnType>::value_bytes(&self.$column)
                    ),*],
                }
            }

            /// Appends one row.
            #[allow(clippy::too_many_arguments)]
            pub fn append(&mut self, $($arg: $arg_ty),*) {
                $(
                    <$crate::catalog::columns::$kind as $crate::catalog::columns::ColumnType>::append(
                        &mut self.$column,
                        $crate::catalog::columns::table!(@value $value $(, $nullable)?),
                    );
                )*
                self.rows += 1;
            }

            /// Rows appended since the last [`Self::finish`].
            pub fn len(&self) -> usize {
                self.rows
            }

            /// True when no row was appended since the last [`Self::finish`].
            pub fn is_empty(&self) -> bool {
                self.rows == 0
            }

            /// The rows appended so far as one batch; the builder starts empty again.
            pub fn finish(&mut self) -> $crate::error::Result<arrow_array::RecordBatch> {
                let columns: Vec<arrow_array::ArrayRef> = vec![
                    $( arrow_array::builder::ArrayBuilder::finish(&mut self.$column), )*
                ];
                self.rows = 0;
                Ok(arrow_array::RecordBatch::try_new(Self::schema(), columns)?)
            }
        }

        impl Default for $builder {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $crate::catalog::append::TableBuilder for $builder {
            fn def(&self) -> &'static $crate::catalog::TableDef {
                <Self as $crate::catalog::append::DeclaredTable>::TABLE
            }
            fn rows(&self) -> usize {
                self.rows
            }
            fn finish_batch(&mut self) -> $crate::error::Result<arrow_array::RecordBatch> {
                self.finish()
            }
            fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
                self
            }
        }

        impl $crate::catalog::append::DeclaredTable for $builder {
            const TABLE: &'static $crate::catalog::TableDef = &Self::DEF;
        }
    };
    (@codec) => { $crate::catalog::TableCodec::Given };
    (@codec $codec:ident) => { $crate::catalog::TableCodec::$codec };
    (@nullable) => { false };
    (@nullable nullable) => { true };
    (@value $value:expr) => { Some($value) };
    (@value $value:expr, nullable) => { $value };
}

pub(crate) use table;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_the_larger_column_by_column() {
        let a = BuilderSizes { rows: 3, bytes: vec![10, 0, 7] };
        let b = BuilderSizes { rows: 5, bytes: vec![4, 0, 9, 2] };
        assert_eq!(a.clone().max(&b), BuilderSizes { rows: 5, bytes: vec![10, 0, 9, 2] });
        assert_eq!(BuilderSizes::default().max(&a), a);
    }

    #[test]
    fn text_builders_count_their_value_bytes() {
        let mut b = Utf8::builder_with_capacity(4, 64);
        assert!(b.values_slice().is_empty());
        Utf8::append(&mut b, Some("héllo"));
        Utf8::append(&mut b, None);
        assert_eq!(Utf8::value_bytes(&b), 6);
        assert_eq!(Int64::value_bytes(&Int64::builder_with_capacity(4, 64)), 0);
        let mut bin = Binary::builder_with_capacity(1, 8);
        Binary::append(&mut bin, Some(b"abc"));
        assert_eq!(Binary::value_bytes(&bin), 3);
    }
}
