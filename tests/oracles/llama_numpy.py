"""Independent Llama forward pass in float64 NumPy, for tests/model/decoder_golden.rs
and the per-layer mediation test of tests/model/mediation.rs.

Reads config.json, model.safetensors and tokenizer.json itself (8-byte header
length, JSON header, raw little-endian data: no safetensors/torch/transformers/
tokenizers), widens F32/F16/BF16 values exactly to float64.

    python3 llama_numpy.py MODEL_DIR 1,450,31,...
        prints the logits of every position of the ids as JSON.

    python3 llama_numpy.py mediate SPEC.json
        prints the per-layer effects of docs/mediation.md ("Per-layer direct and
        indirect effects") for the prompts and layer changes of SPEC (below), computed
        here from their definitions: each run recomputes the whole sequence at every
        decoding step (no cache), the direct path as the clean run's final stream plus
        d = edited layer output - clean layer output, BLEU by sacrebleu.

SPEC: {"model_dir": DIR, "max_new_tokens": N, "metrics": ["target_prob", "sacrebleu",
"sacrebleu_ref"], "prompts": [{"ids": [...], "reference": TEXT or null}],
"changes": [{"layer": L, "sample": S, "weight": "attn.q".."mlp.down", "noise": FILE}
or {"layer": L, "sample": 0, "skip": true}]}; FILE holds the noise D of that matrix as
raw little-endian float32, row-major [out, in], added to the stored weight W as W + D.
"""
import json
import struct
import sys

import numpy as np

# `--weight` names -> the Hugging Face tensor name inside `model.layers.{l}.`.
MATRICES = {
    "attn.q": "self_attn.q_proj",
    "attn.k": "self_attn.k_proj",
    "attn.v": "self_attn.v_proj",
    "attn.o": "self_attn.o_proj",
    "mlp.gate": "mlp.gate_proj",
    "mlp.up": "mlp.up_proj",
    "mlp.down": "mlp.down_proj",
}


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


class Llama:
    def __init__(self, model_dir):
        cfg = json.load(open(f"{model_dir}/config.json"))
        self.w = read_safetensors(f"{model_dir}/model.safetensors")
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.heads)
        self.hd = cfg.get("head_dim") or cfg["hidden_size"] // self.heads
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        theta = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 10000.0)
        self.inv_freq = 1.0 / theta ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd)
        eos = cfg.get("eos_token_id")
        self.eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        self.max_positions = cfg["max_position_embeddings"]
        head = self.w.get("lm_head.weight") if not cfg.get("tie_word_embeddings", False) else None
        self.head = head if head is not None else self.w["model.embed_tokens.weight"]

    def layer(self, l, x, weights):
        """Layer l's output stream for input stream x ([T, hidden]), with `weights`
        mapping tensor names to their values."""
        p = f"model.layers.{l}"
        t, heads, kv_heads, hd = x.shape[0], self.heads, self.kv_heads, self.hd
        mask = np.triu(np.full((t, t), -np.inf), k=1)
        xn = rms_norm(x, weights[f"{p}.input_layernorm.weight"], self.eps)
        q = (xn @ weights[f"{p}.self_attn.q_proj.weight"].T).reshape(t, heads, hd)
        k = (xn @ weights[f"{p}.self_attn.k_proj.weight"].T).reshape(t, kv_heads, hd)
        v = (xn @ weights[f"{p}.self_attn.v_proj.weight"].T).reshape(t, kv_heads, hd)
        q, k = rope(q, self.inv_freq), rope(k, self.inv_freq)
        out = np.empty((t, heads, hd))
        for head in range(heads):
            kv = head // (heads // kv_heads)
            scores = q[:, head, :] @ k[:, kv, :].T / np.sqrt(hd) + mask
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            out[:, head, :] = (scores / scores.sum(axis=-1, keepdims=True)) @ v[:, kv, :]
        x = x + out.reshape(t, heads * hd) @ weights[f"{p}.self_attn.o_proj.weight"].T
        xn = rms_norm(x, weights[f"{p}.post_attention_layernorm.weight"], self.eps)
        gate = xn @ weights[f"{p}.mlp.gate_proj.weight"].T
        up = xn @ weights[f"{p}.mlp.up_proj.weight"].T
        return x + (gate / (1.0 + np.exp(-gate)) * up) @ weights[f"{p}.mlp.down_proj.weight"].T

    def edited_layer(self, change, x):
        """Layer change["layer"]'s output under the change: the identity when skipped,
        else the layer with W + D in place of the named matrix W."""
        if change.get("skip"):
            return x
        name = f"model.layers.{change['layer']}.{MATRICES[change['weight']]}.weight"
        weights = dict(self.w)
        weights[name] = self.w[name] + change["delta"]
        return self.layer(change["layer"], x, weights)

    def forward(self, ids, change=None, path="total"):
        """Logits of every position. With a change of layer L: `total` runs the edited
        layer in the stream; `direct` keeps the clean stream through every layer and
        adds d = edited(r_L) - clean(r_L) to the final stream only."""
        x = self.w["model.embed_tokens.weight"][ids]
        direct = None
        for l in range(self.layers):
            if change is not None and change["layer"] == l:
                if path == "total":
                    x = self.edited_layer(change, x)
                    continue
                clean = self.layer(l, x, self.w)
                direct = self.edited_layer(change, x) - clean
                x = clean
            else:
                x = self.layer(l, x, self.w)
        if direct is not None:
            x = x + direct
        return rms_norm(x, self.w["model.norm.weight"], self.eps) @ self.head.T


