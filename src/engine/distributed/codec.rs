//! How tokscope's SQL functions travel inside Ballista's plans.
//!
//! Ballista serialises the logical plan (client to scheduler) and each
//! stage's physical plan (scheduler to executors) with extension codecs.
//! These codecs wrap Ballista's own (plan nodes, table providers and file
//! formats pass straight through) and give every tokscope function (scalar,
//! aggregate and window) a payload: `price_usd` carries the client's prices,
//! `kv_cache_bytes` and `kv_tensor_parallel` its model shapes,
//! `is_eos_marker` its markers; the others carry a tag. So:
//!
//! - executors need no configuration file, and a client's `--pricing` can
//!   never differ from what an executor computes with;
//! - a function never falls back to a by-name lookup on the remote side,
//!   where DataFusion's own `quantile_cont` (an alias of `percentile_cont`,
//!   whose interpolation weight is truncated) would take the place of
//!   tokscope's exact one.
//!
//! A payload is `TKSF`, a version byte, a kind byte, then the configuration
//! as zstd-compressed JSON (floats as bits: see `PricingWire`). Decoded
//! configurations are cached by the SHA-256 of the payload, so the tasks of
//! a job share one table instead of parsing it each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion::catalog::TableProvider;
use datafusion::common::{plan_err, Result as DfResult, TableReference};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, Extension, LogicalPlan, ScalarUDF, WindowUDF};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::engine::architectures::Architectures;
use crate::engine::pricing::Pricing;
use crate::engine::udfs::{Configuration, Function, Plain, Udf};
use tokscope_core::derive::EosMarkers;

const MAGIC: &[u8; 4] = b"TKSF";
/// Bumped when a payload's meaning changes: a cluster with mixed tokscope
/// builds then fails with a clear error instead of computing differently.
const VERSION: u8 = 1;

// Configured functions carry the payload tag their declaration gives
// (`udfs::configured_functions!`, below this base).
/// Plain functions: this plus their index in [`Plain::ALL`] (new ones go at its end).
const PLAIN_BASE: u8 = 32;

/// The payload of `function` (never empty: an empty payload means "look the
/// function up by name", which a tokscope function must never be).
pub fn encode(function: &Function) -> DfResult<Vec<u8>> {
    let (kind, body) = match (function, function.configuration()?) {
        (_, Some(tagged)) => tagged,
        (Function::Plain(p), None) => {
            let index = Plain::ALL.iter().position(|q| q == p).unwrap_or_default();
            (PLAIN_BASE + index as u8, Vec::new())
        }
        (_, None) => {
            return plan_err!(
                "tokscope function {}: a configured function without its payload",
                function.build().name()
            )
        }
    };
    let mut buf = Vec::with_capacity(6 + body.len());
    buf.extend_from_slice(MAGIC);
    buf.push(VERSION);
    buf.push(kind);
    buf.extend_from_slice(&body);
    Ok(buf)
}

fn compress(value: &impl Serialize) -> DfResult<Vec<u8>> {
    let json = serde_json::to_vec(value).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    zstd::encode_all(json.as_slice(), 3).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))
}

fn decompress<T: DeserializeOwned>(body: &[u8], name: &str) -> DfResult<T> {
    let json = zstd::decode_all(body).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    serde_json::from_slice(&json)
        .map_err(|e| datafusion::error::DataFusionError::Plan(format!("tokscope function {name}: bad payload: {e}")))
}

/// The kind and body of a tokscope payload; `None` when `buf` is not one.
fn split<'b>(name: &str, buf: &'b [u8]) -> DfResult<Option<(u8, &'b [u8])>> {
    match buf.strip_prefix(MAGIC.as_slice()) {
        None => Ok(None),
        Some([version, kind, body @ ..]) if *version == VERSION => Ok(Some((*kind, body))),
        Some([version, ..]) => plan_err!(
            "tokscope function {name} was encoded by a tokscope whose plan format is {version}, this one reads \
             {VERSION}: run the same tokscope build on the client, the scheduler and every executor"
        ),
        Some([]) => plan_err!("tokscope function {name}: truncated payload"),
    }
}

