//! tokscope's SQL functions, registered by [`super::register_udfs`]:
//!
//! - `quantile_cont(x, p)`: exact quantile with linear interpolation between
//!   closest ranks (DuckDB's `quantile_cont`, Hyndman-Fan type 7). It replaces
//!   DataFusion's `quantile_cont` alias of `percentile_cont`, whose
//!   interpolation weight is truncated to 6 decimals.
//! - `quantiles_cont(x, p1, ..., pk)`: the same quantiles of one column as a list, from one
//!   copy of its values; queries get it from `super::merge_quantiles`, which merges the
//!   `quantile_cont` calls of an aggregate over the same column.
//! - `price_usd(model, ts, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens)`:
//!   the request's cost as a struct `{input_usd, cached_input_usd, cache_write_usd, output_usd, total_usd}`,
//!   null when the model has no price at `ts`.
//! - `kv_cache_bytes(model, tokens [, tp])`: KV-cache bytes of `tokens` tokens (with `tp`: on one GPU
//!   of that tensor-parallel degree), null for an unknown architecture.
//! - `kv_tensor_parallel(model, tp)`: the tensor-parallel degree per-GPU sizes use.
//! - `kl_divergence(p, q [, normalize])`: KL(p || q) in bits between two arrays.
//! - `bleu4(candidate, reference)`: sacreBLEU's sentence BLEU / 100.
//! - `last_user_words(prompt)`: words of the prompt's last user message.
//! - `is_eos_marker(token [, model])`: the token is one of the configured EOS markers.
//! - `redundancy_bound(entropy_bits, k, K)`: the calibrated MoE redundancy bound.
//! - `bootstrap_mean_ci(x, resamples, seed)`: seeded 95% percentile-bootstrap interval of the mean.
//! - `max_overlap(start, end)`: peak number of intervals in flight ([`concurrency`]).
//! - `longest_run(x)`: length of the longest run of consecutive integers ([`runs`]).
//! - `first_last_by(value, key, last, descending, nulls_first)`: `first_value`/`last_value`
//!   ordered by one integer key, what `super::first_last` rewrites them to ([`first_last`]).
//! - `compare_proportions`, `compare_medians`, `compare_quantiles`, `compare_std_devs`, `compare_cost_per_1k`,
//!   `sample_ratio_test`, `holm_adjust`: A/B comparisons, arm B against arm A ([`ab`]).
//! - `group_tags(tags, prefix)`, `extra_field(extra, path)`, `extra_tags(extra, path)`: attribution
//!   ([`attribution`]): the tags a request is grouped under, a field of `extra` read as `--attribute` reads it.

pub mod ab;
pub mod attribution;
pub mod concurrency;
pub mod first_last;
pub mod runs;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayAccessor, ArrayRef, AsArray, BooleanArray, Float64Array, Float64Builder, Int64Array, ListArray,
    PrimitiveArray, StructArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::cast;
use arrow::datatypes::{ArrowPrimitiveType, DataType, Field, FieldRef, Fields, Float64Type, Int64Type, TimeUnit};
use datafusion::common::{exec_err, plan_err, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    create_udf, Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, EmitTo, GroupsAccumulator,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, SimpleScalarUDF, TypeSignature, Volatility, WindowUDF,
};
use tokscope_core::derive::EosMarkers;

use tokscope_core::stats::{bleu, bootstrap, kl};

use super::architectures::{Arch, Architectures};
use super::pricing::{Pricing, Schedule, Usage};

/// Names of the fields of `price_usd`'s struct, in order.
pub const PRICE_FIELDS: [&str; 5] = ["input_usd", "cached_input_usd", "cache_write_usd", "output_usd", "total_usd"];

/// `is_eos_marker(token [, model])`: the token text, trimmed, is one of the
/// EOS markers `has_eos_marker` uses at ingest: the defaults plus those of
/// `--eos-markers` (every model's, and with `model` that model's own).
/// Null in, null out.
pub fn is_eos_marker(markers: Arc<EosMarkers>) -> ScalarUDF {
    let signature = Signature::one_of(vec![TypeSignature::String(1), TypeSignature::String(2)], Volatility::Immutable);
    ScalarUDF::from(IsEosMarker { markers, signature })
}

/// `redundancy_bound(entropy_bits, k, K) = 0.45 - 0.3 * entropy_bits / log2(K) + 0.02 * k`:
/// the seeds' calibrated MoE redundancy bound, an empirical formula (docs/metrics.md).
/// Null when an argument is null or `K <= 1`.
pub fn redundancy_bound() -> ScalarUDF {
    create_udf(
        "redundancy_bound",
        vec![DataType::Float64, DataType::Float64, DataType::Float64],
        DataType::Float64,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let cols =
                arrays.iter().map(|a| cast(a, &DataType::Float64)).collect::<std::result::Result<Vec<_>, _>>()?;
            let (h, k, big_k) = (
                cols[0].as_primitive::<Float64Type>(),
                cols[1].as_primitive::<Float64Type>(),
                cols[2].as_primitive::<Float64Type>(),
            );
            let out: Float64Array = (0..h.len())
                .map(|i| {
                    if h.is_null(i) || k.is_null(i) || big_k.is_null(i) || big_k.value(i) <= 1.0 {
                        return None;
                    }
                    Some(redundancy_bound_value(h.value(i), k.value(i), big_k.value(i)))
                })
                .collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        }),
    )
}

/// The redundancy-bound formula for one row.
pub fn redundancy_bound_value(entropy_bits: f64, k: f64, big_k: f64) -> f64 {
    0.45 - 0.3 * entropy_bits / big_k.log2() + 0.02 * k
}

/// The exact-quantile aggregate.
pub fn quantile_cont() -> AggregateUDF {
    AggregateUDF::from(QuantileCont { signature: Signature::any(2, Volatility::Immutable) })
}

/// Whether `udaf` is tokscope's `quantile_cont` (not DataFusion's alias of `percentile_cont`).
pub fn is_quantile_cont(udaf: &AggregateUDF) -> bool {
    let any: &dyn std::any::Any = udaf.inner().as_ref();
    any.is::<QuantileCont>()
}