def forward(model_dir, ids):
    return Llama(model_dir).forward(ids)


def bytes_to_unicode():
    """GPT-2's byte <-> printable character table (the ByteLevel pre-tokenizer's)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class ByteLevelDecoder:
    """Ids -> text for a byte-level BPE tokenizer.json, special tokens skipped."""

    def __init__(self, model_dir):
        tok = json.load(open(f"{model_dir}/tokenizer.json"))
        if tok["decoder"]["type"] != "ByteLevel":
            raise SystemExit(f"decoder {tok['decoder']['type']} is not ByteLevel")
        self.tokens = {i: t for t, i in tok["model"]["vocab"].items()}
        self.special = set()
        for added in tok.get("added_tokens", []):
            self.tokens[added["id"]] = added["content"]
            if added["special"]:
                self.special.add(added["id"])
        self.byte_of = {c: b for b, c in bytes_to_unicode().items()}

    def decode(self, ids):
        text = "".join(self.tokens[i] for i in ids if i not in self.special)
        return bytes(self.byte_of[c] for c in text).decode("utf-8", errors="replace")


def greedy(model, prompt, max_new, change=None, path="total"):
    """Greedy continuation (stops after an EOS id, the budget or the model's
    positions) and the smallest top-1 / top-2 logit gap among its choices."""
    ids, out, margin = list(prompt), [], np.inf
    while len(out) < max_new and len(prompt) + len(out) < model.max_positions:
        logits = model.forward(ids, change, path)[-1]
        top = np.sort(logits)[-2:]
        margin = min(margin, top[1] - top[0])
        nxt = int(np.argmax(logits))
        out.append(nxt)
        ids.append(nxt)
        if nxt in model.eos:
            break
    return out, margin


def softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def mediate(spec):
    import sacrebleu

    model = Llama(spec["model_dir"])
    text = ByteLevelDecoder(spec["model_dir"])
    max_new = spec["max_new_tokens"]
    changes = spec["changes"]
    for change in changes:
        if not change.get("skip"):
            name = f"model.layers.{change['layer']}.{MATRICES[change['weight']]}.weight"
            raw = np.fromfile(change["noise"], dtype="<f4").astype(np.float64)
            change["delta"] = raw.reshape(model.w[name].shape)
    cells, margin = [], np.inf
    for p, prompt in enumerate(spec["prompts"]):
        ids = prompt["ids"]
        clean_logits = model.forward(ids)[-1]
        target = int(np.argmax(clean_logits))
        clean_out, m = greedy(model, ids, max_new)
        margin = min(margin, m)
        clean_text = text.decode(clean_out)

        def measure(metric, change=None, path="total"):
            nonlocal margin
            if metric == "target_prob":
                return float(softmax(model.forward(ids, change, path)[-1])[target])
            out, m = greedy(model, ids, max_new, change, path) if change is not None else (clean_out, np.inf)
            margin = min(margin, m)
            reference = clean_text if metric == "sacrebleu" else prompt["reference"]
            return sacrebleu.sentence_bleu(text.decode(out), [reference]).score

        for metric in spec["metrics"]:
            if metric == "sacrebleu_ref" and prompt.get("reference") is None:
                continue
            y_clean = measure(metric)
            for change in changes:
                total, direct = measure(metric, change, "total"), measure(metric, change, "direct")
                cells.append(
                    {
                        "prompt": p,
                        "metric": metric,
                        "intervention": "skip-layer" if change.get("skip") else "weight-noise",
                        "weight": change.get("weight"),
                        "layer": change["layer"],
                        "sample": change["sample"],
                        "clean": y_clean,
                        "total": total,
                        "direct": direct,
                        "te": total - y_clean,
                        "de": direct - y_clean,
                        "ie": total - direct,
                    }
                )
    # Means over prompts x samples per (metric, intervention, weight, layer, effect).
    groups = {}
    for c in cells:
        key = (c["metric"], c["intervention"], c["weight"], c["layer"])
        groups.setdefault(key, []).append(c)
    means = [
        {"metric": k[0], "intervention": k[1], "weight": k[2], "layer": k[3], "effect": effect, "n": len(g),
         "mean": float(np.mean([c[effect] for c in g]))}
        for k, g in sorted(groups.items(), key=lambda kv: str(kv[0]))
        for effect in ("te", "de", "ie")
    ]
    return {"cells": cells, "means": means, "min_margin": float(margin)}


if __name__ == "__main__":
    if sys.argv[1] == "mediate":
        print(json.dumps(mediate(json.load(open(sys.argv[2])))))
    else:
        ids = [int(i) for i in sys.argv[2].split(",")]
        print(json.dumps(forward(sys.argv[1], ids).tolist()))
