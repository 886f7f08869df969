//! `moe_routing`: one row per router record of a mixture-of-experts model
//! (the `moe_routing` format): token assignments sent to one expert of one
//! layer. Read by the `moe_load` job.

use super::append::TableRow;
use super::columns::table;
use crate::record::LineOrigin;
use crate::redact::Redactor;

/// One router record, as the `moe_routing` format parses it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MoeRoutingRow {
    /// The request, when logged per request; `None` for aggregated records.
    pub request_id: Option<String>,
    /// MoE layer index.
    pub layer: i32,
    /// Expert index within the layer.
    pub expert_id: i32,
    /// Token assignments routed to the expert (with top-k routing a token counts once per chosen expert).
    pub tokens: i64,
    /// Experts chosen per token (top-k), when logged.
    pub k: Option<i32>,
    /// Experts in the layer, when logged.
    pub num_experts: Option<i32>,
}

table! {
    /// One row per MoE router record: token assignments sent to one expert of one layer.
    pub table MoeRoutingBuilder(m: &MoeRoutingRow, o: &LineOrigin<'_>) {
        name: "moe_routing",
        key: ["source_file", "source_line"],
        partition: None,
        written_by: Ingest,
    } {
        /// The request, when the router logs per request; null for aggregated records.
        request_id: Utf8 nullable [NoStatistics] = m.request_id.as_deref(),
        /// MoE layer index (>= 0).
        layer: Int32 = m.layer,
        /// Expert index within the layer (>= 0, below num_experts when logged).
        expert_id: Int32 = m.expert_id,
        /// Token assignments routed to this expert; with top-k routing each token counts once per expert it is sent to.
        tokens: Int64 = m.tokens,
        /// Experts chosen per token (top-k), when logged.
        k: Int32 nullable = m.k,
        /// Experts in the layer, when logged.
        num_experts: Int32 nullable = m.num_experts,
        /// Input path or object URL.
        source_file: Utf8 [Dictionary] = o.file,
        /// 1-based line number in the decompressed input.
        source_line: UInt64 = o.line_no,
    }
}

impl TableRow for MoeRoutingRow {
    type Builder = MoeRoutingBuilder;

    fn append(&self, builder: &mut MoeRoutingBuilder, origin: &LineOrigin<'_>, _: &Redactor) -> Option<i32> {
        builder.append(self, origin);
        None
    }
}
