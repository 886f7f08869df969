"""Writes the files of this folder with the tools that write them in production,
run here against a loopback stand-in for the model server (fake_openai.py).
Rerun with the versions pinned in requirements.txt:

    python3 -m venv /tmp/real && /tmp/real/bin/pip install -r requirements.txt
    TZ=UTC LITELLM_LOCAL_MODEL_COST_MAP=True /tmp/real/bin/python generate.py
    TZ=UTC LITELLM_LOCAL_MODEL_COST_MAP=True /tmp/real/bin/python generate.py --attribution

(the second writes only the *_attribution files, in a process of their own).
Times and ids are the run's own, so a rerun changes them: the tests that read
these files (crates/tokscope-core/tests/real_files.rs) assert the values of the
committed files, written out by hand."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_openai  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS = ["What is the capital of France?", "Tell me a long story.", "What is the weather in Paris?"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


def write(name, text):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        f.write(text)


def litellm_calls(base):
    """Runs the LiteLLM calls both LiteLLM files log (3 calls, the third a
    tool call; a 4th streamed with usage) against the loopback server and
    returns each success callback's arguments (kwargs, response, start, end)."""
    import litellm
    from litellm.integrations.custom_logger import CustomLogger

    calls = []

    class Capture(CustomLogger):
        def log_success_event(self, kwargs, response_obj, start_time, end_time):
            calls.append((kwargs, response_obj, start_time, end_time))

    litellm.callbacks = [Capture()]
    for prompt in PROMPTS:
        extra = {"tools": TOOLS} if "weather" in prompt else {}
        litellm.completion(model="openai/gpt-4o-mini", api_base=base, api_key="sk-loopback",
                           messages=[{"role": "user", "content": prompt}], max_tokens=4 if "long" in prompt else 64,
                           **extra)
    stream = litellm.completion(model="openai/gpt-4o-mini", api_base=base, api_key="sk-loopback", stream=True,
                                stream_options={"include_usage": True},
                                messages=[{"role": "user", "content": PROMPTS[0]}])
    for _ in stream:
        pass
    for _ in range(50):
        if len(calls) == 4:
            break
        time.sleep(0.1)
    return calls


def litellm_files(calls, name="litellm_gcs.ndjson"):
    """LiteLLM: the GCS bucket logger's NDJSON of StandardLoggingPayloads."""
    from litellm.integrations.gcs_bucket.gcs_bucket import GCSBucketLogger

    # The GCS bucket logger's own serialisation of a batch (one object per line).
    items = [{"payload": kw["standard_logging_object"], "kwargs": kw} for kw, *_ in calls]
    write(name, GCSBucketLogger._combine_payloads_to_ndjson(None, items) + "\n")


def litellm_pubsub_v1_file(calls, name="litellm_pubsub_v1.ndjson"):
    """LiteLLM: the SpendLogsPayload its GCS Pub/Sub logger publishes with
    litellm.gcs_pub_sub_use_v1 (times as datetimes, which its
    json.dumps(message, default=str) writes as text). The logger itself
    cannot run here: GcsPubSubLogger calls premium_user_check() (a LiteLLM
    Enterprise licence) in __init__ and in its log hook, and posts to
    pubsub.googleapis.com with Google credentials. So each call's payload is
    built by the function that logger calls, get_logging_payload (the proxy's
    spend-log builder, free), from the callback's own arguments, and
    serialised by the logger's own expression."""
    from litellm.proxy.spend_tracking.spend_tracking_utils import get_logging_payload

    lines = []
    for kwargs, response_obj, start_time, end_time in calls:
        message = get_logging_payload(kwargs=kwargs, response_obj=response_obj, start_time=start_time,
                                      end_time=end_time)
        # GcsPubSubLogger.publish_message's serialisation, before base64.
        lines.append(json.dumps(message, default=str))
    write(name, "\n".join(lines) + "\n")