/// Several exact quantiles of one column, as a list in argument order.
pub fn quantiles_cont() -> AggregateUDF {
    AggregateUDF::from(QuantilesCont { signature: Signature::variadic_any(Volatility::Immutable) })
}

/// `bootstrap_mean_ci(x, resamples, seed)`: the 95% percentile-bootstrap
/// interval of the mean of `x` as a struct `{lo, hi}` (null for no values).
pub fn bootstrap_mean_ci() -> AggregateUDF {
    AggregateUDF::from(BootstrapMeanCi { signature: Signature::any(3, Volatility::Immutable) })
}

/// A stand-in for `name` that fails when planned or run: what a cluster's
/// processes resolve the functions of [`CONFIGURED`] to by name. Those functions only run with the configuration a plan carries; one
/// that arrives without it must not quietly use defaults.
pub fn unconfigured(name: &'static str) -> ScalarUDF {
    ScalarUDF::from(Unconfigured { name, signature: Signature::variadic_any(Volatility::Immutable) })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Unconfigured {
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for Unconfigured {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        plan_err!(
            "{} reached this process by name, without its configuration: the plan was not encoded with \
             tokscope's codec (run the client, scheduler and executors from the same tokscope build)",
            self.name
        )
    }
    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        exec_err!("{} reached this process by name, without its configuration", self.name)
    }
}

/// The pricing scalar function over `pricing`.
pub fn price_usd(pricing: Arc<Pricing>) -> ScalarUDF {
    ScalarUDF::from(PriceUsd { pricing, signature: Signature::any(6, Volatility::Immutable) })
}

/// The KV-cache size scalar function over `architectures`: per request, or
/// with a third argument `tp` per GPU of that tensor-parallel degree (`tp`
/// below 1: the architecture's own, see [`kv_tensor_parallel`]).
pub fn kv_cache_bytes(architectures: Arc<Architectures>) -> ScalarUDF {
    let signature = Signature::one_of(vec![TypeSignature::Any(2), TypeSignature::Any(3)], Volatility::Immutable);
    ScalarUDF::from(KvCacheBytes { architectures, signature })
}

/// `kv_tensor_parallel(model, tp)`: the tensor-parallel degree per-GPU KV
/// sizes use: `tp` when it is at least 1, else the architecture's
/// `tensor_parallel`, else 1; null for an unknown architecture.
pub fn kv_tensor_parallel(architectures: Arc<Architectures>) -> ScalarUDF {
    ScalarUDF::from(KvTensorParallel { architectures, signature: Signature::any(2, Volatility::Immutable) })
}

/// `kl_divergence(p, q [, normalize])`: KL(p || q) in bits between two
/// arrays of numbers ([`kl::kl_divergence_bits`]); null when `p`, `q` or
/// `normalize` is null; an error for arrays that are not distributions.
pub fn kl_divergence() -> ScalarUDF {
    let signature = Signature::one_of(vec![TypeSignature::Any(2), TypeSignature::Any(3)], Volatility::Immutable);
    ScalarUDF::from(KlDivergence { signature })
}

/// `bleu4(candidate, reference)`: sacreBLEU's sentence BLEU with its defaults
/// (13a tokens, exponential smoothing) divided by 100 ([`bleu::sentence_bleu`]);
/// null when either is null.
pub fn bleu4() -> ScalarUDF {
    ScalarUDF::from(SimpleScalarUDF::new_with_signature(
        "bleu4",
        Signature::string(2, Volatility::Immutable),
        DataType::Float64,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let (c, r) = (cast(&arrays[0], &DataType::Utf8)?, cast(&arrays[1], &DataType::Utf8)?);
            let (c, r) = (c.as_string::<i32>(), r.as_string::<i32>());
            let out: Float64Array = c.iter().zip(r.iter()).map(|(c, r)| Some(bleu::sentence_bleu(c?, r?))).collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        }),
    ))
}

/// `last_user_words(prompt)`: words of the prompt's last user message
/// ([`tokscope_core::prompt::last_user_words`]); null for a null prompt or
/// chat messages without a user turn.
pub fn last_user_words() -> ScalarUDF {
    ScalarUDF::from(SimpleScalarUDF::new_with_signature(
        "last_user_words",
        Signature::string(1, Volatility::Immutable),
        DataType::Int64,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let prompts = cast(&arrays[0], &DataType::Utf8)?;
            let out: arrow::array::Int64Array = prompts
                .as_string::<i32>()
                .iter()
                .map(|p| tokscope_core::prompt::last_user_words(p?).map(|n| n as i64))
                .collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        }),
    ))
}

/// A SQL function of any kind, as a session registers it.
#[derive(Debug, Clone)]
pub enum Udf {
    /// A scalar function.
    Scalar(ScalarUDF),
    /// An aggregate.
    Aggregate(AggregateUDF),
    /// A window function.
    Window(WindowUDF),
}

impl Udf {
    /// The function's SQL name.
    pub fn name(&self) -> &str {
        match self {
            Udf::Scalar(f) => f.name(),
            Udf::Aggregate(f) => f.name(),
            Udf::Window(f) => f.name(),
        }
    }

    /// The concrete type behind the function (one per tokscope function,
    /// or DataFusion's `SimpleScalarUDF` for closures).
    pub(crate) fn impl_type(&self) -> std::any::TypeId {
        let any: &dyn std::any::Any = match self {
            Udf::Scalar(f) => f.inner().as_ref(),
            Udf::Aggregate(f) => f.inner().as_ref(),
            Udf::Window(f) => f.inner().as_ref(),
        };
        any.type_id()
    }
}

/// Declares tokscope's functions that need nothing beyond their arguments,
/// each once: its variant, its SQL name and how it is built. The order is the
/// wire order (a distributed plan names a plain function by its index in
/// [`Plain::ALL`]): new ones go last.
macro_rules! plain_functions {
    ($($variant:ident: $name:literal => $kind:ident($build:expr)),* $(,)?) => {
        /// tokscope's functions that need nothing beyond their arguments.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Plain {
            $(#[doc = concat!("`", $name, "`.")] $variant),*
        }

        impl Plain {
            /// Every one of them, in wire order.
            pub const ALL: &'static [Plain] = &[$(Plain::$variant),*];

            /// Its SQL name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Plain::$variant => $name),*
                }
            }

            /// The function.
            pub fn build(self) -> Udf {
                match self {
                    $(Plain::$variant => Udf::$kind($build)),*
                }
            }
        }
    };
}