/// Decoded configurations by payload digest, shared by every task of the process.
fn cached<T: Send + Sync + 'static>(
    cache: &'static OnceLock<Mutex<HashMap<[u8; 32], Arc<T>>>>,
    body: &[u8],
    decode: impl FnOnce() -> DfResult<T>,
) -> DfResult<Arc<T>> {
    let key: [u8; 32] = Sha256::digest(body).into();
    let map = cache.get_or_init(Default::default);
    if let Some(found) = map.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return Ok(found);
    }
    let value = Arc::new(decode()?);
    if let Ok(mut m) = map.lock() {
        m.insert(key, Arc::clone(&value));
    }
    Ok(value)
}

static PRICINGS: OnceLock<Mutex<HashMap<[u8; 32], Arc<Pricing>>>> = OnceLock::new();
static ARCHITECTURES: OnceLock<Mutex<HashMap<[u8; 32], Arc<Architectures>>>> = OnceLock::new();
static MARKERS: OnceLock<Mutex<HashMap<[u8; 32], Arc<EosMarkers>>>> = OnceLock::new();

fn to_df(e: crate::Error) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::Plan(e.to_string())
}

/// The function a payload describes; `None` when `buf` is not a tokscope payload.
pub fn decode(name: &str, buf: &[u8]) -> DfResult<Option<Udf>> {
    let Some((kind, body)) = split(name, buf)? else { return Ok(None) };
    let function = match Function::from_configuration(kind, body, name)? {
        Some(configured) => configured,
        None => match Plain::ALL.get(usize::from(kind.wrapping_sub(PLAIN_BASE))) {
            Some(p) if kind >= PLAIN_BASE => Function::Plain(*p),
            _ => {
                return plan_err!(
                    "tokscope function {name}: unknown payload kind {kind} (run the same tokscope build on the \
                     client, the scheduler and every executor)"
                )
            }
        },
    };
    let udf = function.build();
    if udf.name() != name {
        return plan_err!("tokscope payload for {} arrived as function {name}", udf.name());
    }
    Ok(Some(udf))
}

impl Configuration for Pricing {
    fn encode(&self) -> DfResult<Vec<u8>> {
        compress(&self.to_wire())
    }

    fn decode(body: &[u8], name: &str) -> DfResult<Arc<Self>> {
        cached(&PRICINGS, body, || Pricing::from_wire(decompress(body, name)?).map_err(|e| to_df(e.into())))
    }
}

impl Configuration for Architectures {
    fn encode(&self) -> DfResult<Vec<u8>> {
        compress(&self.to_wire())
    }

    fn decode(body: &[u8], name: &str) -> DfResult<Arc<Self>> {
        cached(&ARCHITECTURES, body, || Architectures::from_wire(decompress(body, name)?).map_err(|e| to_df(e.into())))
    }
}

impl Configuration for EosMarkers {
    fn encode(&self) -> DfResult<Vec<u8>> {
        compress(self)
    }

    fn decode(body: &[u8], name: &str) -> DfResult<Arc<Self>> {
        cached(&MARKERS, body, || decompress(body, name))
    }
}

fn wrong_kind(name: &str, udf: &Udf, expected: &str) -> datafusion::error::DataFusionError {
    let found = match udf {
        Udf::Scalar(_) => "scalar function",
        Udf::Aggregate(_) => "aggregate",
        Udf::Window(_) => "window function",
    };
    datafusion::error::DataFusionError::Plan(format!(
        "tokscope payload for {name} describes a {found}, where a {expected} was expected"
    ))
}

/// The scalar function a payload describes; `None` when it is not tokscope's.
pub fn decode_udf(name: &str, buf: &[u8]) -> DfResult<Option<Arc<ScalarUDF>>> {
    match decode(name, buf)? {
        None => Ok(None),
        Some(Udf::Scalar(f)) => Ok(Some(Arc::new(f))),
        Some(other) => Err(wrong_kind(name, &other, "scalar function")),
    }
}