def stream_file(base):
    """A streamed chat completion as a proxy that keeps the raw body logs it:
    the server-sent events exactly as the openai client received them (its
    raw streaming response, byte for byte), two calls one after the other:
    one with logprobs and stream_options.include_usage, one with logprobs and
    no usage."""
    import openai

    client = openai.OpenAI(base_url=base, api_key="sk-loopback")
    calls = [(PROMPTS[0], {"stream_options": {"include_usage": True}}), (PROMPTS[1], {"max_tokens": 4})]
    body = b""
    for prompt, extra in calls:
        with client.chat.completions.with_streaming_response.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], stream=True, logprobs=True,
                **extra) as response:
            body += b"".join(response.iter_bytes())
    with open(os.path.join(HERE, "openai_stream.sse"), "wb") as f:
        f.write(body)


def vllm_span_file():
    """vLLM's `llm_request` span as its OutputProcessor.do_tracing builds it
    (vllm/v1/engine/output_processor.py at commit d0782260; attribute names
    in vllm/tracing/utils.py at 0bf3270f): vLLM cannot run here, so the
    attributes, their types and the span's name, kind and times are taken
    from that source, and the span is made and exported by the OpenTelemetry
    SDK's own tracer and OTLP/JSON file exporter, as vLLM's tracer exports it."""
    import json as _json

    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import SpanKind

    path = os.path.join(HERE, "otel_vllm.jsonl")
    if os.path.exists(path):
        os.remove(path)
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("vllm.llm_engine")
    # (request id, arrival, first_token_latency, e2e, queued, prefill, decode, prompt, generated, finish,
    #  top_p, max_tokens, temperature): do_tracing sets the last three only when truthy.
    requests = [
        ("cmpl-vllm-real-1", 1737710446.25, 0.0625, 0.5, 0.002, 0.045, 0.4375, 14, 8, "stop", 0.9, 64, 0.7),
        ("cmpl-vllm-real-2", 1737710447.0, 0.125, 1.0, 0.01, 0.1, 0.875, 1041, 16, "length", 1.0, 16, 0.0),
    ]
    for rid, arrival, ttft, e2e, queued, prefill, decode, prompt, generated, finish, top_p, max_tokens, temp in requests:
        attributes = {
            "gen_ai.latency.time_to_first_token": ttft,
            "gen_ai.latency.e2e": e2e,
            "gen_ai.latency.time_in_queue": queued,
            "gen_ai.usage.prompt_tokens": prompt,
            "gen_ai.usage.completion_tokens": generated,
            "gen_ai.latency.time_in_model_prefill": prefill,
            "gen_ai.latency.time_in_model_decode": decode,
            "gen_ai.latency.time_in_model_inference": prefill + decode,
            "gen_ai.request.id": rid,
            "gen_ai.response.finish_reasons": _json.dumps([finish]),
        }
        if top_p:
            attributes["gen_ai.request.top_p"] = top_p
        if max_tokens:
            attributes["gen_ai.request.max_tokens"] = max_tokens
        if temp:
            attributes["gen_ai.request.temperature"] = temp
        attributes["gen_ai.request.n"] = 1
        span = tracer.start_span("llm_request", kind=SpanKind.SERVER, start_time=int(arrival * 1e9),
                                 attributes=attributes)
        span.end(end_time=int((arrival + e2e) * 1e9))
    provider.shutdown()


