//! Files written by the tools themselves (`tests/data/real/`, provenance in
//! its README), read through `ReaderBuilder` as ingest reads them: every
//! request's token counts, cost, times and finish reason against the values
//! in the file, written out by hand.

use std::path::PathBuf;

use arrow_array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use tokscope_core::catalog::tables;
use tokscope_core::formats::Format;
use tokscope_core::reader::{LineCounts, ReaderBuilder};

fn real(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/real").join(name)
}

/// What reading a file gave: its detected format, counts, `requests` and
/// `profiles` rows and reject errors.
struct Read {
    format: Option<&'static str>,
    counts: LineCounts,
    requests: Vec<RecordBatch>,
    profiles: Vec<RecordBatch>,
    errors: Vec<String>,
}

fn read_with(name: &str, builder: ReaderBuilder) -> Read {
    let bytes = std::fs::read(real(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut reader = builder.with_chunk_bytes(4096).build(std::io::Cursor::new(bytes), name);
    let (mut counts, mut requests, mut profiles, mut errors) =
        (LineCounts::default(), Vec::new(), Vec::new(), Vec::new());
    for slices in &mut reader {
        for s in slices.expect("a chunk parses") {
            counts.add(&s.counts);
            requests.extend(s.batch(tables::REQUESTS).cloned());
            profiles.extend(s.batch(tables::PROFILES).cloned());
            if let Some(r) = s.batch(tables::REJECTS) {
                let e = r.column_by_name("error").unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
                errors.extend(e.iter().map(|x| x.unwrap_or_default().to_string()));
            }
        }
    }
    let format = reader.format().map(Format::name);
    assert!(counts.reconciles(), "{name}: {counts:?}");
    Read { format, counts, requests, profiles, errors }
}

fn read(name: &str) -> Read {
    read_with(name, ReaderBuilder::new())
}

impl Read {
    fn column<T: Array + Clone + 'static>(&self, name: &str) -> Vec<T> {
        self.requests
            .iter()
            .map(|b| {
                let c = b.column_by_name(name).unwrap_or_else(|| panic!("no column {name}"));
                c.as_any().downcast_ref::<T>().unwrap_or_else(|| panic!("{name}: {:?}", c.data_type())).clone()
            })
            .collect()
    }

    fn text(&self, name: &str) -> Vec<Option<String>> {
        self.column::<StringArray>(name)
            .iter()
            .flat_map(|a| a.iter().map(|v| v.map(str::to_string)).collect::<Vec<_>>())
            .collect()
    }

    fn int(&self, name: &str) -> Vec<Option<i64>> {
        self.column::<Int64Array>(name).iter().flat_map(|a| a.iter().collect::<Vec<_>>()).collect()
    }

    fn float(&self, name: &str) -> Vec<Option<f64>> {
        self.column::<Float64Array>(name).iter().flat_map(|a| a.iter().collect::<Vec<_>>()).collect()
    }

    fn ts(&self) -> Vec<i64> {
        self.column::<arrow_array::TimestampMicrosecondArray>("ts").iter().flat_map(|a| a.values().to_vec()).collect()
    }
}

/// The `extra` column of each row, as JSON objects (`{}` when null).
fn extras(r: &Read) -> Vec<serde_json::Value> {
    r.text("extra").into_iter().map(|e| serde_json::from_str(e.as_deref().unwrap_or("{}")).unwrap()).collect()
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

/// A row's attribution columns.
#[derive(Debug, PartialEq)]
struct Who {
    user_id: Option<String>,
    team: Option<String>,
    project: Option<String>,
    environment: Option<String>,
    tags: Option<Vec<String>>,
    key_alias: Option<String>,
    provider: Option<String>,
}

/// The attribution a file names, column by column (`None`/`[]`: the column is null).
fn who(user_id: Option<&str>, team: Option<&str>, project: Option<&str>, environment: Option<&str>) -> Who {
    let o = |v: Option<&str>| v.map(str::to_string);
    Who {
        user_id: o(user_id),
        team: o(team),
        project: o(project),
        environment: o(environment),
        tags: None,
        key_alias: None,
        provider: None,
    }
}

impl Who {
    fn tags(mut self, tags: &[&str]) -> Who {
        self.tags = Some(tags.iter().map(|t| t.to_string()).collect());
        self
    }

    fn key_alias(mut self, alias: &str) -> Who {
        self.key_alias = s(alias);
        self
    }

    fn provider(mut self, provider: &str) -> Who {
        self.provider = s(provider);
        self
    }
}

/// The attribution columns of every row as read.
fn attribution(r: &Read) -> Vec<Who> {
    let tags: Vec<Option<Vec<String>>> = r
        .column::<arrow_array::ListArray>("tags")
        .iter()
        .flat_map(|a| {
            a.iter()
                .map(|v| {
                    v.map(|l| {
                        let l = l.as_any().downcast_ref::<StringArray>().expect("tags of text").clone();
                        l.iter().map(|t| t.unwrap_or_default().to_string()).collect()
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let (user, team, project, env) = (r.text("user_id"), r.text("team"), r.text("project"), r.text("environment"));
    let (key_alias, provider) = (r.text("key_alias"), r.text("provider"));
    (0..tags.len())
        .map(|i| Who {
            user_id: user[i].clone(),
            team: team[i].clone(),
            project: project[i].clone(),
            environment: env[i].clone(),
            tags: tags[i].clone(),
            key_alias: key_alias[i].clone(),
            provider: provider[i].clone(),
        })
        .collect()
}

/// Durations compare to the microsecond the formats round them to.
fn assert_ms(got: &[Option<f64>], want: &[Option<f64>], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        match (g, w) {
            (Some(g), Some(w)) => assert!((g - w).abs() < 5e-4, "{what}[{i}] = {g}, want {w}"),
            _ => assert_eq!(g, w, "{what}[{i}]"),
        }
    }
}

#[test]
fn litellm_gcs_bucket_payloads() {
    // litellm_gcs.ndjson: LiteLLM 1.110.2's GCS bucket logger, four calls
    // (the last one streamed); times are epoch seconds.
    let r = read("litellm_gcs.ndjson");
    assert_eq!(r.format, Some("litellm"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (4, 4, 0), "{:?}", r.errors);
    assert_eq!(
        r.text("request_id"),
        [s("chatcmpl-real-1"), s("chatcmpl-real-2"), s("chatcmpl-real-3"), s("chatcmpl-real-1")]
    );
    assert_eq!(r.ts(), [1_796_412_717_265_137, 1_796_412_717_422_141, 1_796_412_717_430_478, 1_796_412_717_441_143]);
    assert_eq!(
        r.text("model"),
        [s("gpt-4o-mini-2024-07-18"), s("gpt-4o-mini-2024-07-18"), s("gpt-4o-mini-2024-07-18"), s("gpt-4o-mini")]
    );
    assert_eq!(r.int("prompt_tokens"), [Some(14), Some(1041), Some(61), Some(14)]);
    assert_eq!(r.int("completion_tokens"), [Some(2), Some(4), Some(15), Some(3)]);
    assert_eq!(r.int("cached_tokens"), [Some(0), Some(1024), Some(0), Some(0)]);
    assert_eq!(r.int("max_tokens"), [Some(64), Some(4), Some(64), None]);
    assert_eq!(
        r.float("logged_cost_usd"),
        [Some(3.2999999999999997e-06), Some(8.175e-05), Some(1.815e-05), Some(3.9e-06)]
    );
    // Not streamed: completionStartTime = endTime is no first token.
    assert_ms(&r.float("ttft_ms"), &[None, None, None, Some(426.043)], "ttft_ms");
    assert_ms(&r.float("latency_ms"), &[Some(148.807), Some(7.344), Some(9.696), Some(457.715)], "latency_ms");
    assert_eq!(r.text("finish_reason_raw"), [s("stop"), s("length"), s("tool_calls"), s("stop")]);
    assert_eq!(r.text("finish_reason"), [s("stop"), s("length"), s("tool_calls"), s("stop")]);
    assert_eq!(r.text("model_output"), [s("Paris."), s("Once upon a time"), None, s("Paris.")]);
    assert_eq!(r.text("model_version"), [s("fp_real"), s("fp_real"), s("fp_real"), s("fp_real")]);
    // Attribution: custom_llm_provider; no user, team, key or tag was given
    // (end_user null, request_tags [], metadata's user_api_key_* null).
    assert_eq!(attribution(&r), (0..4).map(|_| who(None, None, None, None).provider("openai")).collect::<Vec<_>>());
    // Nothing lost: every key the payload has and no column holds, one level
    // down in its objects and its response; not the empty ones (most of the
    // 46 keys and of metadata's 35), not the provider's headers, and of the
    // 9 KB price-map entry only its key (the costs it gave are cost_breakdown).
    let x = extras(&r);
    let keys = |i: usize| x[i].as_object().unwrap().keys().map(String::as_str).collect::<Vec<_>>();
    let common = [
        "api_base",
        "call_type",
        "cost_breakdown",
        "cost_finalized",
        "custom_llm_provider",
        "hidden_params.api_base",
        "hidden_params.litellm_model_name",
        "hidden_params.litellm_overhead_time_ms",
        "litellm_call_id",
        "model_map_information.model_map_key",
        "requested_model",
        "response.created",
        "response.message.role",
        "response.object",
        "saved_cache_cost",
        "standard_built_in_tools_params",
        "status_fields",
        "trace_id",
    ];
    assert_eq!(keys(0), common);
    assert_eq!(keys(1), common);
    let mut tool_call = common.to_vec();
    tool_call.extend(["model_parameters.tools", "response.message.tool_calls"]);
    tool_call.sort();
    assert_eq!(keys(2), tool_call);
    assert_eq!(
        keys(3),
        [
            "api_base",
            "call_type",
            "cost_breakdown",
            "cost_finalized",
            "custom_llm_provider",
            "hidden_params.api_base",
            "litellm_call_id",
            "model_map_information.model_map_key",
            "model_parameters.stream",
            "model_parameters.stream_options",
            "requested_model",
            "response.created",
            "response.message.role",
            "response.object",
            "response.usage.cost",
            "saved_cache_cost",
            "standard_built_in_tools_params",
            "status_fields",
            "stream",
            "trace_id"
        ]
    );
    assert_eq!(x[0]["litellm_call_id"], "e27aa1c4-8881-4505-a846-e371a66fed00");
    assert_eq!(x[0]["model_map_information.model_map_key"], "gpt-4o-mini-2024-07-18");
    assert_eq!(x[1]["cost_breakdown"]["cache_read_cost"], 0.0000768);
    assert_eq!(x[2]["response.message.tool_calls"][0]["function"]["name"], "get_weather");
    assert_eq!(x[3]["model_parameters.stream_options"]["include_usage"], true);
    for e in r.text("extra").into_iter().flatten() {
        assert!(!e.contains("llm_provider-") && !e.contains("input_cost_per_token") && e.len() < 2048, "{e}");
    }
}

#[test]
fn litellm_spend_log_payloads_with_text_times() {
    // litellm_pubsub_v1.ndjson: LiteLLM 1.110.2's spend-logs payload (the GCS
    // Pub/Sub logger's v1 message), built by the proxy's get_logging_payload
    // and serialised as the logger does (json.dumps(default=str)): times are
    // Python datetimes written as text, "2026-12-04 22:35:55.600464+00:00",
    // metadata is JSON held in a string.
    let r = read("litellm_pubsub_v1.ndjson");
    assert_eq!(r.format, Some("litellm"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (4, 4, 0), "{:?}", r.errors);
    assert_eq!(
        r.text("request_id"),
        [s("chatcmpl-real-1"), s("chatcmpl-real-2"), s("chatcmpl-real-3"), s("chatcmpl-real-1")]
    );
    assert_eq!(r.ts(), [1_796_423_755_600_464, 1_796_423_755_756_180, 1_796_423_755_765_672, 1_796_423_755_781_584]);
    assert_eq!(r.text("model"), [s("gpt-4o-mini"), s("gpt-4o-mini"), s("gpt-4o-mini"), s("gpt-4o-mini")]);
    assert_eq!(r.int("prompt_tokens"), [Some(14), Some(1041), Some(61), Some(14)]);
    assert_eq!(r.int("completion_tokens"), [Some(2), Some(4), Some(15), Some(3)]);
    assert_eq!(r.int("cached_tokens"), [Some(0), Some(1024), Some(0), Some(0)]);
    assert_eq!(
        r.float("logged_cost_usd"),
        [Some(3.2999999999999997e-06), Some(8.175e-05), Some(1.815e-05), Some(3.9e-06)]
    );
    // endTime - startTime, to the microsecond; completionStartTime = endTime
    // (the three calls not streamed) is no first token.
    assert_ms(&r.float("latency_ms"), &[Some(129.585), Some(8.597), Some(15.105), Some(749.463)], "latency_ms");
    assert_ms(&r.float("ttft_ms"), &[None, None, None, Some(700.714)], "ttft_ms");
    // Attribution: custom_llm_provider; end_user, user and team_id are "",
    // request_tags "[]", metadata's user_api_key_* null.
    assert_eq!(attribution(&r), (0..4).map(|_| who(None, None, None, None).provider("openai")).collect::<Vec<_>>());
    // Nothing lost but the empty, the hashed key (a credential) and the
    // price-map entry (only its key): what metadata holds in its string too.
    let x = extras(&r);
    let keys = |i: usize| x[i].as_object().unwrap().keys().map(String::as_str).collect::<Vec<_>>();
    assert_eq!(
        keys(0),
        [
            "api_base",
            "cache_key",
            "call_type",
            "custom_llm_provider",
            "litellm_call_id",
            "metadata.billed_retry_attempt",
            "metadata.cost_breakdown",
            "metadata.litellm_call_id",
            "metadata.litellm_overhead_time_ms",
            "metadata.litellm_roi_estimator",
            "metadata.model_map_information.model_map_key",
            "requested_model",
        ]
    );
    assert_eq!(x[1]["metadata.cost_breakdown"]["cache_read_cost"], 0.0000768);
    assert_eq!(x[3]["metadata.model_map_information.model_map_key"], "gpt-4o-mini-2024-07-18");
    for e in r.text("extra").into_iter().flatten() {
        assert!(!e.contains("api_key") && !e.contains("input_cost_per_token") && e.len() < 2048, "{e}");
    }
}

#[test]
fn openinference_spans_of_the_openai_client() {
    // otel_openinference.jsonl: openinference-instrumentation-openai 0.1.66 on
    // openai's client, exported by the OpenTelemetry SDK 1.45.2's OTLP/JSON
    // file exporter; one span per line.
    let r = read("otel_openinference.jsonl");
    assert_eq!(r.format, Some("otel"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.records_skipped), (3, 3, 0), "{:?}", r.errors);
    // The response id from output.value; the model from llm.model_name.
    assert_eq!(r.text("request_id"), [s("chatcmpl-real-1"), s("chatcmpl-real-2"), s("chatcmpl-real-3")]);
    assert_eq!(r.ts(), [1_796_412_776_332_932, 1_796_412_776_344_741, 1_796_412_776_348_763]);
    assert_eq!(
        r.text("model"),
        [s("gpt-4o-mini-2024-07-18"), s("gpt-4o-mini-2024-07-18"), s("gpt-4o-mini-2024-07-18")]
    );
    assert_eq!(r.int("prompt_tokens"), [Some(14), Some(1041), Some(61)]);
    assert_eq!(r.int("completion_tokens"), [Some(2), Some(4), Some(15)]);
    assert_eq!(r.int("cached_tokens"), [Some(0), Some(1024), Some(0)]);
    assert_eq!(r.int("reasoning_tokens"), [Some(0), Some(0), None]);
    // max_tokens from llm.invocation_parameters.
    assert_eq!(r.int("max_tokens"), [Some(64), Some(4), Some(64)]);
    assert_ms(&r.float("latency_ms"), &[Some(10.699), Some(2.893), Some(3.556)], "latency_ms");
    assert_eq!(r.text("finish_reason_raw"), [s("stop"), s("length"), s("tool_calls")]);
    assert_eq!(r.text("model_output"), [s("Paris."), s("Once upon a time"), None]);
    assert_eq!(r.text("prompt")[0], s(r#"[{"role":"user","content":"What is the capital of France?"}]"#));
    // The resource's service.name; llm.system.
    let want = (0..3).map(|_| who(None, None, Some("tokscope-real"), None).provider("openai")).collect::<Vec<_>>();
    assert_eq!(attribution(&r), want);
}

#[test]
fn openllmetry_spans_of_the_openai_client() {
    // otel_openllmetry.jsonl: opentelemetry-instrumentation-openai 0.62.4
    // (OpenLLMetry), same calls and exporter. Its finish reason of a tool
    // call is `tool_call`.
    let r = read("otel_openllmetry.jsonl");
    assert_eq!(r.format, Some("otel"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.finish_reasons_unmapped), (3, 3, 0));
    assert_eq!(r.text("request_id"), [s("chatcmpl-real-1"), s("chatcmpl-real-2"), s("chatcmpl-real-3")]);
    assert_eq!(r.ts(), [1_796_412_776_962_883, 1_796_412_776_968_538, 1_796_412_776_972_535]);
    assert_eq!(r.int("prompt_tokens"), [Some(14), Some(1041), Some(61)]);
    assert_eq!(r.int("completion_tokens"), [Some(2), Some(4), Some(15)]);
    assert_eq!(r.int("cached_tokens"), [Some(0), Some(1024), Some(0)]);
    assert_eq!(r.int("max_tokens"), [Some(64), Some(4), Some(64)]);
    assert_ms(&r.float("latency_ms"), &[Some(5.135), Some(3.649), Some(4.408)], "latency_ms");
    assert_eq!(r.text("finish_reason_raw"), [s("stop"), s("length"), s("tool_call")]);
    assert_eq!(r.text("finish_reason"), [s("stop"), s("length"), s("tool_calls")]);
    assert_eq!(r.text("model_output"), [s("Paris."), s("Once upon a time"), None]);
    // The resource's service.name; gen_ai.provider.name.
    let want = (0..3).map(|_| who(None, None, Some("tokscope-real"), None).provider("openai")).collect::<Vec<_>>();
    assert_eq!(attribution(&r), want);
}

#[test]
fn langfuse_public_api_observations_in_camel_case() {
    // langfuse_api_observations.json: a page of the public API's
    // observations (langfuse 5.2.0's models and serialiser), indented: one
    // document, one record holding a span, a generation and a failed generation.
    let r = read("langfuse_api_observations.json");
    assert_eq!(r.format, Some("langfuse"));
    let c = r.counts;
    assert_eq!((c.lines_read, c.lines_ingested, c.rows_written, c.lines_rejected), (1, 1, 1, 0));
    assert_eq!((c.records_skipped, c.records_rejected), (1, 1), "the span skipped, the failed generation rejected");
    assert!(
        r.errors[0].contains("without usage_details") && r.errors[0].contains("429 Rate limit reached"),
        "{:?}",
        r.errors
    );
    assert_eq!(r.text("request_id"), [s("obs-gen-1")]);
    assert_eq!(r.ts(), [1_737_710_446_857_371]);
    assert_eq!(r.text("model"), [s("gpt-4o-mini-2024-07-18")]);
    assert_eq!(r.text("session_id"), [s("session-real-1")]);
    // usageDetails input 1014 + input_cached_tokens 1024; output 2 (total 2040).
    assert_eq!(
        (r.int("prompt_tokens"), r.int("cached_tokens"), r.int("completion_tokens")),
        (vec![Some(2038)], vec![Some(1024)], vec![Some(2)])
    );
    assert_eq!(r.int("max_tokens"), [Some(256)]);
    assert_eq!(r.float("logged_cost_usd"), [Some(0.0002301)]);
    assert_ms(&r.float("ttft_ms"), &[Some(442.0)], "ttft_ms");
    assert_ms(&r.float("latency_ms"), &[Some(1300.0)], "latency_ms");
    assert_eq!(r.text("finish_reason_raw"), [s("stop")]);
    assert_eq!(r.text("prompt"), [s(r#"[{"role":"user","content":"What is the capital of France?"}]"#)]);
    assert_eq!(r.text("model_output"), [s("Paris.")]);
    // The observation's userId, projectId and environment (Langfuse's "default"); no tags.
    assert_eq!(attribution(&r), [who(Some("user-real-1"), None, Some("proj-1"), Some("default"))]);
    // The API's other keys, camelCase as logged, beside the export's names for the same columns.
    let x = extras(&r);
    assert_eq!((x[0]["projectId"].as_str(), x[0]["trace_id"].as_str()), (Some("proj-1"), Some("trace-real-1")));
    assert_eq!(x[0]["cost_details"]["total"].as_f64(), Some(0.0002301));
    // Every key of the observation that no column holds; modelParameters and
    // metadata whole (a column holds one member of each); the latency column's unit.
    assert_eq!(
        x[0].as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "cost_details",
            "environment",
            "latency_unit",
            "level",
            "metadata",
            "modelParameters",
            "name",
            "parent_observation_id",
            "projectId",
            "trace_id",
            "trace_name",
            "user_id"
        ]
    );
    assert_eq!(x[0]["modelParameters"], serde_json::json!({"max_tokens": 256, "temperature": 0.2}));
    assert_eq!((x[0]["latency_unit"].as_str(), x[0]["level"].as_str()), (Some("s"), Some("DEFAULT")));
}

#[test]
fn tgi_generate_responses_as_tgi_returns_them() {
    // TGI's own integration-test snapshots of `/generate` with details: no
    // model, no time, and the prompt's tokens only when they were asked for.
    let bools = |r: &Read, name: &str| -> Vec<Option<bool>> {
        r.column::<arrow_array::BooleanArray>(name).iter().flat_map(|a| a.iter().collect::<Vec<_>>()).collect()
    };
    let base = 1_717_200_000_000_000;
    let tgi = |name: &str| read_with(name, ReaderBuilder::new().with_base_time_micros(base));

    // With `decoder_input_details`: three prefill tokens; stopped at the cap.
    let r = tgi("tgi_flash_llama.json");
    assert_eq!(r.format, Some("tgi"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.tokens_written), (1, 1, 10));
    assert_eq!(
        (r.text("request_id"), r.text("model")),
        (vec![s("tgi_flash_llama.json:1")], vec![s("tgi:tgi_flash_llama")])
    );
    assert_eq!(r.ts(), [base], "no time in the response: --base-time");
    assert_eq!(
        (r.int("prompt_tokens"), r.int("completion_tokens"), r.int("total_tokens")),
        (vec![Some(3)], vec![Some(10)], vec![Some(13)])
    );
    assert_eq!((r.text("context_bin"), r.int("context_bin_lo")), (vec![s("0-1K")], vec![Some(0)]));
    assert_eq!((r.text("finish_reason_raw"), r.text("eos_status")), (vec![s("length")], vec![s("length")]));
    assert_eq!(attribution(&r), [who(None, None, None, None).provider("tgi")], "the engine serving it");
    assert_eq!(r.text("model_output"), [s(" for /api/v1/projects/1")]);
    assert_eq!(
        (r.float("last_token_logprob"), bools(&r, "has_eos_marker")),
        (vec![Some(-1.9394531)], vec![Some(false)])
    );
    assert_eq!(
        (r.float("logged_cost_usd"), r.float("ttft_ms"), r.float("latency_ms")),
        (vec![None], vec![None], vec![None])
    );

    // Without prefill (TGI's default): no prompt length, the row kept.
    let r = tgi("tgi_flash_llama_all_params.json");
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (1, 1, 0), "{:?}", r.errors);
    assert_eq!(
        (r.int("prompt_tokens"), r.int("completion_tokens"), r.int("total_tokens")),
        (vec![None], vec![Some(5)], vec![None])
    );
    assert_eq!((r.text("context_bin"), r.int("context_bin_lo")), (vec![s("unknown")], vec![None]));
    assert_eq!((r.text("finish_reason_raw"), r.text("finish_reason")), (vec![s("stop_sequence")], vec![s("stop")]));
    // The output is the tokens' text; generated_text starts with the prompt (return_full_text).
    assert_eq!(r.text("model_output"), [s(" failed: Error in test")]);
    let x = extras(&r);
    assert_eq!((x[0]["details.seed"].as_i64(), x[0]["details.best_of_sequences"].is_null()), (Some(0), true));

    // Ended by the EOS token, flagged special: the EOS analysis needs no prompt length.
    let r = read_with(
        "tgi_flash_llama_grammar_json.json",
        ReaderBuilder::new().with_default_model(Some("llama-2-7b".into())),
    );
    assert_eq!((r.text("model"), r.ts()), (vec![s("llama-2-7b")], vec![0]));
    assert_eq!(
        (r.int("prompt_tokens"), r.int("completion_tokens"), r.int("output_token_count")),
        (vec![None], vec![Some(30)], vec![Some(30)])
    );
    assert_eq!((r.text("finish_reason_raw"), r.text("finish_reason")), (vec![s("eos_token")], vec![s("stop")]));
    assert_eq!((bools(&r, "has_eos_marker"), bools(&r, "last_token_is_special")), (vec![Some(true)], vec![Some(true)]));
    assert_eq!((r.text("eos_status"), r.text("last_token")), (vec![s("eos")], vec![s("</s>")]));
    assert_eq!(r.text("context_bin"), [s("unknown")]);
}

#[test]
fn anthropic_messages_as_the_api_returns_them() {
    // Response bodies the Messages API returned to the Python SDK's own tests.
    let base = 1_717_200_000_000_000;
    let r = read_with("anthropic_sdk_messages.jsonl", ReaderBuilder::new().with_base_time_micros(base));
    assert_eq!(r.format, Some("anthropic"), "bare messages are Anthropic's, not OpenAI's");
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (3, 3, 0), "{:?}", r.errors);
    assert_eq!(
        r.text("request_id"),
        [s("msg_01T4jd6NyD9xGGtTPDC4ogy5"), s("msg_01LAwUK3MeXUxoNW5ZgnPpGy"), s("msg_0147NV7w8PyZ6bSUsNY79cYj")]
    );
    assert_eq!(r.ts(), [base, base, base], "no time in a bare message: --base-time");
    assert_eq!(
        r.text("model"),
        [s("claude-sonnet-4-5-20250929"), s("claude-opus-4-5-20251101"), s("claude-opus-4-5-20251101")]
    );
    // input_tokens + cache reads + cache writes (all 0 here).
    assert_eq!(r.int("prompt_tokens"), [Some(406), Some(3182), Some(0)]);
    assert_eq!(r.int("completion_tokens"), [Some(50), Some(237), Some(0)]);
    assert_eq!((r.int("cached_tokens"), r.int("cache_write_tokens")), (vec![Some(0); 3], vec![Some(0); 3]));
    assert_eq!(r.text("finish_reason_raw"), [s("end_turn"), s("tool_use"), s("tool_use")]);
    assert_eq!(r.text("finish_reason"), [s("stop"), s("tool_calls"), s("tool_calls")]);
    assert_eq!(r.float("logged_cost_usd"), [None, None, None]);
    // msg_ ids (not msg_bdrk_ / msg_vrtx_): Anthropic's API.
    assert_eq!(attribution(&r), (0..3).map(|_| who(None, None, None, None).provider("anthropic")).collect::<Vec<_>>());
    // The text blocks' text; tool calls are not text.
    assert_eq!(
        r.text("model_output"),
        [
            s(
                r#"{"items":[{"product_name":"Green Tea","price":5.50,"quantity":2},{"product_name":"Coffee","price":3.00,"quantity":1}],"total":14.0}"#
            ),
            s("I'll check the weather for all three cities in Celsius simultaneously."),
            None
        ]
    );
    // Nothing lost: the keys no column holds, and the tool calls, are in extra.
    let x = extras(&r);
    assert_eq!((x[0]["stop_sequence"].is_null(), x[0]["usage.service_tier"].as_str()), (true, Some("standard")));
    assert_eq!(x[0]["usage.cache_creation"]["ephemeral_5m_input_tokens"], 0);
    assert_eq!(x[0]["usage.inference_geo"], "not_available");
    let blocks = |i: usize| x[i]["content"].as_array().unwrap().iter().map(|b| b["type"].clone()).collect::<Vec<_>>();
    assert_eq!(blocks(1), ["server_tool_use", "tool_use"]);
    assert_eq!(blocks(2), ["tool_use"]);
    assert_eq!(x[1]["container"]["id"], "container_011CYVPF4iP8oD6Vsz1NhVih");
    assert_eq!(x[2]["usage.server_tool_use"]["web_fetch_requests"], 0);
}

#[test]
fn a_chat_completion_stream_as_the_openai_client_received_it() {
    // openai_stream.sse: the raw server-sent events of two streamed calls
    // (openai 3.60.0's raw streaming response), the first with
    // stream_options.include_usage, the second without: one request each.
    let r = read("openai_stream.sse");
    assert_eq!(r.format, Some("openai_stream"));
    let c = r.counts;
    assert_eq!((c.lines_read, c.rows_written, c.lines_rejected, c.tokens_written), (2, 2, 0, 7), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("chatcmpl-real-1"), s("chatcmpl-real-2")]);
    assert_eq!(r.ts(), [1_737_710_446_000_000, 1_737_710_446_000_000], "the chunks' created");
    assert_eq!(r.text("model"), [s("gpt-4o-mini-2024-07-18"), s("gpt-4o-mini-2024-07-18")]);
    assert_eq!(r.text("model_version"), [s("fp_real"), s("fp_real")]);
    // Usage from the last chunk; without it, no prompt length and the logprobs counted.
    assert_eq!(r.int("prompt_tokens"), [Some(14), None]);
    assert_eq!(r.int("completion_tokens"), [Some(3), Some(4)]);
    assert_eq!(r.int("output_token_count"), [Some(3), Some(4)]);
    assert_eq!((r.text("context_bin"), r.int("context_bin_lo")), (vec![s("0-1K"), s("unknown")], vec![Some(0), None]));
    assert_eq!(r.text("model_output"), [s("Paris."), s("Once upon a time")]);
    assert_eq!(r.text("finish_reason_raw"), [s("stop"), s("length")]);
    assert_eq!(r.text("eos_status"), [s("eos"), s("length")]);
    assert_eq!(
        (r.text("last_token"), r.float("last_token_logprob")),
        (vec![s("."), s(" time")], vec![Some(-0.25), Some(-0.0457)])
    );
    assert_eq!(
        (r.float("ttft_ms"), r.float("latency_ms")),
        (vec![None, None], vec![None, None]),
        "no times in the stream"
    );
    assert_eq!(r.float("logged_cost_usd"), [None, None]);
    assert_eq!(
        attribution(&r),
        [who(None, None, None, None), who(None, None, None, None)],
        "a bare stream names no one"
    );
}

#[test]
fn vllm_llm_request_spans() {
    // otel_vllm.jsonl: vLLM's `llm_request` span with the attributes its
    // OutputProcessor.do_tracing sets, exported by the OpenTelemetry SDK's
    // OTLP/JSON file exporter. Every attribute lands: times in columns or
    // extra (ms), usage, the JSON-encoded finish reasons, the sampling parameters.
    let r = read("otel_vllm.jsonl");
    assert_eq!(r.format, Some("otel"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.records_skipped), (2, 2, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("cmpl-vllm-real-1"), s("cmpl-vllm-real-2")]);
    // startTimeUnixNano as vLLM sets it: int(arrival_time * 1e9).
    assert_eq!(r.ts(), [1_737_710_446_249_999, 1_737_710_447_000_000]);
    assert_eq!(r.text("model"), [s("otel:otel_vllm"), s("otel:otel_vllm")], "vLLM's span names no model");
    assert_eq!(r.int("prompt_tokens"), [Some(14), Some(1041)]);
    assert_eq!(r.int("completion_tokens"), [Some(8), Some(16)]);
    assert_eq!(r.int("max_tokens"), [Some(64), Some(16)]);
    assert_ms(&r.float("ttft_ms"), &[Some(62.5), Some(125.0)], "ttft_ms");
    assert_ms(&r.float("latency_ms"), &[Some(500.0), Some(1000.0)], "latency_ms");
    assert_ms(&r.float("prefill_latency_ms"), &[Some(45.0), Some(100.0)], "prefill_latency_ms");
    assert_eq!(r.text("finish_reason_raw"), [s("stop"), s("length")]);
    // The resource's service.name; vLLM's span names no provider.
    assert_eq!(attribution(&r), [who(None, None, Some("vllm"), None), who(None, None, Some("vllm"), None)]);
    let extra: Vec<serde_json::Value> =
        r.text("extra").into_iter().map(|e| serde_json::from_str(&e.expect("extra")).unwrap()).collect();
    let f = |i: usize, k: &str| extra[i][k].as_f64();
    assert_eq!((f(0, "queue_ms"), f(0, "decode_ms"), f(0, "inference_ms")), (Some(2.0), Some(437.5), Some(482.5)));
    assert_eq!((f(1, "queue_ms"), f(1, "decode_ms"), f(1, "inference_ms")), (Some(10.0), Some(875.0), Some(975.0)));
    assert_eq!((f(0, "gen_ai.request.top_p"), f(0, "gen_ai.request.temperature")), (Some(0.9), Some(0.7)));
    assert_eq!((f(1, "gen_ai.request.top_p"), f(1, "gen_ai.request.temperature")), (Some(1.0), None));
    assert_eq!((f(0, "gen_ai.request.n"), extra[0]["service.name"].as_str()), (Some(1.0), Some("vllm")));
    assert_eq!(extra[0]["scope"].as_str(), Some("vllm.llm_engine"));
}

#[test]
fn vllm_request_outputs_with_their_metrics() {
    // vllm_request_outputs.jsonl, built from vLLM's own field lists (not
    // written by vLLM: see the README): a RequestOutput with V0's
    // RequestMetrics (wall-clock times) and one with V1's RequestStateStats
    // (monotonic engine-core times beside the wall-clock arrival).
    let r = read("vllm_request_outputs.jsonl");
    assert_eq!(r.format, Some("vllm"));
    let c = r.counts;
    assert_eq!((c.lines_read, c.rows_written, c.lines_rejected, c.tokens_written), (2, 2, 0, 3), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("0"), s("1")]);
    assert_eq!(r.ts(), [1_737_710_446_000_000, 1_737_710_447_500_000], "metrics.arrival_time");
    // Each record is also the engine's profile of its request: time_in_queue
    // (V0) or scheduled_ts - queued_ts (V1), the prefill time below, and
    // last_token_time - first_token_time (V1: last_token_ts - first_token_ts);
    // num_cached_tokens / len(prompt_token_ids) (0/8, 16/24).
    assert_eq!(c.profiles_written, 2);
    let profiles = Read { requests: r.profiles.clone(), profiles: Vec::new(), errors: Vec::new(), ..r };
    assert_eq!(profiles.text("request_id"), [s("0"), s("1")]);
    assert_ms(&profiles.float("queue_ms"), &[Some(15.625), Some(15.625)], "queue_ms");
    assert_ms(&profiles.float("prefill_latency_ms"), &[Some(62.5), Some(62.5)], "profiles.prefill_latency_ms");
    assert_ms(&profiles.float("decode_ms"), &[Some(125.0), Some(125.0)], "decode_ms");
    assert_ms(&profiles.float("engine_ms"), &[Some(187.5), Some(187.5)], "engine_ms");
    assert_eq!(profiles.int("decode_tokens"), [Some(3), Some(4)]);
    assert_eq!(profiles.float("kv_cache_hit_ratio"), [Some(0.0), Some(16.0 / 24.0)]);
    assert_eq!(profiles.float("decode_step_std_ms"), [None, None], "no per-step times logged");
    assert_eq!(r.text("model"), [s("vllm:vllm_request_outputs"), s("vllm:vllm_request_outputs")]);
    // len(prompt_token_ids), len(outputs[0].token_ids), num_cached_tokens.
    assert_eq!(r.int("prompt_tokens"), [Some(8), Some(24)]);
    assert_eq!(r.int("completion_tokens"), [Some(3), Some(4)]);
    assert_eq!(r.int("cached_tokens"), [Some(0), Some(16)]);
    // V0: first_token_time - arrival_time, finished_time - arrival_time,
    // first_token_time - first_scheduled_time. V1: first_token_latency,
    // plus last_token_ts - first_token_ts, first_token_ts - scheduled_ts.
    assert_ms(&r.float("ttft_ms"), &[Some(78.125), Some(78.125)], "ttft_ms");
    assert_ms(&r.float("latency_ms"), &[Some(203.125), Some(203.125)], "latency_ms");
    assert_ms(&r.float("prefill_latency_ms"), &[Some(62.5), Some(62.5)], "prefill_latency_ms");
    assert_eq!(r.text("finish_reason_raw"), [s("stop"), s("length")]);
    assert_eq!(r.text("model_output"), [s(" Paris."), s(" Once upon a time")]);
    assert_eq!(r.text("prompt"), [s("What is the capital of France?"), s("Tell me a long story.")]);
    assert_eq!(
        attribution(&r),
        [who(None, None, None, None).provider("vllm"), who(None, None, None, None).provider("vllm")]
    );
    // The sampled token of each position (its id in token_ids), the others as alternatives.
    assert_eq!(
        (r.text("last_token"), r.float("last_token_logprob")),
        (vec![s("<|eot_id|>"), None], vec![Some(0.0), None])
    );
    let extra: Vec<serde_json::Value> =
        r.text("extra").into_iter().map(|e| serde_json::from_str(&e.expect("extra")).unwrap()).collect();
    let f = |i: usize, k: &str| extra[i][k].as_f64();
    assert_eq!((f(0, "queue_ms"), f(0, "decode_ms"), f(0, "scheduler_ms")), (Some(15.625), Some(125.0), Some(2.5)));
    assert_eq!((f(1, "queue_ms"), f(1, "decode_ms")), (Some(15.625), Some(125.0)));
    let keys = |i: usize| extra[i].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        keys(0),
        [
            "decode_ms",
            "encoder_prompt",
            "encoder_prompt_token_ids",
            "lora_request",
            "prompt_logprobs",
            "queue_ms",
            "scheduler_ms"
        ],
        "unread keys kept as logged"
    );
}

#[test]
fn litellm_payloads_naming_user_team_project_key_and_tags() {
    // litellm_gcs_attribution.ndjson: LiteLLM 1.110.2's GCS bucket logger, two
    // calls: one through the SDK (`user=`, tags in `metadata`), one as the
    // proxy makes it for a virtual key (its add_litellm_data_to_request).
    let r = read("litellm_gcs_attribution.ndjson");
    assert_eq!(r.format, Some("litellm"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (2, 2, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("chatcmpl-real-1"), s("chatcmpl-real-2")]);
    assert_eq!(r.ts(), [1_796_688_636_233_007, 1_796_688_636_654_382]);
    assert_eq!(
        (r.int("prompt_tokens"), r.int("completion_tokens")),
        (vec![Some(14), Some(1041)], vec![Some(2), Some(4)])
    );
    assert_eq!(
        attribution(&r),
        [
            // The SDK's `user=` is only in model_parameters.user (end_user is
            // null); metadata.tags became request_tags.
            who(Some("sdk-user-1"), None, None, None).tags(&["nightly-eval", "suite:geo"]).provider("openai"),
            // end_user (the body's `user`, as user_api_key_end_user_id too), not
            // the key's owner (user_api_key_user_id owner-7); the team's and
            // the project's aliases, not their ids; the key's alias.
            who(Some("end-user-42"), Some("search"), Some("assistant"), None)
                .tags(&["feature:story", "tier:free"])
                .key_alias("search-backend")
                .provider("openai"),
        ]
    );
    // The key's hash (metadata.user_api_key_hash) is stored nowhere.
    let hash = "a4b14195b6289f089ea41c2a95994faa88a5ff305464ac8d8c97e355ea0294b1";
    assert!(r.text("extra").into_iter().flatten().all(|e| !e.contains(hash)));
}

#[test]
fn litellm_spend_logs_naming_user_team_project_key_and_tags() {
    // litellm_pubsub_v1_attribution.ndjson: the same two calls as spend-logs
    // payloads (get_logging_payload, json.dumps(default=str)): request_tags
    // as JSON text, end_user / user / team_id columns, the key's names in
    // metadata's string.
    let r = read("litellm_pubsub_v1_attribution.ndjson");
    assert_eq!(r.format, Some("litellm"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (2, 2, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("chatcmpl-real-1"), s("chatcmpl-real-2")]);
    assert_eq!(r.ts(), [1_796_688_636_233_007, 1_796_688_636_654_382]);
    assert_eq!(
        attribution(&r),
        [
            // The spend log of an SDK call keeps no user (end_user and user "").
            who(None, None, None, None).tags(&["nightly-eval", "suite:geo"]).provider("openai"),
            // end_user before user (the key's owner, owner-7); team alias
            // "search" before team_id "team-uuid-1".
            who(Some("end-user-42"), Some("search"), Some("assistant"), None)
                .tags(&["feature:story", "tier:free"])
                .key_alias("search-backend")
                .provider("openai"),
        ]
    );
    let hash = "a4b14195b6289f089ea41c2a95994faa88a5ff305464ac8d8c97e355ea0294b1";
    assert!(r.text("extra").into_iter().flatten().all(|e| !e.contains(hash)), "api_key, metadata.user_api_key");
}

#[test]
fn openinference_spans_with_user_session_and_tags() {
    // otel_openinference_attribution.jsonl: OpenInference's using_attributes
    // (user.id, session.id, tag.tags as an array attribute), then using_user
    // and using_session; resource service.name "qa-bot".
    let r = read("otel_openinference_attribution.jsonl");
    assert_eq!(r.format, Some("otel"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (2, 2, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("chatcmpl-real-1"), s("chatcmpl-real-2")]);
    assert_eq!(r.text("session_id"), [s("session-oi-1"), s("session-oi-2")]);
    assert_eq!(
        attribution(&r),
        [
            who(Some("user-oi-1"), None, Some("qa-bot"), None).tags(&["beta", "region:eu"]).provider("openai"),
            who(Some("user-oi-2"), None, Some("qa-bot"), None).provider("openai"),
        ]
    );
}

#[test]
fn openllmetry_spans_under_a_resource_naming_service_and_environment() {
    // otel_openllmetry_attribution.jsonl: OpenLLMetry's spans under a resource
    // with service.name "story-api" and deployment.environment.name "staging".
    let r = read("otel_openllmetry_attribution.jsonl");
    assert_eq!(r.format, Some("otel"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (2, 2, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("chatcmpl-real-1"), s("chatcmpl-real-2")]);
    let want = (0..2).map(|_| who(None, None, Some("story-api"), Some("staging")).provider("openai"));
    assert_eq!(attribution(&r), want.collect::<Vec<_>>());
}

#[test]
fn langfuse_observations_with_their_traces_user_tags_and_environment() {
    // langfuse_api_observations_attribution.json: the public API's v2
    // observations (langfuse 5.2.0's models) carrying their traces' userId
    // and tags, their environment and projectId; the second's metadata as
    // Langfuse's LangChain callback records it (ls_provider).
    let r = read("langfuse_api_observations_attribution.json");
    assert_eq!(r.format, Some("langfuse"));
    assert_eq!(
        (r.counts.rows_written, r.counts.records_rejected, r.counts.records_skipped),
        (2, 0, 0),
        "{:?}",
        r.errors
    );
    assert_eq!(r.text("request_id"), [s("obs-attr-1"), s("obs-attr-2")]);
    assert_eq!(r.text("session_id"), [s("session-lf-1"), None]);
    assert_eq!(
        attribution(&r),
        [
            who(Some("user-lf-1"), None, Some("proj-attr"), Some("production")).tags(&["checkout", "tenant:acme"]),
            who(Some("user-lf-2"), None, Some("proj-attr"), Some("staging")).tags(&["batch"]).provider("openai"),
        ]
    );
}

#[test]
fn langfuse_sdk_spans_with_propagated_user_session_tags_and_environment() {
    // otel_langfuse_attribution.jsonl: langfuse 5.2.0's OpenTelemetry client
    // (environment "production") over OpenLLMetry's spans, each call inside
    // a Langfuse span and propagate_attributes: user.id, session.id and
    // langfuse.trace.tags on the first; user.id and langfuse.environment
    // "staging" on the second. The client's own environment is only on its
    // own spans (`handler`, no model call: skipped). One TracesData line.
    let r = read("otel_langfuse_attribution.jsonl");
    assert_eq!(r.format, Some("otel"));
    let c = r.counts;
    assert_eq!((c.lines_read, c.rows_written, c.records_skipped, c.lines_rejected), (1, 2, 2, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("chatcmpl-real-1"), s("chatcmpl-real-2")]);
    assert_eq!(r.text("session_id"), [s("session-lf-otel-1"), None]);
    assert_eq!(
        attribution(&r),
        [
            who(Some("user-lf-otel-1"), None, Some("checkout-api"), None)
                .tags(&["checkout", "tenant:acme"])
                .provider("openai"),
            who(Some("user-lf-otel-2"), None, Some("checkout-api"), Some("staging")).provider("openai"),
        ]
    );
}

#[test]
fn conformance_over_the_folder_of_real_files() {
    // What `tokscope formats --check tests/data/real` reports, file by file.
    let mut report = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(real(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| [".json", ".jsonl", ".ndjson", ".sse"].iter().any(|e| n.ends_with(e)))
        .collect();
    names.sort();
    for name in names {
        let file = std::fs::File::open(real(&name)).unwrap();
        let c = tokscope_core::reader::check_input(ReaderBuilder::new(), file, &name).unwrap();
        report.push((
            name,
            c.format,
            c.framing,
            c.counts.rows_written,
            c.counts.lines_rejected,
            c.first_error.map(|e| e.contains("429")),
        ));
    }
    let row = |n: &str, f: &'static str, framing: &'static str, rows: u64, first_error: Option<bool>| {
        (n.to_string(), Some(f), framing, rows, 0, first_error)
    };
    assert_eq!(
        report,
        [
            row("anthropic_sdk_messages.jsonl", "anthropic", "lines", 3, None),
            row("bedrock_cloudwatch_insights.json", "bedrock", "json_records", 1, None),
            row("bedrock_converse.jsonl", "bedrock", "lines", 4, None),
            // The call a guardrail blocked, without token counts.
            ("bedrock_invocation_built.jsonl".to_string(), Some("bedrock"), "lines", 2, 1, Some(false)),
            row("bedrock_invocation_log.json", "bedrock", "json_records", 1, None),
            row("cohere_chat.jsonl", "cohere", "lines", 4, None),
            row("cohere_stream_chunks.jsonl", "cohere", "lines", 1, None),
            row("cohere_vercel.jsonl", "cohere", "lines", 3, None),
            row("gemini_generate_content.jsonl", "gemini", "lines", 2, None),
            row("gemini_stream.sse", "gemini_stream", "event_stream", 1, None),
            row("gemini_stream_array.json", "gemini", "lines", 1, None),
            row("gemini_stream_chunks.jsonl", "gemini", "lines", 1, None),
            row("gemini_vercel.jsonl", "gemini", "lines", 2, None),
            row("groq_chat.jsonl", "openai_chat", "lines", 2, None),
            row("groq_stream.sse", "openai_stream", "event_stream", 1, None),
            row("groq_stream_x_groq.sse", "openai_stream", "event_stream", 1, None),
            row("langfuse_api_observations.json", "langfuse", "json_records", 1, Some(true)),
            row("langfuse_api_observations_attribution.json", "langfuse", "json_records", 2, None),
            row("litellm_gcs.ndjson", "litellm", "lines", 4, None),
            row("litellm_gcs_attribution.ndjson", "litellm", "lines", 2, None),
            row("litellm_pubsub_v1.ndjson", "litellm", "lines", 4, None),
            row("litellm_pubsub_v1_attribution.ndjson", "litellm", "lines", 2, None),
            row("mistral_chat.jsonl", "openai_chat", "lines", 2, None),
            row("mixed_providers.jsonl", "openai_chat", "lines", 8, None),
            row("ollama_chat_stream.ndjson", "ollama_stream", "event_stream", 1, None),
            row("ollama_responses.jsonl", "ollama", "lines", 3, None),
            row("openai_stream.sse", "openai_stream", "event_stream", 2, None),
            row("otel_langfuse_attribution.jsonl", "otel", "lines", 2, None),
            row("otel_openinference.jsonl", "otel", "lines", 3, None),
            row("otel_openinference_attribution.jsonl", "otel", "lines", 2, None),
            row("otel_openllmetry.jsonl", "otel", "lines", 3, None),
            row("otel_openllmetry_attribution.jsonl", "otel", "lines", 2, None),
            row("otel_vllm.jsonl", "otel", "lines", 2, None),
            row("tgi_flash_llama.json", "tgi", "json_records", 1, None),
            row("tgi_flash_llama_all_params.json", "tgi", "json_records", 1, None),
            row("tgi_flash_llama_grammar_json.json", "tgi", "json_records", 1, None),
            row("vllm_request_outputs.jsonl", "vllm", "lines", 2, None),
        ]
    );
}

#[test]
fn bedrock_invocation_log_record() {
    // bedrock_invocation_log.json: one record Bedrock wrote (ConverseStream,
    // Nova Lite), pretty-printed; and the same record as CloudWatch Logs
    // Insights exports it (`@message`, the record as text).
    for name in ["bedrock_invocation_log.json", "bedrock_cloudwatch_insights.json"] {
        let r = read(name);
        assert_eq!(r.format, Some("bedrock"), "{name}");
        assert_eq!((r.counts.rows_written, r.counts.records_rejected), (1, 0), "{name}: {:?}", r.errors);
        assert_eq!(r.text("request_id"), [s("ff4b6c63-5561-4431-93b8-06a817275900")]);
        assert_eq!(r.ts(), [1_741_653_482_000_000], "2025-03-11T00:38:02Z");
        assert_eq!(r.text("model"), [s("amazon.nova-lite-v1:0")]);
        assert_eq!(r.int("prompt_tokens"), [Some(4)]);
        assert_eq!(r.int("completion_tokens"), [Some(38)]);
        assert_eq!((r.int("cached_tokens"), r.int("cache_write_tokens")), (vec![Some(0)], vec![Some(0)]));
        assert_eq!(r.int("max_tokens"), [Some(512)]);
        assert_ms(&r.float("latency_ms"), &[Some(302.0)], "latency_ms");
        assert_eq!(r.text("finish_reason_raw"), [s("end_turn")]);
        assert_eq!(r.text("finish_reason"), [s("stop")]);
        assert_eq!(
            r.text("model_output"),
            [s("Hello! I'm doing well, thank you for asking. How can I assist you today? If you have any questions or need help with something, feel free to let me know.")]
        );
        let x = &extras(&r)[0];
        assert_eq!(x["identity"]["arn"], "arn:aws:iam::XXXXXXXXXXXX:user/dheeraj");
        assert_eq!((x["operation"].as_str(), x["region"].as_str()), (Some("ConverseStream"), Some("us-east-1")));
    }
}

#[test]
fn bedrock_invocation_logs_of_an_inference_profile_with_cache() {
    // bedrock_invocation_built.jsonl: two InvokeModel calls of Claude 3.5
    // Haiku through a system inference profile (the first writes 18131
    // prompt tokens to the cache, the second reads them), and a call blocked
    // by a guardrail, whose record has no token counts: a reject.
    let r = read("bedrock_invocation_built.jsonl");
    assert_eq!(r.format, Some("bedrock"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (3, 2, 1));
    assert!(
        r.errors[0].contains("without input.inputTokenCount") && r.errors[0].contains("guardrail_intervened"),
        "{:?}",
        r.errors
    );
    assert_eq!(
        r.text("request_id"),
        [s("0a3a8d2d-dfe0-499b-8bf5-5517a07e67d2"), s("a8e15aa3-dfe6-4e45-b9f9-6d6f72394314")]
    );
    assert_eq!(r.ts(), [1_742_287_534_000_000, 1_742_287_542_000_000]);
    let model = s("us.anthropic.claude-3-5-haiku-20241022-v1:0");
    assert_eq!(r.text("model"), [model.clone(), model]);
    // input 4 + cache read + cache write 18131.
    assert_eq!(r.int("prompt_tokens"), [Some(18135), Some(18135)]);
    assert_eq!(r.int("cached_tokens"), [Some(0), Some(18131)]);
    assert_eq!(r.int("cache_write_tokens"), [Some(18131), Some(0)]);
    assert_eq!(r.int("completion_tokens"), [Some(50), Some(50)]);
    assert_eq!(r.int("max_tokens"), [Some(50), Some(50)]);
    assert_eq!(r.text("finish_reason_raw"), [s("max_tokens"), s("max_tokens")]);
    assert_eq!(r.text("finish_reason"), [s("length"), s("length")]);
    assert_ms(&r.float("latency_ms"), &[None, None], "latency_ms");
    let x = extras(&r);
    assert_eq!(
        x[0]["modelId"],
        "arn:aws:bedrock:us-east-1:012345678901:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0"
    );
    assert_eq!(x[0]["inferenceRegion"], "us-west-2");
    assert_eq!(x[0]["requestMetadata"]["team"], "search");
}

#[test]
fn bedrock_converse_responses() {
    // bedrock_converse.jsonl: four Converse responses (Llama 3.2 1B, Claude
    // 3.7 Sonnet through an inference profile, Titan Express twice with a
    // guardrail that intervened); the model is in the request's URI, so
    // `--model` names it, and the time is the file's.
    let base = 1_740_000_000_000_000;
    let r = read_with(
        "bedrock_converse.jsonl",
        ReaderBuilder::new().with_default_model(Some("bedrock-model".to_string())).with_base_time_micros(base),
    );
    assert_eq!(r.format, Some("bedrock"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (4, 4, 0), "{:?}", r.errors);
    assert_eq!(r.ts(), [base; 4]);
    assert_eq!(r.text("model"), vec![s("bedrock-model"); 4]);
    assert_eq!(r.int("prompt_tokens"), [Some(52), Some(20), Some(28), Some(17)]);
    assert_eq!(r.int("completion_tokens"), [Some(30), Some(72), Some(26), Some(17)]);
    assert_eq!(r.int("cached_tokens"), [Some(0); 4]);
    assert_ms(&r.float("latency_ms"), &[Some(589.0), Some(2900.0), Some(2135.0), Some(1562.0)], "latency_ms");
    assert_eq!(
        r.text("finish_reason_raw"),
        [s("end_turn"), s("end_turn"), s("guardrail_intervened"), s("guardrail_intervened")]
    );
    assert_eq!(r.text("finish_reason"), [s("stop"), s("stop"), s("content_filter"), s("content_filter")]);
    assert_eq!(
        r.text("model_output")[0],
        s("Why did the OpenTelemetry trace go to therapy?\n\nBecause it was struggling to debug its issues and was feeling a little \"unreliable\".")
    );
    // The guardrail's trace is kept.
    assert!(extras(&r)[2]["trace"]["guardrail"].is_object());
}

#[test]
fn gemini_generate_content_responses() {
    // gemini_generate_content.jsonl (OpenLLMetry's cassettes, gemini-2.5-flash)
    // and gemini_vercel.jsonl (the AI SDK's fixtures, gemini-3-pro-preview):
    // thinking tokens are counted apart from the candidates' and added.
    let base = 1_760_000_000_000_000;
    let r = read_with("gemini_generate_content.jsonl", ReaderBuilder::new().with_base_time_micros(base));
    assert_eq!(r.format, Some("gemini"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (2, 2, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("-hk4afOSMZKkjuMPnJWGkAk"), s("Bho4aenTIZKq4-EPkd-w8QU")]);
    assert_eq!(r.ts(), [base, base]);
    assert_eq!(r.text("model"), [s("gemini-2.5-flash"), s("gemini-2.5-flash")]);
    assert_eq!(r.int("prompt_tokens"), [Some(5), Some(5)]);
    // 877 + 1058 thinking; 711 + 1096.
    assert_eq!(r.int("completion_tokens"), [Some(1935), Some(1807)]);
    assert_eq!(r.int("reasoning_tokens"), [Some(1058), Some(1096)]);
    assert_eq!(r.int("cached_tokens"), [Some(0), Some(0)]);
    assert_eq!(r.text("finish_reason_raw"), [s("STOP"), s("STOP")]);
    assert_eq!(r.text("finish_reason"), [s("stop"), s("stop")]);
    assert!(r.text("model_output")[0].as_deref().unwrap().starts_with("AI stands for **Artificial Intelligence**."));

    let r = read("gemini_vercel.jsonl");
    assert_eq!(r.format, Some("gemini"));
    assert_eq!(r.text("request_id"), [s("Un6LacrVMcjUxs0PmJfWoQc"), s("YH6LaZT7ENmPxN8P-r2J8Aw")]);
    assert_eq!(r.text("model"), [s("gemini-3-pro-preview"), s("gemini-3-pro-preview")]);
    assert_eq!(r.int("prompt_tokens"), [Some(9), Some(9)]);
    assert_eq!(r.int("completion_tokens"), [Some(28 + 244), Some(29 + 282)]);
    assert_eq!(r.int("reasoning_tokens"), [Some(244), Some(282)]);
    assert_eq!(
        r.text("model_output")[0],
        s("There are **3** r's in strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y.")
    );
}

#[test]
fn gemini_streams() {
    // gemini_stream_chunks.jsonl: a stream's three chunks, one per line: the
    // last (with the finish reason) is the request, the others are skipped.
    let r = read("gemini_stream_chunks.jsonl");
    assert_eq!(r.format, Some("gemini"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.records_skipped), (3, 1, 2), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("bH6LaZW8Fp_3nsEPqtaSwQ4")]);
    assert_eq!(r.int("prompt_tokens"), [Some(9)]);
    assert_eq!(r.int("completion_tokens"), [Some(23 + 185)]);
    assert_eq!(r.int("reasoning_tokens"), [Some(185)]);
    assert_eq!(r.text("finish_reason"), [s("stop")]);
    // gemini_stream_array.json: a stream as the REST API returns it, a JSON
    // array of three chunks: one request, its texts joined.
    let r = read("gemini_stream_array.json");
    assert_eq!(r.format, Some("gemini"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written), (1, 1), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("dX6LadKVC7SZ28oPr9yJoQs")]);
    assert_eq!(r.int("prompt_tokens"), [Some(9)]);
    assert_eq!(r.int("completion_tokens"), [Some(29 + 256)]);
    assert_eq!(r.int("reasoning_tokens"), [Some(256)]);
    assert_eq!(r.text("finish_reason_raw"), [s("STOP")]);
    assert_eq!(
        r.text("model_output"),
        [s("There are **3** \"r\"s in strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y.")]
    );
}

#[test]
fn ollama_replies() {
    // ollama_responses.jsonl: /api/chat, /api/generate and a chat with
    // tools (llama3, llama3.1), as Ollama returned them to OpenLLMetry's
    // tests. Durations in nanoseconds; `created_at` is the reply's end, so
    // the request arrived `total_duration` before it.
    let r = read("ollama_responses.jsonl");
    assert_eq!(r.format, Some("ollama"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (3, 3, 0), "{:?}", r.errors);
    // 20:01:31.015580 - 10.386172 s; 20:19:45.363966 - 4.224430 s; 02:41:57.128675 - 6.037504 s.
    assert_eq!(r.ts(), [1_716_580_880_629_408, 1_716_581_981_139_536, 1_726_454_511_091_171]);
    assert_eq!(r.text("model"), [s("llama3"), s("llama3"), s("llama3.1")]);
    assert_eq!(r.int("prompt_tokens"), [Some(17), Some(17), Some(44)]);
    assert_eq!(r.int("completion_tokens"), [Some(66), Some(63), Some(113)]);
    assert_ms(&r.float("latency_ms"), &[Some(10386.172), Some(4224.430), Some(6037.504)], "latency_ms");
    assert_ms(&r.float("prefill_latency_ms"), &[Some(175.861), Some(177.983), Some(182.953)], "prefill_latency_ms");
    assert_eq!(r.text("finish_reason_raw"), [s("stop"), s("stop"), s("stop")]);
    assert_eq!(r.text("finish_reason"), [s("stop"), s("stop"), s("stop")]);
    assert!(r.text("model_output")[1].as_deref().unwrap().starts_with("A niche topic!"));
    let x = extras(&r);
    assert_eq!(
        (x[0]["load_duration"].as_i64(), x[0]["eval_duration"].as_i64()),
        (Some(8_078_850_750), Some(2_127_200_000))
    );
    assert!(x[1].get("context").is_none(), "the token ids for the next call are dropped");
}

#[test]
fn ollama_streamed_chat() {
    // ollama_chat_stream.ndjson: one chat streamed as 50 chunks, the last
    // one (`done: true`) with the counts and durations: one request, a token
    // row per chunk with text, sent at the chunk's `created_at`.
    let r = read("ollama_chat_stream.ndjson");
    assert_eq!(r.format, Some("ollama_stream"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (1, 1, 0), "{:?}", r.errors);
    assert_eq!(r.counts.tokens_written, 49);
    // Arrival: 20:26:47.872905 - 1.897386 s.
    assert_eq!(r.ts(), [1_716_582_405_975_519]);
    assert_eq!((r.int("prompt_tokens"), r.int("completion_tokens")), (vec![Some(17)], vec![Some(50)]));
    assert_ms(&r.float("latency_ms"), &[Some(1897.386)], "latency_ms");
    assert_ms(&r.float("prefill_latency_ms"), &[Some(313.56)], "prefill_latency_ms");
    // The first chunk, "Why", at 20:26:46.294874; the second, " did", at .327411; the last, "!)", at 47.840827.
    assert_ms(&r.float("ttft_ms"), &[Some(319.355)], "ttft_ms");
    assert_ms(&r.float("first_token_emitted_ms"), &[Some(319.355)], "first_token_emitted_ms");
    assert_ms(&r.float("last_token_emitted_ms"), &[Some(1865.308)], "last_token_emitted_ms");
    assert_eq!(r.text("finish_reason"), [s("stop")]);
    assert_eq!(
        r.text("model_output"),
        [s("Why did the OpenTelemetry agent go to therapy?\n\nBecause it was feeling traced out and needed some instrumentation in its life!\n\n(Sorry, I know it's a bit of a stretch, but I hope it brought a smile to your face!)")]
    );
    // Among other lines (forced `ollama`), the chunks before the last are skipped.
    let r = read_with("ollama_chat_stream.ndjson", ReaderBuilder::new().with_format("ollama".parse().ok()));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.records_skipped), (50, 1, 49), "{:?}", r.errors);
    assert_eq!(r.int("completion_tokens"), [Some(50)]);
}

#[test]
fn cohere_chat_responses() {
    // cohere_chat.jsonl (OpenLLMetry's cassettes): a v1 reply (`meta`), a v2
    // reply and a v2 tool call with its follow-up. No reply names its model.
    let base = 1_750_000_000_000_000;
    let builder = || ReaderBuilder::new().with_base_time_micros(base).with_default_model(Some("command-r".to_string()));
    let r = read_with("cohere_chat.jsonl", builder());
    assert_eq!(r.format, Some("cohere"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (4, 4, 0), "{:?}", r.errors);
    assert_eq!(
        r.text("request_id"),
        [
            s("440f51f4-3e47-44b6-a5d7-5ba33edcfc58"),
            s("83e3e297-264b-478e-9b22-5058386292ed"),
            s("965405bb-b9da-4dc5-b329-e708a795e188"),
            s("00f7ec58-cd22-4b62-b068-0e7ece6bbf67")
        ]
    );
    assert_eq!(r.ts(), [base; 4]);
    assert_eq!(r.text("model"), vec![s("command-r"); 4]);
    // The tokens the model read and wrote, not the billed units.
    assert_eq!(r.int("prompt_tokens"), [Some(69), Some(69), Some(968), Some(1094)]);
    assert_eq!(r.int("completion_tokens"), [Some(119), Some(89), Some(83), Some(102)]);
    assert_eq!(r.text("finish_reason_raw"), [s("COMPLETE"), s("COMPLETE"), s("TOOL_CALL"), s("COMPLETE")]);
    assert_eq!(r.text("finish_reason"), [s("stop"), s("stop"), s("tool_calls"), s("stop")]);
    let x = extras(&r);
    assert_eq!(
        (x[0]["billed_units"]["input_tokens"].as_i64(), x[1]["billed_units"]["input_tokens"].as_i64()),
        (Some(58), Some(7))
    );
    assert_eq!(x[2]["tool_calls"][0]["function"]["name"], "get_time");
    assert!(r.text("model_output")[0].as_deref().unwrap().starts_with("Arrrr, matey!"));
    assert_eq!(r.text("model_output")[2], None, "a tool call has no text");

    // cohere_vercel.jsonl (the AI SDK's fixtures): v2 replies with cached tokens.
    let r = read_with("cohere_vercel.jsonl", builder());
    assert_eq!(r.format, Some("cohere"));
    assert_eq!(
        r.text("request_id"),
        [
            s("e7592632-1e3d-424f-b129-bd5f9f980f7b"),
            s("039584d9-7236-4ecb-9dd7-f1bed57888bc"),
            s("f201af17-e24a-4396-8f6a-98e8bf9c3432")
        ]
    );
    assert_eq!(r.int("prompt_tokens"), [Some(507), Some(506), Some(1549)]);
    assert_eq!(r.int("cached_tokens"), [Some(448), Some(448), Some(992)]);
    assert_eq!(r.int("completion_tokens"), [Some(10), Some(5), Some(103)]);
    assert_eq!(r.text("finish_reason"), [s("stop"), s("length"), s("tool_calls")]);
    assert_eq!(r.text("model_output")[1], s("**The History of"));
}

#[test]
fn cohere_v2_stream_events() {
    // cohere_stream_chunks.jsonl: a v2 stream's 11 events, one per line;
    // `message-end` carries the usage and is the request.
    let r = read("cohere_stream_chunks.jsonl");
    assert_eq!(r.format, Some("cohere"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.records_skipped), (11, 1, 10), "{:?}", r.errors);
    assert_eq!((r.int("prompt_tokens"), r.int("completion_tokens")), (vec![Some(507)], vec![Some(10)]));
    assert_eq!(r.int("cached_tokens"), [Some(448)]);
    assert_eq!(r.text("finish_reason_raw"), [s("COMPLETE")]);
}

#[test]
fn groq_server_times() {
    // groq_chat.jsonl (the AI SDK's fixtures): Groq's usage adds its server
    // times in seconds: the first token after the queue and the prompt, the
    // last after the queue and total_time.
    let r = read("groq_chat.jsonl");
    assert_eq!(r.format, Some("openai_chat"));
    assert_eq!((r.counts.rows_written, r.counts.lines_rejected), (2, 0), "{:?}", r.errors);
    assert_eq!(
        r.text("request_id"),
        [s("chatcmpl-09d64d2a-ed1c-4473-829f-78db43f45d13"), s("chatcmpl-1fd017fc-60b8-44eb-a736-375b8e1bc3e7")]
    );
    assert_eq!(r.ts(), [1_770_770_798_000_000, 1_770_770_815_000_000]);
    assert_eq!(r.text("model"), [s("llama-3.3-70b-versatile"), s("llama-3.3-70b-versatile")]);
    assert_eq!(r.int("prompt_tokens"), [Some(45), Some(218)]);
    assert_eq!(r.int("completion_tokens"), [Some(607), Some(15)]);
    // 41.877 + 1.955; 179.482 + 11.828.
    assert_ms(&r.float("ttft_ms"), &[Some(43.832), Some(191.310)], "ttft_ms");
    // 41.877 + 2247.132; 179.482 + 56.431.
    assert_ms(&r.float("latency_ms"), &[Some(2289.009), Some(235.913)], "latency_ms");
    assert_ms(&r.float("prefill_latency_ms"), &[Some(1.955), Some(11.828)], "prefill_latency_ms");
    assert_eq!(r.text("finish_reason"), [s("stop"), s("tool_calls")]);
    assert_eq!(extras(&r)[0]["usage.queue_time"], 0.041876985, "the times as logged are kept");
}

#[test]
fn groq_streams_give_a_row() {
    // groq_stream.sse: a stream whose last chunk has `usage` and `x_groq.usage`;
    // groq_stream_x_groq.sse (OpenLLMetry's cassette): an older one with the
    // usage in `x_groq` only.
    let r = read("groq_stream.sse");
    assert_eq!(r.format, Some("openai_stream"));
    assert_eq!((r.counts.rows_written, r.counts.lines_rejected), (1, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("chatcmpl-7eb08824-fb8d-47af-a1f0-3aa786f2d1f3")]);
    assert_eq!((r.int("prompt_tokens"), r.int("completion_tokens")), (vec![Some(45)], vec![Some(662)]));
    assert_ms(&r.float("ttft_ms"), &[Some(45.846)], "ttft_ms");
    assert_ms(&r.float("latency_ms"), &[Some(2698.076)], "latency_ms");
    assert_eq!(r.text("finish_reason"), [s("stop")]);

    let r = read("groq_stream_x_groq.sse");
    assert_eq!(r.format, Some("openai_stream"));
    assert_eq!((r.counts.rows_written, r.counts.lines_rejected), (1, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("chatcmpl-532a6640-2e18-4a4c-8406-8437a857ce48")]);
    assert_eq!(r.text("model"), [s("llama3-8b-8192")]);
    assert_eq!((r.int("prompt_tokens"), r.int("completion_tokens")), (vec![Some(18)], vec![Some(73)]));
    // 282.450 + 2.698; 282.450 + 63.532.
    assert_ms(&r.float("ttft_ms"), &[Some(285.148)], "ttft_ms");
    assert_ms(&r.float("latency_ms"), &[Some(345.982)], "latency_ms");
    assert_eq!(r.text("finish_reason"), [s("stop")]);
}

#[test]
fn mistral_chat_completions() {
    // mistral_chat.jsonl (the AI SDK's fixtures): OpenAI's shape, no cache.
    let r = read("mistral_chat.jsonl");
    assert_eq!(r.format, Some("openai_chat"));
    assert_eq!(r.text("request_id"), [s("5319bd0299614c679a0068a4f2c8ffd0"), s("b3999b8c93e04e11bcbff7bcab829667")]);
    assert_eq!(r.ts(), [1_769_088_720_000_000, 1_769_088_854_000_000]);
    assert_eq!(r.text("model"), [s("mistral-small-latest"), s("mistral-small-latest")]);
    assert_eq!(r.int("prompt_tokens"), [Some(13), Some(124)]);
    assert_eq!(r.int("completion_tokens"), [Some(434), Some(22)]);
    assert_eq!(r.int("cached_tokens"), [Some(0), Some(0)]);
    assert_eq!(r.text("finish_reason"), [s("stop"), s("tool_calls")]);
}

#[test]
fn a_file_mixing_providers_reads_every_line_by_its_own_format() {
    // mixed_providers.jsonl: the first record of eight files above, one
    // after another, as an application logging every upstream's responses
    // writes them: Groq (OpenAI's shape), Anthropic, Gemini, Cohere,
    // Ollama, a Bedrock Converse response, Mistral, a Bedrock invocation log.
    let r = read("mixed_providers.jsonl");
    assert_eq!(r.format, Some("openai_chat"), "the file's format is its first line's");
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (8, 8, 0), "{:?}", r.errors);
    assert_eq!(
        r.text("source_format"),
        [
            s("openai_chat"),
            s("anthropic"),
            s("gemini"),
            s("cohere"),
            s("ollama"),
            s("bedrock"),
            s("openai_chat"),
            s("bedrock")
        ]
    );
    assert_eq!(
        r.int("prompt_tokens"),
        [Some(45), Some(406), Some(9), Some(507), Some(17), Some(52), Some(13), Some(18135)]
    );
    assert_eq!(
        r.int("completion_tokens"),
        [Some(607), Some(50), Some(272), Some(10), Some(66), Some(30), Some(434), Some(50)]
    );
}

#[test]
fn gemini_stream_saved_as_server_sent_events() {
    // gemini_stream.sse: a recorded stream (the AI SDK's fixture, a tool
    // call) written back as the `alt=sse` events it came in: two chunks, the
    // first a function call, the last with the finish reason; no `[DONE]`.
    let r = read("gemini_stream.sse");
    assert_eq!(r.format, Some("gemini_stream"));
    assert_eq!((r.counts.lines_read, r.counts.rows_written, r.counts.lines_rejected), (1, 1, 0), "{:?}", r.errors);
    assert_eq!(r.text("request_id"), [s("b36LacjwM668nsEP2tbsgQQ")]);
    assert_eq!(r.text("model"), [s("gemini-3-pro-preview")]);
    assert_eq!(r.int("prompt_tokens"), [Some(29)]);
    assert_eq!(r.int("completion_tokens"), [Some(15 + 45)]);
    assert_eq!(r.int("reasoning_tokens"), [Some(45)]);
    assert_eq!(r.text("finish_reason_raw"), [s("STOP")]);
}

#[test]
fn the_clouds_and_local_servers_name_who_served_and_who_called() {
    let only = |p: &str| who(None, None, None, None).provider(p);
    // Bedrock's records name the IAM principal that called (the user) and
    // the caller's requestMetadata (tags, key:value, in key order).
    assert_eq!(
        attribution(&read("bedrock_invocation_log.json")),
        [who(Some("arn:aws:iam::XXXXXXXXXXXX:user/dheeraj"), None, None, None).provider("bedrock")]
    );
    let caller = || {
        who(Some("arn:aws:sts::012345678901:assumed-role/app-role/session-1"), None, None, None)
            .tags(&["project:docs-bot", "team:search"])
            .provider("bedrock")
    };
    assert_eq!(attribution(&read("bedrock_invocation_built.jsonl")), [caller(), caller()]);
    assert_eq!(attribution(&read("bedrock_converse.jsonl")), (0..4).map(|_| only("bedrock")).collect::<Vec<_>>());
    assert_eq!(attribution(&read("gemini_vercel.jsonl")), [only("gemini"), only("gemini")]);
    assert_eq!(attribution(&read("gemini_stream.sse")), [only("gemini")]);
    assert_eq!(attribution(&read("ollama_responses.jsonl")), [only("ollama"), only("ollama"), only("ollama")]);
    assert_eq!(attribution(&read("cohere_stream_chunks.jsonl")), [only("cohere")]);
    // Groq's bodies carry its `x_groq`; Mistral's say nothing of who served them.
    assert_eq!(attribution(&read("groq_chat.jsonl")), [only("groq"), only("groq")]);
    assert_eq!(attribution(&read("groq_stream_x_groq.sse")), [only("groq")]);
    let none = || who(None, None, None, None);
    assert_eq!(attribution(&read("mistral_chat.jsonl")), [none(), none()]);
    let providers: Vec<Option<String>> =
        attribution(&read("mixed_providers.jsonl")).into_iter().map(|w| w.provider).collect();
    assert_eq!(
        providers,
        [s("groq"), s("anthropic"), s("gemini"), s("cohere"), s("ollama"), s("bedrock"), None, s("bedrock")]
    );
}
