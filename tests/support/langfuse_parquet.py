"""Writes the parseable lines of a Langfuse JSONL export as a Parquet export
with pyarrow, typed as a warehouse export types them: timestamps as
timestamp[ms, UTC] (or naive timestamp[us] with --naive), usage and cost
details as map<string, double>, metadata as map<string, string>, numbers as
double, everything else as text. Row groups of 4 rows, so a reader crosses
row-group boundaries. Usage: langfuse_parquet.py IN.jsonl OUT.parquet [--naive]
"""
import datetime
import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq

rows = []
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        rows.append(json.loads(line))
    except ValueError:
        pass  # the sample's deliberately cut lines
keys = list(dict.fromkeys(k for r in rows for k in r))
naive = "--naive" in sys.argv
ts_type = pa.timestamp("us") if naive else pa.timestamp("ms", tz="UTC")


def ts(s):
    if s is None:
        return None
    t = datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    return t.replace(tzinfo=None) if naive and t.tzinfo else t


arrays = []
for k in keys:
    vals = [r.get(k) for r in rows]
    if k in ("start_time", "end_time", "completion_start_time", "created_at", "updated_at"):
        arrays.append(pa.array([ts(v) for v in vals], ts_type))
    elif k in ("usage_details", "cost_details"):
        arrays.append(pa.array([None if v is None else [(a, float(b)) for a, b in v.items()] for v in vals],
                               pa.map_(pa.string(), pa.float64())))
    elif k == "metadata":
        arrays.append(pa.array([None if v is None else [(a, b if isinstance(b, str) else json.dumps(b)) for a, b in v.items()]
                                for v in vals], pa.map_(pa.string(), pa.string())))
    elif all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in vals):
        arrays.append(pa.array([None if v is None else float(v) for v in vals], pa.float64()))
    else:
        arrays.append(pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v)) for v in vals], pa.string()))
pq.write_table(pa.Table.from_arrays(arrays, names=keys), sys.argv[2], row_group_size=4)
print(len(rows))