def langfuse_file():
    """Langfuse's public API, GET /api/public/v2/observations: the SDK's own
    response model (camelCase), serialised by the SDK, saved indented as a
    browser or `curl | jq .` saves it. The values are this script's (no
    Langfuse server runs here); names, nesting and encoding are the SDK's."""
    import datetime as dt

    from langfuse.api.commons.types.observation_v2 import ObservationV2
    from langfuse.api.observations.types.observations_v2meta import ObservationsV2Meta
    from langfuse.api.observations.types.observations_v2response import ObservationsV2Response

    t0 = dt.datetime(2025, 1, 24, 9, 20, 46, 847371, tzinfo=dt.timezone.utc)
    ms = lambda n: t0 + dt.timedelta(milliseconds=n)  # noqa: E731
    common = dict(trace_id="trace-real-1", project_id="proj-1", environment="default",
                  session_id="session-real-1", user_id="user-real-1", trace_name="qa")
    observations = [
        ObservationV2(id="obs-span-1", type="SPAN", name="handler", start_time=t0, end_time=ms(2100),
                      is_root_observation=True, **common),
        ObservationV2(id="obs-gen-1", type="GENERATION", name="chat", parent_observation_id="obs-span-1",
                      start_time=ms(10), completion_start_time=ms(452), end_time=ms(1310), level="DEFAULT",
                      model="gpt-4o-mini-2024-07-18", model_parameters={"max_tokens": 256, "temperature": 0.2},
                      input=[{"role": "user", "content": "What is the capital of France?"}],
                      output={"role": "assistant", "content": "Paris."},
                      metadata={"finish_reason": "stop"},
                      usage_details={"input": 1014, "input_cached_tokens": 1024, "output": 2, "total": 2040},
                      cost_details={"input": 0.0002289, "output": 0.0000012, "total": 0.0002301},
                      total_cost=0.0002301, latency=1.3, time_to_first_token=0.442, **common),
        ObservationV2(id="obs-gen-2", type="GENERATION", name="chat", parent_observation_id="obs-span-1",
                      start_time=ms(1400), end_time=ms(2050), level="ERROR", status_message="429 Rate limit reached",
                      model="gpt-4o-mini-2024-07-18", usage_details={}, cost_details={}, **common),
    ]
    resp = ObservationsV2Response(data=observations, meta=ObservationsV2Meta(cursor=None))
    write("langfuse_api_observations.json", resp.json(indent=2) + "\n")


def otel_files(base):
    """OpenTelemetry spans of the openai client's calls, as two instrumentations
    write them (OpenInference, as Arize Phoenix reads; OpenLLMetry), each to
    OTLP/JSON lines by the SDK's own file exporter (one TracesData per span)."""
    import openai
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    def run(name, instrumentor):
        path = os.path.join(HERE, name)
        if os.path.exists(path):
            os.remove(path)
        provider = TracerProvider(resource=Resource.create({"service.name": "tokscope-real"}))
        exporter = FileSpanExporter(path)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        instrumentor.instrument(tracer_provider=provider)
        client = openai.OpenAI(base_url=base, api_key="sk-loopback")
        for prompt in PROMPTS:
            extra = {"tools": TOOLS} if "weather" in prompt else {}
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}],
                                           max_tokens=4 if "long" in prompt else 64, **extra)
        instrumentor.uninstrument()
        provider.shutdown()

    from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInference
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

    run("otel_openinference.jsonl", OpenInference())
    run("otel_openllmetry.jsonl", OpenLLMetry())


# The files that carry attribution (who a request ran for, who served it),
# written by the same tools as the files above, in a process of their own
# (`generate.py --attribution` writes only these).
ATTRIBUTION_PROMPTS = [PROMPTS[0], PROMPTS[1]]