plain_functions! {
    RedundancyBound: "redundancy_bound" => Scalar(redundancy_bound()),
    QuantileCont: "quantile_cont" => Aggregate(quantile_cont()),
    QuantilesCont: "quantiles_cont" => Aggregate(quantiles_cont()),
    BootstrapMeanCi: "bootstrap_mean_ci" => Aggregate(bootstrap_mean_ci()),
    KlDivergence: "kl_divergence" => Scalar(kl_divergence()),
    Bleu4: "bleu4" => Scalar(bleu4()),
    LastUserWords: "last_user_words" => Scalar(last_user_words()),
    MaxOverlap: "max_overlap" => Aggregate(concurrency::max_overlap()),
    CompareProportions: "compare_proportions" => Scalar(ab::compare_proportions()),
    CompareMedians: "compare_medians" => Scalar(ab::compare_medians()),
    CompareCostPer1k: "compare_cost_per_1k" => Scalar(ab::compare_cost_per_1k()),
    HolmAdjust: "holm_adjust" => Window(ab::holm_adjust()),
    LongestRun: "longest_run" => Aggregate(runs::longest_run()),
    FirstLastBy: "first_last_by" => Aggregate(first_last::first_last_by()),
    CompareQuantiles: "compare_quantiles" => Scalar(ab::compare_quantiles()),
    CompareStdDevs: "compare_std_devs" => Scalar(ab::compare_std_devs()),
    SampleRatioTest: "sample_ratio_test" => Scalar(ab::sample_ratio_test()),
    GroupTags: "group_tags" => Scalar(attribution::group_tags()),
    ExtraField: "extra_field" => Scalar(attribution::extra_field()),
    ExtraTags: "extra_tags" => Scalar(attribution::extra_tags()),
}

/// What a configured function carries to a remote process
/// (`engine::distributed::codec` implements it for each configuration).
pub trait Configuration: Send + Sync + Sized + 'static {
    /// The payload that travels with the plan.
    fn encode(&self) -> DfResult<Vec<u8>>;
    /// The configuration a payload holds (`name`: the function, for errors).
    fn decode(body: &[u8], name: &str) -> DfResult<Arc<Self>>;
}

/// Declares tokscope's functions that carry configuration, each once: its
/// variant (also the name of the type implementing it, whose field holds the
/// configuration), its SQL name, its payload tag in a distributed plan
/// (fixed: never reuse one), the configuration's type and the field of
/// [`super::UdfConfig`] it comes from, and its constructor.
macro_rules! configured_functions {
    ($($variant:ident { $field:ident }: $name:literal, tag $tag:literal, $config:ty, from $from:ident => $build:ident),* $(,)?) => {
        /// One of tokscope's SQL functions with the configuration it carries: what
        /// a distributed plan must ship so a remote process computes the same thing
        /// (`engine::distributed::codec`).
        #[derive(Debug, Clone)]
        pub enum Function {
            $(#[doc = concat!("`", $name, "` with its configuration.")] $variant(Arc<$config>),)*
            /// A function without configuration.
            Plain(Plain),
        }

        /// The functions that need configuration ([`Function::is_configured`]), by name.
        pub const CONFIGURED: &[&str] = &[$($name),*];

        impl Function {
            /// Every tokscope SQL function, configured from `config`: what a session registers.
            pub fn all(config: &super::UdfConfig) -> Vec<Function> {
                let mut all = vec![$(Function::$variant(Arc::clone(&config.$from))),*];
                all.extend(Plain::ALL.iter().copied().map(Function::Plain));
                all
            }

            /// The function.
            pub fn build(&self) -> Udf {
                match self {
                    $(Function::$variant(c) => Udf::Scalar($build(Arc::clone(c))),)*
                    Function::Plain(p) => p.build(),
                }
            }

            /// The scalar function's definition, if it is one of tokscope's.
            pub fn of_udf(udf: &ScalarUDF) -> Option<Function> {
                let inner = udf.inner();
                $(if let Some(f) = inner.downcast_ref::<$variant>() {
                    return Some(Function::$variant(Arc::clone(&f.$field)));
                })*
                Self::plain(&Udf::Scalar(udf.clone()))
            }

            /// The payload tag and body of a configured function (`None` for a plain one).
            pub fn configuration(&self) -> DfResult<Option<(u8, Vec<u8>)>> {
                Ok(match self {
                    $(Function::$variant(c) => Some(($tag, c.encode()?)),)*
                    Function::Plain(_) => None,
                })
            }

            /// The configured function of payload tag `tag` (`None` for another tag).
            pub fn from_configuration(tag: u8, body: &[u8], name: &str) -> DfResult<Option<Function>> {
                Ok(match tag {
                    $($tag => Some(Function::$variant(<$config as Configuration>::decode(body, name)?)),)*
                    _ => None,
                })
            }
        }
    };
}

configured_functions! {
    PriceUsd { pricing }: "price_usd", tag 1, Pricing, from pricing => price_usd,
    KvCacheBytes { architectures }: "kv_cache_bytes", tag 2, Architectures, from architectures => kv_cache_bytes,
    KvTensorParallel { architectures }: "kv_tensor_parallel", tag 3, Architectures, from architectures => kv_tensor_parallel,
    IsEosMarker { markers }: "is_eos_marker", tag 4, EosMarkers, from markers => is_eos_marker,
}

impl Function {
    /// Whether the function needs configuration (a stand-in without it must fail).
    pub fn is_configured(&self) -> bool {
        !matches!(self, Function::Plain(_))
    }

    /// The definition of a function of any kind, if it is one of tokscope's.
    pub fn of_udf_any(udf: &Udf) -> Option<Function> {
        match udf {
            Udf::Scalar(f) => Self::of_udf(f),
            Udf::Aggregate(f) => Self::of_udaf(f),
            Udf::Window(f) => Self::of_udwf(f),
        }
    }

    /// The aggregate's definition, if it is one of tokscope's.
    pub fn of_udaf(udaf: &AggregateUDF) -> Option<Function> {
        Self::plain(&Udf::Aggregate(udaf.clone()))
    }

    /// The window function's definition, if it is one of tokscope's.
    pub fn of_udwf(udwf: &WindowUDF) -> Option<Function> {
        Self::plain(&Udf::Window(udwf.clone()))
    }

    /// The plain tokscope function `udf` is: the same name, kind and
    /// implementing type (so DataFusion's `quantile_cont` alias of
    /// `percentile_cont` is never taken for tokscope's).
    fn plain(udf: &Udf) -> Option<Function> {
        Plain::ALL.iter().copied().find_map(|p| {
            if p.name() != udf.name() {
                return None;
            }
            let built = p.build();
            (built.name() == udf.name()
                && std::mem::discriminant(&built) == std::mem::discriminant(udf)
                && built.impl_type() == udf.impl_type())
            .then_some(Function::Plain(p))
        })
    }
}

/// `PartialEq`, `Eq` and `Hash` for a function struct that carries loaded
/// configuration in an `Arc`: two instances are the same function only if
/// they share the same loaded configuration.
macro_rules! same_if_same_config {
    ($udf:ident, $config:ident) => {
        impl PartialEq for $udf {
            fn eq(&self, other: &Self) -> bool {
                Arc::ptr_eq(&self.$config, &other.$config)
            }
        }
        impl Eq for $udf {}
        impl Hash for $udf {
            fn hash<H: Hasher>(&self, state: &mut H) {
                (Arc::as_ptr(&self.$config) as usize).hash(state)
            }
        }
    };
}

// ---------------------------------------------------------------- quantile_cont

#[derive(Debug, PartialEq, Eq, Hash)]
struct QuantileCont {
    signature: Signature,
}

impl AggregateUDFImpl for QuantileCont {
    fn name(&self) -> &str {
        "quantile_cont"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        if !arg_types[0].is_numeric() && !arg_types[0].is_null() {
            return plan_err!("quantile_cont needs a numeric value, got {}", arg_types[0]);
        }
        Ok(DataType::Float64)
    }
    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(vec![values_state_field(args.name)])
    }
    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(CollectAcc { finish: Finish::Quantile(quantile_arg(&args, 1)?), values: Vec::new() }))
    }
    // The grouped path keeps one value vector per group and avoids DataFusion's
    // per-group slicing of every batch that a plain Accumulator needs.
    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }
    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(QuantileGroups { ps: Quantiles::One(quantile_arg(&args, 1)?), groups: Vec::new() }))
    }
}

