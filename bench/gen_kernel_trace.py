#!/usr/bin/env python3
"""Writes a PyTorch-profiler-like trace of about SIZE_MB megabytes, streaming
(never held in memory), and prints what tokscope must find in it as JSON.

    python3 bench/gen_kernel_trace.py --mb 300 --out /tmp/big.pt.trace.json [--truncate]

Layout (Kineto's): `schemaVersion`, `deviceProperties`, a large
`systemTraceEvents` string (a tenth of the size, at most 16 MB) *before*
`traceEvents`, then the events, pretty-printed over several lines each, then
`traceName`. Events cycle through attention kernels (X, args.layer/head/flops
or only a name), other X kernels, B/E pairs of attention kernels nested in a
B/E step, metadata, counters, instants and flows. Seeded: the same arguments
write the same bytes. With --truncate the file ends inside one more event,
which tokscope must reject.
"""

import argparse
import json
import random

LAYERS, HEADS = 32, 8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--truncate", action="store_true")
    args = ap.parse_args()
    target = int(args.mb * 1e6)
    rnd = random.Random(7)
    expected = {"x_attention": 0, "x_other": 0, "pairs": 0, "attention_pairs": 0, "skipped": 0,
                "attention_duration_us": 0.0, "attention_flops": 0.0, "attention_kernels": 0,
                "per_head_kernels": [[0] * HEADS for _ in range(LAYERS)]}
    with open(args.out, "w", encoding="utf-8") as f:
        blob = min(target // 10, 16_000_000)
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n')
        f.write(",\n".join(json.dumps({"id": i, "name": "NVIDIA H200", "totalGlobalMem": 150119858176,
                                       "numSms": 132}) for i in range(8)))
        f.write('\n  ],\n  "systemTraceEvents": "')
        chunk = "sched_switch: prev=a \\\"b\\\" next=c\\n" * 1000
        written = 0
        while written < blob:
            f.write(chunk)
            written += len(chunk)
        f.write('",\n  "displayTimeUnit": "ms",\n  "traceEvents": [\n')
        first = True
        ts = 1000.0
        size = f.tell()

        def emit(event):
            nonlocal first, size
            text = json.dumps(event, indent=2)
            text = "  " + text.replace("\n", "\n  ")
            if not first:
                text = ",\n" + text
            first = False
            f.write(text)
            size += len(text)

        step = 0
        while size < target:
            step += 1
            layer, head = rnd.randrange(LAYERS), rnd.randrange(HEADS)
            dur = round(rnd.uniform(5, 50), 3)
            flops = float(rnd.randrange(1_000_000, 9_000_000))
            ts = round(ts + dur + 1.0, 3)
            kind = step % 10
            if kind in (0, 1, 2, 3):
                # Attention kernel, layer/head in args (sometimes as strings) or in the name.
                if kind == 3:
                    ev = {"ph": "X", "cat": "kernel", "name": f"model.layer_{layer}.attn_head_{head}.fwd",
                          "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": {"flops": flops, "stream": 7}}
                else:
                    lh = (str(layer), str(head)) if kind == 2 else (layer, head)
                    ev = {"ph": "X", "cat": "kernel", "name": "flash_fwd_kernel", "pid": 0, "tid": 7,
                          "ts": ts, "dur": dur,
                          "args": {"layer": lh[0], "head": lh[1], "flops": flops, "correlation": step}}
                emit(ev)
                expected["x_attention"] += 1
                expected["attention_duration_us"] += dur
                expected["attention_flops"] += flops
                expected["per_head_kernels"][layer][head] += 1
            elif kind in (4, 5):
                emit({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts,
                      "dur": dur, "args": {"External id": step, "Input Dims": [[128, 4096], [4096, 4096]]}})
                expected["x_other"] += 1
            elif kind == 6:
                # A step (B/E) with one attention kernel (B/E) nested on the same thread.
                inner = round(rnd.uniform(1, 9), 3)
                emit({"ph": "B", "cat": "user_annotation", "name": "decode_step", "pid": 0, "tid": 8, "ts": ts})
                emit({"ph": "B", "cat": "kernel", "name": f"layer_{layer}.attn_head_{head}", "pid": 0, "tid": 8,
                      "ts": ts + 1.0, "args": {"flops": flops}})
                emit({"ph": "E", "pid": 0, "tid": 8, "ts": ts + 1.0 + inner})
                emit({"ph": "E", "pid": 0, "tid": 8, "ts": ts + dur})
                expected["pairs"] += 2
                expected["attention_pairs"] += 1
                expected["attention_duration_us"] += (ts + 1.0 + inner) - (ts + 1.0)
                expected["attention_flops"] += flops
                expected["per_head_kernels"][layer][head] += 1
            elif kind == 7:
                emit({"ph": "C", "name": "GPU Memory", "pid": 0, "ts": ts, "args": {"allocated_mb": step % 4096}})
                expected["skipped"] += 1
            elif kind == 8:
                emit({"ph": "i", "s": "t", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize",
                      "pid": 1, "tid": 1, "ts": ts})
                emit({"ph": "s", "id": step, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": ts})
                expected["skipped"] += 2
            else:
                emit({"ph": "M", "name": "thread_name", "pid": 0, "tid": step % 64, "args": {"name": f"stream {step % 64}"}})
                expected["skipped"] += 1
        if args.truncate:
            f.write(',\n  {\n    "ph": "X",\n    "name": "layer_0.attn_head_0",\n    "ts": 1')
        else:
            f.write('\n  ],\n  "traceName": "generated.pt.trace.json"\n}\n')
    expected["attention_kernels"] = expected["x_attention"] + expected["attention_pairs"]
    expected["rows"] = expected["x_attention"] + expected["x_other"] + expected["pairs"]
    expected["events_read"] = expected["x_attention"] + expected["x_other"] + 2 * expected["pairs"] + (1 if args.truncate else 0)
    expected["bytes"] = size
    print(json.dumps(expected))


if __name__ == "__main__":
    main()