/// The aggregate a payload describes; `None` when it is not tokscope's.
pub fn decode_udaf(name: &str, buf: &[u8]) -> DfResult<Option<Arc<AggregateUDF>>> {
    match decode(name, buf)? {
        None => Ok(None),
        Some(Udf::Aggregate(f)) => Ok(Some(Arc::new(f))),
        Some(other) => Err(wrong_kind(name, &other, "aggregate")),
    }
}

/// The window function a payload describes; `None` when it is not tokscope's.
pub fn decode_udwf(name: &str, buf: &[u8]) -> DfResult<Option<Arc<WindowUDF>>> {
    match decode(name, buf)? {
        None => Ok(None),
        Some(Udf::Window(f)) => Ok(Some(Arc::new(f))),
        Some(other) => Err(wrong_kind(name, &other, "window function")),
    }
}

fn encode_into(function: Option<Function>, buf: &mut Vec<u8>) -> DfResult<()> {
    if let Some(function) = function {
        buf.extend(encode(&function)?);
    }
    Ok(())
}

/// The function hooks both codecs share: tokscope's functions by payload,
/// everything else through Ballista's codec (`self.inner`).
macro_rules! function_hooks {
    () => {
        fn try_decode_udf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<ScalarUDF>> {
            match decode_udf(name, buf)? {
                Some(udf) => Ok(udf),
                None => self.inner.try_decode_udf(name, buf),
            }
        }
        fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> DfResult<()> {
            encode_into(Function::of_udf(node), buf)
        }
        fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<AggregateUDF>> {
            match decode_udaf(name, buf)? {
                Some(udaf) => Ok(udaf),
                None => self.inner.try_decode_udaf(name, buf),
            }
        }
        fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> DfResult<()> {
            encode_into(Function::of_udaf(node), buf)
        }
        fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<WindowUDF>> {
            match decode_udwf(name, buf)? {
                Some(udwf) => Ok(udwf),
                None => self.inner.try_decode_udwf(name, buf),
            }
        }
        fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> DfResult<()> {
            encode_into(Function::of_udwf(node), buf)
        }
    };
}

/// Ballista's logical codec, with tokscope's functions carried in the plan.
#[derive(Debug, Default)]
pub struct LogicalCodec {
    inner: BallistaLogicalExtensionCodec,
}

impl LogicalExtensionCodec for LogicalCodec {
    fn try_decode(&self, buf: &[u8], inputs: &[LogicalPlan], ctx: &TaskContext) -> DfResult<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }
    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> DfResult<()> {
        self.inner.try_encode(node, buf)
    }
    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: arrow::datatypes::SchemaRef,
        ctx: &TaskContext,
    ) -> DfResult<Arc<dyn TableProvider>> {
        self.inner.try_decode_table_provider(buf, table_ref, schema, ctx)
    }
    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> DfResult<()> {
        self.inner.try_encode_table_provider(table_ref, node, buf)
    }
    fn try_decode_file_format(&self, buf: &[u8], ctx: &TaskContext) -> DfResult<Arc<dyn FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }
    fn try_encode_file_format(&self, buf: &mut Vec<u8>, node: Arc<dyn FileFormatFactory>) -> DfResult<()> {
        self.inner.try_encode_file_format(buf, node)
    }
    function_hooks!();
}

/// Ballista's physical codec, with tokscope's functions carried in the plan.
#[derive(Debug, Default)]
pub struct PhysicalCodec {
    inner: BallistaPhysicalExtensionCodec,
}