// ---------------------------------------------------------------- quantiles_cont

#[derive(Debug, PartialEq, Eq, Hash)]
struct QuantilesCont {
    signature: Signature,
}

/// The quantiles of a `quantiles_cont` call: its arguments after the first.
fn quantile_args(args: &AccumulatorArgs) -> DfResult<Vec<f64>> {
    (1..args.exprs.len()).map(|i| quantile_arg(args, i)).collect()
}

impl AggregateUDFImpl for QuantilesCont {
    fn name(&self) -> &str {
        "quantiles_cont"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        if arg_types.len() < 2 {
            return plan_err!("quantiles_cont needs a value and at least one quantile");
        }
        if !arg_types[0].is_numeric() && !arg_types[0].is_null() {
            return plan_err!("quantiles_cont needs a numeric value, got {}", arg_types[0]);
        }
        Ok(float_list_type())
    }
    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(vec![values_state_field(args.name)])
    }
    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(CollectAcc { finish: Finish::Quantiles(quantile_args(&args)?), values: Vec::new() }))
    }
    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }
    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(QuantileGroups { ps: Quantiles::Many(quantile_args(&args)?), groups: Vec::new() }))
    }
}

/// Type-7 quantiles `ps` of `values` (reordered in place), in the order of
/// `ps`: as [`quantile_type7`] gives each, by selections from the smallest
/// quantile up, each over the values right of the one before (so three
/// quantiles cost about two passes, not three, and far less than a sort).
fn quantiles_type7(values: &mut [f64], ps: &[f64]) -> Vec<Option<f64>> {
    let mut out = vec![None; ps.len()];
    if values.is_empty() {
        return out;
    }
    let mut order: Vec<usize> = (0..ps.len()).collect();
    order.sort_by(|&a, &b| ps[a].total_cmp(&ps[b]));
    // Every value left of `start` is at most every value from `start` on.
    let mut start = 0;
    for k in order {
        let (q, lo) = type7_from(values, start, ps[k]);
        out[k] = Some(q);
        start = lo;
    }
    out
}

/// One list of quantiles per group.
fn quantile_lists(lists: Vec<Vec<Option<f64>>>) -> ListArray {
    let lengths: Vec<usize> = lists.iter().map(Vec::len).collect();
    float_lists(lists.into_iter().flatten().collect(), lengths)
}

/// Argument `index` of an aggregate call: a numeric constant, evaluated
/// against an empty batch.
pub(crate) fn constant_arg(args: &AccumulatorArgs, index: usize, function: &str, what: &str) -> DfResult<f64> {
    let empty = arrow::record_batch::RecordBatch::new_empty(Arc::new(arrow::datatypes::Schema::empty()));
    match args.exprs.get(index).map(|e| e.evaluate(&empty)).transpose()? {
        Some(ColumnarValue::Scalar(v)) if !v.is_null() => match v.cast_to(&DataType::Float64)? {
            ScalarValue::Float64(Some(x)) => Ok(x),
            _ => plan_err!("{function}: the {what} must be a number"),
        },
        _ => plan_err!("{function}: the {what} must be a constant"),
    }
}

/// Argument `index`, a quantile: a constant in [0, 1].
fn quantile_arg(args: &AccumulatorArgs, index: usize) -> DfResult<f64> {
    let p = constant_arg(args, index, "quantile_cont", "quantile")?;
    if !(0.0..=1.0).contains(&p) {
        return plan_err!("quantile_cont: the quantile must be in [0, 1], got {p}");
    }
    Ok(p)
}

