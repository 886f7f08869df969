//! How tokscope's SQL functions travel inside Ballista's plans.
//!
//! Ballista serialises the logical plan (client to scheduler) and each
//! stage's physical plan (scheduler to executors) with extension codecs.
//! These codecs wrap Ballista's own (plan nodes, table providers and file
//! formats pass straight through) and give every tokscope function a payload:
//! `price_usd` carries the client's prices, `kv_cache_bytes` its model
//! shapes, `is_eos_marker` its markers; the others carry a tag. So:
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
use crate::engine::udfs::{self, Function};
use tokscope_core::derive::EosMarkers;

const MAGIC: &[u8; 4] = b"TKSF";
/// Bumped when a payload's meaning changes: a cluster with mixed tokscope
/// builds then fails with a clear error instead of computing differently.
const VERSION: u8 = 1;

const PRICE_USD: u8 = 1;
const KV_CACHE_BYTES: u8 = 2;
const IS_EOS_MARKER: u8 = 3;
const REDUNDANCY_BOUND: u8 = 4;
const QUANTILE_CONT: u8 = 5;
const BOOTSTRAP_MEAN_CI: u8 = 6;

/// The payload of `function` (empty for functions that are not tokscope's:
/// those travel by name).
pub fn encode(function: &Function) -> DfResult<Vec<u8>> {
    let (kind, body) = match function {
        Function::PriceUsd(p) => (PRICE_USD, compress(&p.to_wire())?),
        Function::KvCacheBytes(a) => (KV_CACHE_BYTES, compress(&a.to_wire())?),
        Function::IsEosMarker(m) => (IS_EOS_MARKER, compress(m.as_ref())?),
        Function::RedundancyBound => (REDUNDANCY_BOUND, Vec::new()),
        Function::QuantileCont => (QUANTILE_CONT, Vec::new()),
        Function::BootstrapMeanCi => (BOOTSTRAP_MEAN_CI, Vec::new()),
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

/// The scalar function a payload describes; `None` when it is not tokscope's.
pub fn decode_udf(name: &str, buf: &[u8]) -> DfResult<Option<Arc<ScalarUDF>>> {
    let Some((kind, body)) = split(name, buf)? else { return Ok(None) };
    let udf = match kind {
        PRICE_USD => {
            let pricing = cached(&PRICINGS, body, || Pricing::from_wire(decompress(body, name)?).map_err(to_df))?;
            udfs::price_usd(pricing)
        }
        KV_CACHE_BYTES => {
            let arch = cached(&ARCHITECTURES, body, || Architectures::from_wire(decompress(body, name)?).map_err(to_df))?;
            udfs::kv_cache_bytes(arch)
        }
        IS_EOS_MARKER => udfs::is_eos_marker(cached(&MARKERS, body, || decompress(body, name))?),
        REDUNDANCY_BOUND => udfs::redundancy_bound(),
        other => return plan_err!("tokscope payload of kind {other} is not a scalar function ({name})"),
    };
    Ok(Some(Arc::new(udf)))
}

/// The aggregate a payload describes; `None` when it is not tokscope's.
pub fn decode_udaf(name: &str, buf: &[u8]) -> DfResult<Option<Arc<AggregateUDF>>> {
    let Some((kind, _)) = split(name, buf)? else { return Ok(None) };
    match kind {
        QUANTILE_CONT => Ok(Some(Arc::new(udfs::quantile_cont()))),
        BOOTSTRAP_MEAN_CI => Ok(Some(Arc::new(udfs::bootstrap_mean_ci()))),
        other => plan_err!("tokscope payload of kind {other} is not an aggregate function ({name})"),
    }
}

fn encode_udf_into(node: &ScalarUDF, buf: &mut Vec<u8>) -> DfResult<()> {
    if let Some(function) = Function::of_udf(node) {
        buf.extend(encode(&function)?);
    }
    Ok(())
}

fn encode_udaf_into(node: &AggregateUDF, buf: &mut Vec<u8>) -> DfResult<()> {
    if let Some(function) = Function::of_udaf(node) {
        buf.extend(encode(&function)?);
    }
    Ok(())
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
    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<ScalarUDF>> {
        match decode_udf(name, buf)? {
            Some(udf) => Ok(udf),
            None => self.inner.try_decode_udf(name, buf),
        }
    }
    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_udf_into(node, buf)
    }
    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<AggregateUDF>> {
        match decode_udaf(name, buf)? {
            Some(udaf) => Ok(udaf),
            None => self.inner.try_decode_udaf(name, buf),
        }
    }
    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_udaf_into(node, buf)
    }
    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }
    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        self.inner.try_encode_udwf(node, buf)
    }
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
    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<ScalarUDF>> {
        match decode_udf(name, buf)? {
            Some(udf) => Ok(udf),
            None => self.inner.try_decode_udf(name, buf),
        }
    }
    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_udf_into(node, buf)
    }
    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<AggregateUDF>> {
        match decode_udaf(name, buf)? {
            Some(udaf) => Ok(udaf),
            None => self.inner.try_decode_udaf(name, buf),
        }
    }
    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        encode_udaf_into(node, buf)
    }
    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }
    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        self.inner.try_encode_udwf(node, buf)
    }
}
