"""Independent Llama forward pass in float64 NumPy, for tests/model/decoder_golden.rs.

Reads config.json and model.safetensors itself (8-byte header length, JSON
header, raw little-endian data: no safetensors/torch/transformers), widens
F32/F16/BF16 values exactly to float64, and prints the logits of every
position of the given ids as JSON.

    python3 llama_numpy.py MODEL_DIR 1,450,31,...
"""
import json
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        raw = data[base + start : base + end]
        dtype = meta["dtype"]
        if dtype == "F32":
            values = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif dtype == "F16":
            values = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif dtype == "BF16":
            # bfloat16 is the top half of a float32: shift the bits up, reinterpret.
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32).astype(np.float64)
        else:
            raise SystemExit(f"{name}: unsupported dtype {dtype}")
        tensors[name] = values.reshape(meta["shape"])
    return tensors


def rms_norm(x, w, eps):
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def rope(x, inv_freq):
    # x: [T, heads, hd]; Hugging Face's rotate_half (first half pairs with second half).
    t = np.arange(x.shape[0], dtype=np.float64)[:, None] * inv_freq[None, :]
    cos = np.concatenate([np.cos(t), np.cos(t)], axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(t), np.sin(t)], axis=-1)[:, None, :]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def forward(model_dir, ids):
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = read_safetensors(f"{model_dir}/model.safetensors")
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim") or h // heads
    eps = cfg.get("rms_norm_eps", 1e-6)
    theta = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 10000.0)
    inv_freq = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    t = len(ids)
    x = w["model.embed_tokens.weight"][ids]
    mask = np.triu(np.full((t, t), -np.inf), k=1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}"
        xn = rms_norm(x, w[f"{p}.input_layernorm.weight"], eps)
        q = (xn @ w[f"{p}.self_attn.q_proj.weight"].T).reshape(t, heads, hd)
        k = (xn @ w[f"{p}.self_attn.k_proj.weight"].T).reshape(t, kv_heads, hd)
        v = (xn @ w[f"{p}.self_attn.v_proj.weight"].T).reshape(t, kv_heads, hd)
        q, k = rope(q, inv_freq), rope(k, inv_freq)
        out = np.empty((t, heads, hd))
        for head in range(heads):
            kv = head // (heads // kv_heads)
            scores = q[:, head, :] @ k[:, kv, :].T / np.sqrt(hd) + mask
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            out[:, head, :] = (scores / scores.sum(axis=-1, keepdims=True)) @ v[:, kv, :]
        x = x + out.reshape(t, heads * hd) @ w[f"{p}.self_attn.o_proj.weight"].T
        xn = rms_norm(x, w[f"{p}.post_attention_layernorm.weight"], eps)
        gate = xn @ w[f"{p}.mlp.gate_proj.weight"].T
        up = xn @ w[f"{p}.mlp.up_proj.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[f"{p}.mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight") if not cfg.get("tie_word_embeddings", False) else None
    if head is None:
        head = w["model.embed_tokens.weight"]
    return x @ head.T


if __name__ == "__main__":
    ids = [int(i) for i in sys.argv[2].split(",")]
    print(json.dumps(forward(sys.argv[1], ids).tolist()))