// ---------------------------------------------------------------- bootstrap_mean_ci

fn bootstrap_fields() -> Fields {
    Fields::from(vec![Field::new("lo", DataType::Float64, true), Field::new("hi", DataType::Float64, true)])
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BootstrapMeanCi {
    signature: Signature,
}

impl AggregateUDFImpl for BootstrapMeanCi {
    fn name(&self) -> &str {
        "bootstrap_mean_ci"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        if !arg_types[0].is_numeric() && !arg_types[0].is_null() {
            return plan_err!("bootstrap_mean_ci needs a numeric value, got {}", arg_types[0]);
        }
        Ok(DataType::Struct(bootstrap_fields()))
    }
    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        Ok(vec![values_state_field(args.name)])
    }
    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let resamples = constant_arg(&args, 1, "bootstrap_mean_ci", "number of resamples")?;
        let seed = constant_arg(&args, 2, "bootstrap_mean_ci", "seed")?;
        if resamples < 1.0 || resamples.fract() != 0.0 || seed < 0.0 || seed.fract() != 0.0 {
            return plan_err!(
                "bootstrap_mean_ci: resamples must be a positive integer and seed a non-negative integer"
            );
        }
        Ok(Box::new(CollectAcc {
            finish: Finish::BootstrapMeanCi { resamples: resamples as usize, seed: seed as u64 },
            values: Vec::new(),
        }))
    }
}

// ---------------------------------------------------------------- quantile_cont groups

/// The quantiles a [`QuantileGroups`] computes.
#[derive(Debug, Clone)]
enum Quantiles {
    /// `quantile_cont(x, p)`: a float.
    One(f64),
    /// `quantiles_cont(x, p1, ..., pk)`: a list of floats.
    Many(Vec<f64>),
}

/// Values of every group, in group-index order.
#[derive(Debug)]
struct QuantileGroups {
    ps: Quantiles,
    groups: Vec<Vec<f64>>,
}