def litellm_attribution_calls(base):
    """Two LiteLLM calls that name who they ran for, returning each success
    callback's arguments: the first through the SDK alone (`user=`, tags in
    `metadata`); the second as the proxy makes it: the request body and a
    virtual key (alias, owner, team, project) go through the proxy's own
    `add_litellm_data_to_request` (what its /chat/completions route runs
    before calling LiteLLM; the end user taken from the body by the proxy's
    `get_end_user_id_from_request_body`, as its auth does), and the data it
    returns is passed to `litellm.completion`, as the proxy passes it on."""
    import asyncio

    import litellm
    from litellm.integrations.custom_logger import CustomLogger
    from litellm.proxy._types import UserAPIKeyAuth
    from litellm.proxy.auth.auth_utils import get_end_user_id_from_request_body
    from litellm.proxy.litellm_pre_call_utils import add_litellm_data_to_request
    from litellm.proxy.proxy_server import ProxyConfig
    from starlette.requests import Request

    calls = []

    class Capture(CustomLogger):
        def log_success_event(self, kwargs, response_obj, start_time, end_time):
            calls.append((kwargs, response_obj, start_time, end_time))

    litellm.callbacks = [Capture()]
    litellm.completion(model="openai/gpt-4o-mini", api_base=base, api_key="sk-loopback",
                       messages=[{"role": "user", "content": ATTRIBUTION_PROMPTS[0]}], max_tokens=64,
                       user="sdk-user-1", metadata={"tags": ["nightly-eval", "suite:geo"]})

    body = {"model": "openai/gpt-4o-mini", "max_tokens": 4, "user": "end-user-42",
            "messages": [{"role": "user", "content": ATTRIBUTION_PROMPTS[1]}],
            "metadata": {"tags": ["feature:story", "tier:free"]}}
    key = UserAPIKeyAuth(api_key="sk-proxy-virtual-key", key_alias="search-backend", user_id="owner-7",
                         team_id="team-uuid-1", team_alias="search", project_id="project-uuid-9",
                         project_alias="assistant")
    key.end_user_id = get_end_user_id_from_request_body(body)
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
             "headers": [(b"content-type", b"application/json")], "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", 4000), "scheme": "http", "root_path": ""}
    data = asyncio.run(add_litellm_data_to_request(data=body, request=Request(scope), user_api_key_dict=key,
                                                   proxy_config=ProxyConfig(), general_settings={}))
    litellm.completion(**data, api_base=base, api_key="sk-loopback")
    for _ in range(50):
        if len(calls) == 2:
            break
        time.sleep(0.1)
    return calls


def otel_attribution_files(base):
    """OpenTelemetry spans that name who they ran for: OpenInference's
    context attributes (`using_attributes` with a user, a session and tags;
    `using_user` and `using_session` alone), and OpenLLMetry under a
    resource naming its service and `deployment.environment.name`; the same
    client, calls and exporter as otel_files."""
    import contextlib

    import openai
    from openinference.instrumentation import using_attributes, using_session, using_user
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    def run(name, instrumentor, resource, contexts):
        path = os.path.join(HERE, name)
        if os.path.exists(path):
            os.remove(path)
        provider = TracerProvider(resource=Resource.create(resource))
        provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
        instrumentor.instrument(tracer_provider=provider)
        client = openai.OpenAI(base_url=base, api_key="sk-loopback")
        for prompt, context in zip(ATTRIBUTION_PROMPTS, contexts):
            with context():
                client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}],
                                               max_tokens=4 if "long" in prompt else 64)
        instrumentor.uninstrument()
        provider.shutdown()

    from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInference
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

    def user_and_session():
        stack = contextlib.ExitStack()
        stack.enter_context(using_user("user-oi-2"))
        stack.enter_context(using_session("session-oi-2"))
        return stack

    run("otel_openinference_attribution.jsonl", OpenInference(), {"service.name": "qa-bot"},
        [lambda: using_attributes(user_id="user-oi-1", session_id="session-oi-1", tags=["beta", "region:eu"]),
         user_and_session])
    run("otel_openllmetry_attribution.jsonl", OpenLLMetry(),
        {"service.name": "story-api", "deployment.environment.name": "staging"},
        [contextlib.nullcontext, contextlib.nullcontext])