impl PhysicalExtensionCodec for PhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.inner.try_decode(buf, inputs, ctx, proto_converter)
    }
    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<()> {
        self.inner.try_encode(node, buf, proto_converter)
    }
    function_hooks!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configured() -> (Arc<Pricing>, Arc<Architectures>, Arc<EosMarkers>) {
        let pricing = Pricing::from_toml(
            "[[model]]\nmodel = \"m\"\ninput = 0.1\noutput = 0.3\n[[model]]\npattern = \"gpt-.*\"\ninput = 1.0\noutput = 2.0\n",
            "test",
        )
        .unwrap();
        (Arc::new(pricing), Arc::new(Architectures::bundled().unwrap()), Arc::new(EosMarkers::default()))
    }

    #[test]
    fn every_function_travels_with_a_payload_and_comes_back_the_same() {
        let (pricing, architectures, markers) = configured();
        let config = crate::engine::UdfConfig { pricing, architectures, markers, attributes: Default::default() };
        let all = Function::all(&config);
        assert_eq!(all.len(), crate::engine::udfs::CONFIGURED.len() + Plain::ALL.len());
        for function in &all {
            let udf = function.build();
            let mut buf = Vec::new();
            // Through the same hooks the plan serialisers call.
            match &udf {
                Udf::Scalar(f) => LogicalCodec::default().try_encode_udf(f, &mut buf).unwrap(),
                Udf::Aggregate(f) => LogicalCodec::default().try_encode_udaf(f, &mut buf).unwrap(),
                Udf::Window(f) => LogicalCodec::default().try_encode_udwf(f, &mut buf).unwrap(),
            }
            assert!(buf.starts_with(MAGIC), "{} has no tokscope payload", udf.name());
            let back = match &udf {
                Udf::Scalar(_) => {
                    Udf::Scalar(PhysicalCodec::default().try_decode_udf(udf.name(), &buf).unwrap().as_ref().clone())
                }
                Udf::Aggregate(_) => {
                    Udf::Aggregate(PhysicalCodec::default().try_decode_udaf(udf.name(), &buf).unwrap().as_ref().clone())
                }
                Udf::Window(_) => {
                    Udf::Window(PhysicalCodec::default().try_decode_udwf(udf.name(), &buf).unwrap().as_ref().clone())
                }
            };
            assert_eq!(back.name(), udf.name());
            assert_eq!(back.impl_type(), udf.impl_type(), "{}", udf.name());
            assert_eq!(
                function.is_configured(),
                crate::engine::udfs::CONFIGURED.contains(&udf.name()),
                "{}",
                udf.name()
            );
            match (function, Function::of_udf_any(&back)) {
                (Function::PriceUsd(a), Some(Function::PriceUsd(b))) => assert_eq!(a.to_wire(), b.to_wire()),
                (Function::KvCacheBytes(a), Some(Function::KvCacheBytes(b)))
                | (Function::KvTensorParallel(a), Some(Function::KvTensorParallel(b))) => {
                    assert_eq!(a.to_wire(), b.to_wire())
                }
                (Function::IsEosMarker(a), Some(Function::IsEosMarker(b))) => {
                    assert_eq!(serde_json::to_value(a.as_ref()).unwrap(), serde_json::to_value(b.as_ref()).unwrap())
                }
                (Function::Plain(a), Some(Function::Plain(b))) => assert_eq!(*a, b),
                (a, b) => panic!("{a:?} came back as {b:?}"),
            }
        }
    }

    #[test]
    fn datafusion_functions_travel_by_name_and_bad_payloads_are_refused() {
        let ctx = datafusion::prelude::SessionContext::new();
        let state = ctx.state();
        // DataFusion's quantile_cont (an alias of percentile_cont) is not tokscope's.
        let percentile = state.aggregate_functions().get("quantile_cont").cloned().unwrap();
        let mut buf = Vec::new();
        LogicalCodec::default().try_encode_udaf(&percentile, &mut buf).unwrap();
        assert!(buf.is_empty());
        let sum = state.aggregate_functions().get("sum").cloned().unwrap();
        LogicalCodec::default().try_encode_udaf(&sum, &mut buf).unwrap();
        assert!(buf.is_empty());
        let mut stale = encode(&Function::Plain(Plain::QuantileCont)).unwrap();
        stale[4] = VERSION + 1;
        let err = LogicalCodec::default().try_decode_udaf("quantile_cont", &stale).unwrap_err().to_string();
        assert!(err.contains("same tokscope build"), "{err}");
        let scalar = encode(&Function::Plain(Plain::Bleu4)).unwrap();
        let err = LogicalCodec::default().try_decode_udaf("bleu4", &scalar).unwrap_err().to_string();
        assert!(err.contains("scalar function"), "{err}");
    }
}