impl QuantileGroups {
    fn add(
        &mut self,
        values: &ArrayRef,
        group_indices: &[usize],
        filter: Option<&BooleanArray>,
        total: usize,
    ) -> DfResult<()> {
        self.groups.resize_with(total, Vec::new);
        let a = cast(values, &DataType::Float64)?;
        let a = a.as_primitive::<Float64Type>();
        let values = a.values();
        // Nulls are skipped (SQL aggregate semantics), and so is NaN, which has no rank.
        match (a.nulls().filter(|n| n.null_count() > 0), filter) {
            (None, None) => {
                for (&v, &g) in values.iter().zip(group_indices) {
                    if !v.is_nan() {
                        self.groups[g].push(v);
                    }
                }
            }
            (nulls, filter) => {
                for (i, (&v, &g)) in values.iter().zip(group_indices).enumerate() {
                    let keep = nulls.is_none_or(|n| n.is_valid(i)) && passes(filter, i);
                    if keep && !v.is_nan() {
                        self.groups[g].push(v);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether row `i` passes an aggregate's `FILTER` (no filter: every row;
/// a null predicate does not pass).
pub(crate) fn passes(filter: Option<&BooleanArray>, i: usize) -> bool {
    filter.is_none_or(|f| f.is_valid(i) && f.value(i))
}

/// An integer column as 64-bit integers (an unsigned value past `i64::MAX` becomes null).
pub(crate) fn int64s(array: &ArrayRef) -> DfResult<Int64Array> {
    Ok(cast(array, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
}

/// A list column with one list of floats per group (no null lists).
pub(crate) fn list_of(values: Vec<Vec<f64>>) -> ArrayRef {
    lists_of::<Float64Type>(values)
}

/// A list column with one list of integers per group (no null lists).
pub(crate) fn int_list_of(values: Vec<Vec<i64>>) -> ArrayRef {
    lists_of::<Int64Type>(values)
}

fn lists_of<T: ArrowPrimitiveType>(values: Vec<Vec<T::Native>>) -> ArrayRef {
    let lengths: Vec<usize> = values.iter().map(Vec::len).collect();
    // Sized once: collecting a flattening iterator grew the buffer from
    // empty, copying the values again at every doubling.
    let mut flat = Vec::with_capacity(lengths.iter().sum());
    for v in &values {
        flat.extend_from_slice(v);
    }
    Arc::new(primitive_lists(PrimitiveArray::<T>::new(flat.into(), None), lengths))
}

/// The type of a list of floats: the collecting aggregates' state, and `quantiles_cont`'s result.
fn float_list_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)))
}

/// State field `what` of aggregate `name`: a list of `item`s (`{name}[{what}]`).
pub(crate) fn list_state_field(name: &str, what: &str, item: DataType) -> FieldRef {
    Arc::new(Field::new(format!("{name}[{what}]"), DataType::List(Arc::new(Field::new_list_field(item, true))), true))
}

/// The state of an aggregate that collects its values: one list of them.
fn values_state_field(name: &str) -> FieldRef {
    list_state_field(name, "values", DataType::Float64)
}

/// Lists of `lengths[i]` floats each, taken in order from `values` (no null lists).
fn float_lists(values: Float64Array, lengths: impl IntoIterator<Item = usize>) -> ListArray {
    primitive_lists(values, lengths)
}

/// Lists of `lengths[i]` values each, taken in order from `values` (no null lists).
fn primitive_lists<T: ArrowPrimitiveType>(
    values: PrimitiveArray<T>,
    lengths: impl IntoIterator<Item = usize>,
) -> ListArray {
    let item = Arc::new(Field::new_list_field(T::DATA_TYPE, true));
    ListArray::new(item, OffsetBuffer::from_lengths(lengths), Arc::new(values), None)
}

impl GroupsAccumulator for QuantileGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> DfResult<()> {
        self.add(&values[0], group_indices, opt_filter, total_num_groups)
    }
    fn evaluate(&mut self, emit_to: EmitTo) -> DfResult<ArrayRef> {
        let groups = emit_to.take_needed(&mut self.groups);
        Ok(match &self.ps {
            Quantiles::One(p) => {
                Arc::new(groups.into_iter().map(|mut v| quantile_type7(&mut v, *p)).collect::<Float64Array>())
            }
            Quantiles::Many(ps) => {
                Arc::new(quantile_lists(groups.into_iter().map(|mut v| quantiles_type7(&mut v, ps)).collect()))
            }
        })
    }
    fn state(&mut self, emit_to: EmitTo) -> DfResult<Vec<ArrayRef>> {
        Ok(vec![list_of(emit_to.take_needed(&mut self.groups))])
    }
    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> DfResult<()> {
        self.groups.resize_with(total_num_groups, Vec::new);
        let lists = values[0].as_list::<i32>();
        // State lists hold no nulls (see `add`): copy each list's slice of the flat values.
        let flat = lists.values().as_primitive::<Float64Type>().values();
        let offsets = lists.value_offsets();
        for (i, &g) in group_indices.iter().enumerate() {
            if lists.is_valid(i) {
                self.groups[g].extend_from_slice(&flat[offsets[i] as usize..offsets[i + 1] as usize]);
            }
        }
        Ok(())
    }
    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> DfResult<Vec<ArrayRef>> {
        let a = cast(&values[0], &DataType::Float64)?;
        let a = a.as_primitive::<Float64Type>();
        // One list per row: its value, or none (null, NaN or filtered out).
        let mut flat = Vec::with_capacity(a.len());
        let lengths: Vec<usize> = (0..a.len())
            .map(|i| {
                let keep = a.is_valid(i) && !a.value(i).is_nan() && passes(opt_filter, i);
                if keep {
                    flat.push(a.value(i));
                }
                usize::from(keep)
            })
            .collect();
        Ok(vec![Arc::new(float_lists(flat.into(), lengths))])
    }
    fn size(&self) -> usize {
        size_of_val(self)
            + self.groups.iter().map(|g| g.capacity() * size_of::<f64>() + size_of::<Vec<f64>>()).sum::<usize>()
    }
}

/// What a value-collecting aggregate computes from all of a group's values.
#[derive(Debug, Clone)]
enum Finish {
    /// `quantile_cont(x, p)`.
    Quantile(f64),
    /// `quantiles_cont(x, p1, ..., pk)`.
    Quantiles(Vec<f64>),
    /// `bootstrap_mean_ci(x, resamples, seed)`.
    BootstrapMeanCi { resamples: usize, seed: u64 },
}

/// Keeps every non-null value of a group, then computes [`Finish`] over them.
#[derive(Debug)]
struct CollectAcc {
    finish: Finish,
    values: Vec<f64>,
}

impl CollectAcc {
    fn add(&mut self, array: &ArrayRef) -> DfResult<()> {
        let a = cast(array, &DataType::Float64)?;
        // Nulls are ignored (SQL aggregate semantics); NaN would poison the sort order, so it is too.
        self.values.extend(a.as_primitive::<Float64Type>().iter().flatten().filter(|v| !v.is_nan()));
        Ok(())
    }
}

/// Type-7 quantile of `values` (reordered in place): with `x` the sorted values,
/// `h = p * (n - 1)`, `x[floor h] + (h - floor h) * (x[floor h + 1] - x[floor h])`.
/// Selection instead of a full sort: O(n) per quantile.
pub fn quantile_type7(values: &mut [f64], p: f64) -> Option<f64> {
    (!values.is_empty()).then(|| type7_from(values, 0, p).0)
}

/// The type-7 quantile `p` of non-empty `values`, selected among
/// `values[start..]` (every value left of `start` being at most every value
/// from it on, and `start` at most the quantile's rank `floor h`); returns it
/// and that rank, where the selected value now stands.
fn type7_from(values: &mut [f64], start: usize, p: f64) -> (f64, usize) {
    let h = p * (values.len() - 1) as f64;
    let lo = (h.floor() as usize).max(start);
    let (_, lo_v, above) = values[start..].select_nth_unstable_by(lo - start, f64::total_cmp);
    let lo_v = *lo_v;
    // x[lo + 1] is the smallest value above the selected one (none when lo = n - 1).
    let hi_v = above.iter().copied().min_by(f64::total_cmp).unwrap_or(lo_v);
    (lo_v + (h - lo as f64) * (hi_v - lo_v), lo)
}

impl Accumulator for CollectAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.add(&values[0])
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let lists = states[0].as_list::<i32>();
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                self.add(&lists.value(i))?;
            }
        }
        Ok(())
    }
    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let n = self.values.len();
        Ok(vec![ScalarValue::List(Arc::new(float_lists(std::mem::take(&mut self.values).into(), [n])))])
    }
    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        match &self.finish {
            Finish::Quantile(p) => Ok(ScalarValue::Float64(quantile_type7(&mut self.values, *p))),
            Finish::Quantiles(ps) => {
                Ok(ScalarValue::List(Arc::new(quantile_lists(vec![quantiles_type7(&mut self.values, ps)]))))
            }
            Finish::BootstrapMeanCi { resamples, seed } => {
                // The values arrive in whatever order the plan's partitions
                // produce them; sorting makes the resamples, and so the
                // interval, depend on the values alone.
                self.values.sort_by(f64::total_cmp);
                let s = bootstrap::summarize(&self.values, *resamples, *seed);
                let ci =
                    |x: f64| Arc::new(Float64Array::from(vec![(!self.values.is_empty()).then_some(x)])) as ArrayRef;
                let fields = bootstrap_fields();
                Ok(ScalarValue::Struct(Arc::new(StructArray::try_new(fields, vec![ci(s.ci_lo), ci(s.ci_hi)], None)?)))
            }
        }
    }
    fn size(&self) -> usize {
        size_of_val(self) + self.values.capacity() * size_of::<f64>()
    }
}

// ---------------------------------------------------------------- price_usd

#[derive(Debug)]
struct PriceUsd {
    pricing: Arc<Pricing>,
    signature: Signature,
}

same_if_same_config!(PriceUsd, pricing);