def langfuse_attribution_file():
    """Langfuse's public API observations (as langfuse_file) of traces that
    name their user, tags, environment and project: the v2 observations carry
    their trace's `userId` and `tags`. The second generation's metadata holds
    what Langfuse's LangChain callback records of the model call (`ls_provider`,
    `ls_model_name`, `ls_model_type`); the values are this script's."""
    import datetime as dt

    from langfuse.api.commons.types.observation_v2 import ObservationV2
    from langfuse.api.observations.types.observations_v2meta import ObservationsV2Meta
    from langfuse.api.observations.types.observations_v2response import ObservationsV2Response

    t0 = dt.datetime(2025, 1, 24, 10, 5, 12, 250000, tzinfo=dt.timezone.utc)
    ms = lambda n: t0 + dt.timedelta(milliseconds=n)  # noqa: E731
    observations = [
        ObservationV2(id="obs-attr-1", trace_id="trace-attr-1", project_id="proj-attr", type="GENERATION",
                      name="chat", environment="production", user_id="user-lf-1", session_id="session-lf-1",
                      tags=["checkout", "tenant:acme"], trace_name="qa", start_time=t0, end_time=ms(640),
                      model="gpt-4o-mini-2024-07-18", usage_details={"input": 14, "output": 2, "total": 16},
                      cost_details={"total": 0.0000033}, total_cost=0.0000033,
                      metadata={"finish_reason": "stop"}),
        ObservationV2(id="obs-attr-2", trace_id="trace-attr-2", project_id="proj-attr", type="GENERATION",
                      name="ChatOpenAI", environment="staging", user_id="user-lf-2", tags=["batch"],
                      start_time=ms(1000), end_time=ms(1500), model="gpt-4o-mini-2024-07-18",
                      usage_details={"input": 17, "input_cached_tokens": 1024, "output": 4, "total": 1045},
                      metadata={"ls_provider": "openai", "ls_model_name": "gpt-4o-mini", "ls_model_type": "chat"}),
    ]
    resp = ObservationsV2Response(data=observations, meta=ObservationsV2Meta(cursor=None))
    write("langfuse_api_observations_attribution.json", resp.json(indent=2) + "\n")


def otel_langfuse_attribution_file(base):
    """Spans as Langfuse's own OpenTelemetry client writes them: langfuse
    5.2.0's client (its span processor, `environment="production"`) on a
    tracer provider that OpenLLMetry instruments, each call inside a
    Langfuse span and its `propagate_attributes` (a user, a session and
    tags; then a user and an environment), exported through the client's
    `span_exporter` by the same OTLP/JSON file exporter (no Langfuse server:
    nothing is sent)."""
    import openai
    from langfuse import Langfuse, propagate_attributes
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    path = os.path.join(HERE, "otel_langfuse_attribution.jsonl")
    if os.path.exists(path):
        os.remove(path)
    provider = TracerProvider(resource=Resource.create({"service.name": "checkout-api"}))
    langfuse = Langfuse(public_key="pk-lf-loopback", secret_key="sk-lf-loopback", base_url="http://127.0.0.1:9",
                        environment="production", tracer_provider=provider, span_exporter=FileSpanExporter(path))
    instrumentor = OpenLLMetry()
    instrumentor.instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=base, api_key="sk-loopback")
    contexts = [dict(user_id="user-lf-otel-1", session_id="session-lf-otel-1", tags=["checkout", "tenant:acme"]),
                dict(user_id="user-lf-otel-2", environment="staging")]
    for prompt, attributes in zip(ATTRIBUTION_PROMPTS, contexts):
        with langfuse.start_as_current_observation(as_type="span", name="handler"):
            with propagate_attributes(**attributes):
                client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}],
                                               max_tokens=4 if "long" in prompt else 64)
    instrumentor.uninstrument()
    langfuse.flush()
    langfuse.shutdown()


def attribution_files():
    """Writes only the files that carry attribution (`generate.py --attribution`)."""
    base = fake_openai.start()
    calls = litellm_attribution_calls(base)
    litellm_files(calls, "litellm_gcs_attribution.ndjson")
    litellm_pubsub_v1_file(calls, "litellm_pubsub_v1_attribution.ndjson")
    langfuse_attribution_file()
    otel_attribution_files(base)
    otel_langfuse_attribution_file(base)

def main():
    base = fake_openai.start()
    # Both LiteLLM files log the same calls (LiteLLM reports a second
    # series of calls in one process only in part).
    calls = litellm_calls(base)
    litellm_files(calls)
    litellm_pubsub_v1_file(calls)
    langfuse_file()
    otel_files(base)
    stream_file(base)
    vllm_span_file()


if __name__ == "__main__":
    attribution_files() if sys.argv[1:] == ["--attribution"] else main()