fn price_fields() -> Fields {
    PRICE_FIELDS.iter().map(|n| Field::new(*n, DataType::Float64, true)).collect()
}

impl ScalarUDFImpl for PriceUsd {
    fn name(&self) -> &str {
        "price_usd"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Struct(price_fields()))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        // Whatever the timestamp's unit and zone, compare instants in µs since the epoch.
        let ts = cast(&cast(&arrays[1], &DataType::Timestamp(TimeUnit::Microsecond, None))?, &DataType::Int64)?;
        let ints: Vec<ArrayRef> = arrays[2..6].iter().map(|a| cast(a, &DataType::Int64)).collect::<Result<_, _>>()?;
        let ints: Vec<_> = ints.iter().map(|a| a.as_primitive::<Int64Type>()).collect();
        let rows = PricedRows { ts: ts.as_primitive::<Int64Type>(), ints: &ints, n: args.number_rows };
        // Model names are read where they are (tables scan strings as views): no copy of the column.
        let prices = match arrays[0].data_type() {
            DataType::Utf8View => self.prices(arrays[0].as_string_view(), rows),
            DataType::Utf8 => self.prices(arrays[0].as_string::<i32>(), rows),
            DataType::LargeUtf8 => self.prices(arrays[0].as_string::<i64>(), rows),
            _ => self.prices(cast(&arrays[0], &DataType::Utf8)?.as_string::<i32>(), rows),
        }?;
        Ok(ColumnarValue::Array(Arc::new(prices)))
    }
}

/// The arguments of `price_usd` after the model: the time (µs) and the four token counts.
#[derive(Clone, Copy)]
struct PricedRows<'a> {
    ts: &'a arrow::array::Int64Array,
    ints: &'a [&'a arrow::array::Int64Array],
    n: usize,
}

impl PriceUsd {
    /// The price struct of each row: `models[i]`'s price at `rows.ts[i]` for its
    /// token counts; null (with null fields) when an argument is null or no
    /// price applies.
    fn prices<'a>(&self, models: impl ArrayAccessor<Item = &'a str>, rows: PricedRows<'_>) -> DfResult<StructArray> {
        let PricedRows { ts, ints, n } = rows;
        // The five fields, then one validity for the struct and all of them.
        let mut columns: [Vec<f64>; 5] = std::array::from_fn(|_| Vec::with_capacity(n));
        let mut valid = Vec::with_capacity(n);
        // A batch holds few distinct models, often in runs: each name is
        // resolved (regexes included) once, and a row of the same model as the
        // row before skips the lookup.
        let mut cache: datafusion::common::HashMap<&str, Option<&Schedule>> = Default::default();
        let mut last: Option<(&str, Option<&Schedule>)> = None;
        for i in 0..n {
            let cost = if models.is_valid(i) && ts.is_valid(i) && ints.iter().all(|a| a.is_valid(i)) {
                let model = models.value(i);
                let schedule = match last {
                    Some((name, schedule)) if name == model => schedule,
                    _ => {
                        let schedule = *cache.entry(model).or_insert_with(|| self.pricing.schedule(model));
                        last = Some((model, schedule));
                        schedule
                    }
                };
                schedule.and_then(|s| s.at(ts.value(i))).map(|e| {
                    let u = Usage {
                        prompt: ints[0].value(i),
                        cached: ints[1].value(i),
                        cache_write: ints[2].value(i),
                        completion: ints[3].value(i),
                    };
                    super::pricing::cost_with(e, u)
                })
            } else {
                None
            };
            let fields = cost.map_or([0.0; 5], |c| [c.input, c.cached_input, c.cache_write, c.output, c.total()]);
            for (column, v) in columns.iter_mut().zip(fields) {
                column.push(v);
            }
            valid.push(cost.is_some());
        }
        // Children are null too, so `price_usd(...)['total_usd']` is null for unpriced rows.
        let nulls = NullBuffer::from(valid);
        let nulls = (nulls.null_count() > 0).then_some(nulls);
        let children: Vec<ArrayRef> =
            columns.into_iter().map(|c| Arc::new(Float64Array::new(c.into(), nulls.clone())) as ArrayRef).collect();
        Ok(StructArray::try_new(price_fields(), children, nulls)?)
    }
}

// ---------------------------------------------------------------- is_eos_marker

#[derive(Debug)]
struct IsEosMarker {
    markers: Arc<EosMarkers>,
    signature: Signature,
}

same_if_same_config!(IsEosMarker, markers);

impl ScalarUDFImpl for IsEosMarker {
    fn name(&self) -> &str {
        "is_eos_marker"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Boolean)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        // Tables scan strings as views: read them where they are (a cast of a
        // view column is the same column; other string types get views over
        // their own buffers), not copied into a new string column.
        let tokens = cast(&arrays[0], &DataType::Utf8View)?;
        let tokens = tokens.as_string_view();
        let models = arrays.get(1).map(|m| cast(m, &DataType::Utf8View)).transpose()?;
        let models = models.as_ref().map(|m| m.as_string_view());
        let matcher = self.markers.matcher();
        let out: BooleanArray = (0..tokens.len())
            .map(|i| {
                let model = models.filter(|m| m.is_valid(i)).map(|m| m.value(i));
                tokens.is_valid(i).then(|| matcher.is_marker(model, tokens.value(i)))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

// ---------------------------------------------------------------- kv_cache_bytes

#[derive(Debug)]
struct KvCacheBytes {
    architectures: Arc<Architectures>,
    signature: Signature,
}

same_if_same_config!(KvCacheBytes, architectures);

impl ScalarUDFImpl for KvCacheBytes {
    fn name(&self) -> &str {
        "kv_cache_bytes"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let models = cast(&arrays[0], &DataType::Utf8)?;
        let models = models.as_string::<i32>();
        let tokens = cast(&arrays[1], &DataType::Int64)?;
        let tokens = tokens.as_primitive::<Int64Type>();
        let tp = arrays.get(2).map(|a| cast(a, &DataType::Int64)).transpose()?;
        let tp = tp.as_ref().map(|a| a.as_primitive::<Int64Type>());
        if models.len() != tokens.len() {
            return exec_err!("kv_cache_bytes: argument lengths differ");
        }
        let mut cache: HashMap<&str, Option<&Arch>> = HashMap::new();
        let out: Float64Array = (0..models.len())
            .map(|i| {
                if models.is_null(i) || tokens.is_null(i) || tp.is_some_and(|t| t.is_null(i)) {
                    return None;
                }
                let m = models.value(i);
                let arch = (*cache.entry(m).or_insert_with(|| self.architectures.get(m)))?;
                let per_token = match tp {
                    Some(t) => arch.bytes_per_token_per_gpu(arch.tensor_parallel_or(t.value(i).max(0) as u64)),
                    None => arch.bytes_per_token(),
                };
                Some(per_token * tokens.value(i) as f64)
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

// ---------------------------------------------------------------- kv_tensor_parallel

#[derive(Debug)]
struct KvTensorParallel {
    architectures: Arc<Architectures>,
    signature: Signature,
}

same_if_same_config!(KvTensorParallel, architectures);

impl ScalarUDFImpl for KvTensorParallel {
    fn name(&self) -> &str {
        "kv_tensor_parallel"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let models = cast(&arrays[0], &DataType::Utf8)?;
        let models = models.as_string::<i32>();
        let tp = cast(&arrays[1], &DataType::Int64)?;
        let tp = tp.as_primitive::<Int64Type>();
        let out: arrow::array::Int64Array = (0..models.len())
            .map(|i| {
                if models.is_null(i) || tp.is_null(i) {
                    return None;
                }
                let arch = self.architectures.get(models.value(i))?;
                Some(arch.tensor_parallel_or(tp.value(i).max(0) as u64) as i64)
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

// ---------------------------------------------------------------- kl_divergence

#[derive(Debug, PartialEq, Eq, Hash)]
struct KlDivergence {
    signature: Signature,
}

/// The values of row `i` of a list of floats: `None` for a null list, an
/// error for a null element.
fn list_row(lists: &ListArray, i: usize, side: &str) -> DfResult<Option<Vec<f64>>> {
    if lists.is_null(i) {
        return Ok(None);
    }
    let values = lists.value(i);
    let values = values.as_primitive::<Float64Type>();
    if let Some(j) = (0..values.len()).find(|&j| values.is_null(j)) {
        return exec_err!("kl_divergence: {side}[{j}] is null");
    }
    Ok(Some(values.values().to_vec()))
}

impl ScalarUDFImpl for KlDivergence {
    fn name(&self) -> &str {
        "kl_divergence"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        for t in &arg_types[..2] {
            if !matches!(t, DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) | DataType::Null) {
                return plan_err!("kl_divergence(p, q [, normalize]) takes two arrays of numbers, got {t}");
            }
        }
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let list = DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)));
        let (p, q) = (cast(&arrays[0], &list)?, cast(&arrays[1], &list)?);
        let (p, q) = (p.as_list::<i32>(), q.as_list::<i32>());
        let normalize = arrays.get(2).map(|a| cast(a, &DataType::Boolean)).transpose()?;
        let normalize = normalize.as_ref().map(|a| a.as_boolean());
        let mut out = Float64Builder::with_capacity(p.len());
        for i in 0..p.len() {
            let flag = match normalize {
                Some(n) if n.is_null(i) => None,
                Some(n) => Some(n.value(i)),
                None => Some(false),
            };
            match (list_row(p, i, "p")?, list_row(q, i, "q")?, flag) {
                (Some(p), Some(q), Some(flag)) => match kl::kl_divergence_bits(&p, &q, flag) {
                    Ok(d) => out.append_value(d),
                    Err(e) => return exec_err!("kl_divergence: {e}"),
                },
                _ => out.append_null(),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

#[cfg(test)]
mod tests {
    use super::{quantile_type7, quantiles_type7};

    /// Several quantiles at once are each the single quantile, bit for bit:
    /// ties, signed zeros, one value, quantiles out of order and repeated.
    #[test]
    fn each_declared_name_is_the_name_the_function_registers() {
        for p in super::Plain::ALL {
            assert_eq!(p.build().name(), p.name());
        }
        let config = crate::engine::UdfConfig::new().unwrap();
        let configured: Vec<String> = super::Function::all(&config)
            .iter()
            .filter(|f| f.is_configured())
            .map(|f| f.build().name().to_string())
            .collect();
        assert_eq!(configured, super::CONFIGURED);
    }

    #[test]
    fn quantiles_at_once_equal_each_alone() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / 1e3
        };
        let ps = [0.99, 0.5, 0.0, 0.95, 1.0, 0.5, 0.333];
        let mut cases: Vec<Vec<f64>> = vec![vec![3.0], vec![-0.0, 0.0, 0.0, -0.0], vec![5.0; 9]];
        cases.extend([2, 10, 101, 1000].map(|n| (0..n).map(|i| if i % 7 == 0 { 1.5 } else { next() }).collect()));
        for values in cases {
            let at_once = quantiles_type7(&mut values.clone(), &ps);
            for (p, got) in ps.iter().zip(at_once) {
                let alone = quantile_type7(&mut values.clone(), *p);
                assert_eq!(got.map(f64::to_bits), alone.map(f64::to_bits), "p {p} of {} values", values.len());
            }
        }
        assert_eq!(quantiles_type7(&mut [], &[0.5, 0.9]), vec![None, None]);
    }

    #[test]
    fn type7_matches_hand_values() {
        // n = 4: h = 0.5 * 3 = 1.5 -> 20 + 0.5 * 10 = 25; p95: h = 2.85 -> 30 + 0.85 * 10.
        assert_eq!(quantile_type7(&mut [40.0, 10.0, 30.0, 20.0], 0.5), Some(25.0));
        assert!((quantile_type7(&mut [40.0, 10.0, 30.0, 20.0], 0.95).unwrap() - 38.5).abs() < 1e-12);
        assert_eq!(quantile_type7(&mut [7.0], 0.99), Some(7.0));
        assert_eq!(quantile_type7(&mut [1.0, 2.0], 1.0), Some(2.0));
        assert_eq!(quantile_type7(&mut [], 0.5), None);
    }
}
