#!/usr/bin/env python3
"""Generate the oracle fixtures of tokscope-core's BLEU and KL tests
(tests/oracle_bleu.rs, tests/oracle_kl.rs).

Expected values come from sacreBLEU, SciPy and NumPy, never from the Rust
code under test. Run from anywhere:

    pip install sacrebleu scipy numpy
    python3 crates/tokscope-core/tests/oracle/bleu_kl.py

Writes bleu.json and kl.json next to this script. Non-finite floats are
written as the strings "inf", "-inf" and "nan" (JSON has no literal for
them). Everything is seeded: rerunning gives byte-identical files for the
same library versions (recorded in each file's "generated_by").
"""

import json
import math
import random
import sys
from pathlib import Path

import numpy as np
import sacrebleu
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
import scipy
from scipy import stats

OUT = Path(__file__).resolve().parent
VERSIONS = {
    "python": sys.version.split()[0],
    "numpy": np.__version__,
    "scipy": scipy.__version__,
    "sacrebleu": sacrebleu.__version__,
}


def num(x):
    """A float for JSON: finite values as numbers, the rest as strings."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def dump(name, obj):
    obj = {"generated_by": VERSIONS, **obj}
    with open(OUT / name, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")


# ------------------------------------------------------------------- BLEU

BLEU_PAIRS = [
    ("The cat sat on the mat.", "The cat sat on the mat."),
    ("The cat sat on the mat.", "The cat is on the mat."),
    ("", "The cat sat on the mat."),
    ("The cat sat on the mat.", ""),
    ("", ""),
    ("cat", "cat"),
    ("cat", "dog"),
    ("cat", "The cat sat on the mat."),
    ("the the the the the the the", "The cat is on the mat."),
    ("Hello, world!!! (really?) [yes] {no} <maybe> \"quoted\" 'single'", "Hello world! really? yes no maybe quoted single"),
    ("It costs $1,234.56 -- or 1.234,56 EUR.", "It costs $1,234.56 or 1.234,56 EUR."),
    ("Version 3.14 released on 2024-05-01, build 7-2.", "Version 3.14 was released on 2024-05-01 (build 7-2)."),
    ("state-of-the-art well-known end-to-end", "state of the art, well known, end to end"),
    ("Numbers: 1,000 and 2.5 and .5 and 5. and ,7", "Numbers: 1,000 and 2.5 and 0.5 and 5 and 7"),
    ("Ünïcödé façade — naïve café… «quotes» 日本語のテキスト", "Unicode façade - naive café... \"quotes\" 日本語のテキスト"),
    ("emoji 🚀🚀 rocket launch 🚀", "emoji 🚀 rocket launch"),
    ("a b c d e f g h", "h g f e d c b a"),
    ("a b c d", "a b c d e f g h i j k l"),
    ("a b c d e f g h i j k l", "a b c d"),
    ("AT&amp;T &lt;tag&gt; &quot;x&quot; &amp;lt;", "AT&T <tag> \"x\" &lt;"),
    ("line one\nline two", "line one line two"),
    ("hyphen-\nated word", "hyphenated word"),
    ("skip <skipped> this", "skip this"),
    ("trailing spaces   \t  ", "trailing spaces"),
    ("  leading spaces", "leading spaces"),
    ("tabs\tand\u00a0nbsp\u2003em space", "tabs and nbsp em space"),
    ("x\x1cy\x1fz", "x y z"),
    ("3-4 times, 10-20%; a-b", "3 - 4 times, 10 - 20 %; a-b"),
    ("e.g. i.e. U.S.A. etc.", "e.g. i.e. U.S.A. etc."),
    ("Mr. Smith's dog's bone.", "Mr. Smith 's dog 's bone ."),
    ("...", "..."),
    ("., ,. .,. 1.,2 ,.3", "., ,. .,. 1.,2 ,.3"),
    ("a.b,c 1.a a.1 1,a a,1", "a . b , c 1 . a a . 1 1 , a a , 1"),
    ("@user #tag ~tilde ^caret `tick` |pipe| \\back/slash", "@user #tag ~tilde ^caret `tick` |pipe| \\back/slash"),
    ("repeated repeated repeated words words", "repeated words repeated words"),
    ("the quick brown fox jumps over the lazy dog", "the quick brown fox jumped over the lazy dog"),
    ("the quick brown fox", "the quick brown fox jumps over the lazy dog"),
    ("quick brown", "the quick brown fox"),
    ("A B C", "a b c"),
    ("one two three four five", "one two three four five six"),
    ("one two three four five six", "one two three four five"),
    ("1.5x faster (vs. 2.0)!", "1.5x faster (vs. 2.0)!"),
    ("$5 + $6 = $11?", "$5 + $6 = $11 ?"),
    ("x=1;y=2:z=3", "x = 1 ; y = 2 : z = 3"),
    ("Total: 12,345,678.90 tokens.", "Total: 12,345,678.90 tokens"),
    ("-5 -5.5 5- 5-5 a-5", "-5 -5.5 5- 5-5 a-5"),
    ("他说：“你好！”", "他说：“你好！”"),
    ("Straße Größe", "strasse grösse"),
]


def bleu_case(hyp, ref):
    tok = Tokenizer13a()
    res = sacrebleu.sentence_bleu(hyp, [ref])
    return {
        "hyp": hyp,
        "ref": ref,
        "hyp_tokens": tok(hyp.rstrip()).split(),
        "ref_tokens": tok(ref.rstrip()).split(),
        "score": num(res.score / 100.0),
        "counts": list(res.counts),
        "totals": list(res.totals),
        "bp": num(res.bp),
    }


def bleu_cases():
    cases = [bleu_case(h, r) for h, r in BLEU_PAIRS]
    rnd = random.Random(1234)
    vocab = ["the", "a", "model", "token", "cache", "latency", "is", "was", "fast", "slow",
             "GPU", "1,024", "3.5", "ms", "-", ",", ".", "!", "?", "(", ")", "don't", "e.g.",
             "x-y", "2024-01-02", "%", "$", "über", "naïve", "10.", ".5"]
    for _ in range(24):
        ref_words = [rnd.choice(vocab) for _ in range(rnd.randint(1, 18))]
        hyp_words = list(ref_words)
        # Perturb: drop, swap, replace, insert.
        for _ in range(rnd.randint(0, 6)):
            op = rnd.random()
            if op < 0.25 and len(hyp_words) > 1:
                hyp_words.pop(rnd.randrange(len(hyp_words)))
            elif op < 0.5 and len(hyp_words) > 1:
                i, j = rnd.randrange(len(hyp_words)), rnd.randrange(len(hyp_words))
                hyp_words[i], hyp_words[j] = hyp_words[j], hyp_words[i]
            elif op < 0.75:
                hyp_words[rnd.randrange(len(hyp_words))] = rnd.choice(vocab)
            else:
                hyp_words.insert(rnd.randrange(len(hyp_words) + 1), rnd.choice(vocab))
        join = lambda ws: "".join(w if rnd.random() < 0.3 else " " + w for w in ws).strip()
        cases.append(bleu_case(join(hyp_words), join(ref_words)))
    return cases


def lin_och_case(cand, ref):
    """The project's BLEU-4 over token ids (src/mediation/bleu.rs), re-derived
    here: clipped precisions, add-one for n >= 2, brevity exp(1 - r/c)."""
    from collections import Counter

    if not cand:
        return 0.0
    log_sum = 0.0
    for n in range(1, 5):
        c = Counter(tuple(cand[i:i + n]) for i in range(len(cand) - n + 1))
        r = Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
        total = sum(c.values())
        matched = sum(min(k, r[g]) for g, k in c.items())
        num_, den = (matched, total) if n == 1 else (matched + 1, total + 1)
        if num_ == 0:
            return 0.0
        log_sum += math.log(num_ / den) / 4
    bp = math.exp(1 - len(ref) / len(cand)) if len(cand) < len(ref) else 1.0
    return bp * math.exp(log_sum)


def lin_och_cases():
    rnd = random.Random(42)
    out = []
    for _ in range(20):
        ref = [rnd.randint(0, 8) for _ in range(rnd.randint(0, 12))]
        cand = [rnd.randint(0, 8) for _ in range(rnd.randint(0, 12))]
        if rnd.random() < 0.5 and ref:
            cand = ref[: rnd.randint(1, len(ref))] + cand[:3]
        out.append({"cand": cand, "ref": ref, "score": lin_och_case(cand, ref)})
    return out


# --------------------------------------------------------------------- KL

KL_EPS = 1e-12


def kl_eps_reference(p, q, normalize):
    """Our documented definition, in numpy: divide by the sums, replace exact
    zeros of q (where p > 0) by KL_EPS, skip p_i = 0 terms, base 2."""
    p = np.asarray(p, float)
    q = np.asarray(q, float)
    p = p / p.sum()
    q = q / q.sum()
    qq = np.where(q == 0.0, KL_EPS, q)
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0) / qq), 0.0)
    return float(terms.sum() / math.log(2))


def kl_cases():
    cases = []

    def ok(name, p, q, normalize):
        s = stats.entropy(p, q, base=2)
        cases.append({"name": name, "p": [num(v) for v in p], "q": [num(v) for v in q],
                      "normalize": normalize, "scipy": num(s),
                      "expected": num(kl_eps_reference(p, q, normalize))})

    def err(name, p, q, normalize, error):
        cases.append({"name": name, "p": [num(v) for v in p], "q": [num(v) for v in q],
                      "normalize": normalize, "error": error})

    ok("identical", [0.5, 0.5], [0.5, 0.5], False)
    ok("fair_vs_biased_coin", [0.5, 0.5], [0.9, 0.1], False)
    ok("biased_vs_fair_coin", [0.9, 0.1], [0.5, 0.5], False)
    ok("p_has_zero", [0.0, 0.25, 0.75], [0.2, 0.3, 0.5], False)
    ok("single_element", [1.0], [1.0], False)
    ok("one_hot_vs_uniform4", [1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], False)
    ok("uniform_vs_peaked", [0.25] * 4, [0.97, 0.01, 0.01, 0.01], False)
    ok("tiny_q", [0.5, 0.5], [1 - 1e-15, 1e-15], False)
    ok("within_tolerance_sum", [0.3333333, 0.3333333, 0.3333334], [0.2, 0.3, 0.5], False)
    ok("sum_off_by_5e-7", [0.5000005, 0.5], [0.25, 0.75], False)
    ok("counts_normalized", [3, 1, 0, 6], [2, 2, 2, 4], True)
    ok("scaled_normalized", [0.1, 0.2, 0.3], [0.3, 0.2, 0.1], True)
    ok("normalize_true_already_normalized", [0.2, 0.8], [0.6, 0.4], True)
    ok("large_counts", [1e9, 3e9, 6e9], [2e9, 2e9, 6e9], True)
    # q has zeros where p > 0: SciPy says inf; the crate uses the epsilon.
    ok("q_zero_where_p_positive", [0.5, 0.5], [1.0, 0.0], False)
    ok("q_zero_where_p_zero", [1.0, 0.0], [0.5, 0.5], False)
    ok("q_zero_both_zero", [0.6, 0.4, 0.0], [0.5, 0.5, 0.0], False)
    ok("q_zero_counts", [1, 1, 2], [0, 3, 1], True)

    rng = np.random.default_rng(2718)
    for i in range(12):
        k = int(rng.integers(2, 60))
        p = rng.dirichlet(np.ones(k) * rng.uniform(0.1, 3.0))
        q = rng.dirichlet(np.ones(k) * rng.uniform(0.1, 3.0))
        ok(f"random_dirichlet_{i}", p.tolist(), q.tolist(), False)
    for i in range(4):
        k = int(rng.integers(2, 20))
        p = rng.integers(0, 50, k).astype(float)
        q = rng.integers(1, 50, k).astype(float)
        p[0] += 1
        ok(f"random_counts_{i}", p.tolist(), q.tolist(), True)

    err("length_mismatch", [0.5, 0.5], [1.0], False, "length_mismatch")
    err("empty", [], [], False, "empty")
    err("negative_p", [1.5, -0.5], [0.5, 0.5], False, "invalid_entry")
    err("negative_q", [0.5, 0.5], [1.5, -0.5], True, "invalid_entry")
    err("nan_p", [float("nan"), 1.0], [0.5, 0.5], True, "invalid_entry")
    err("inf_q", [0.5, 0.5], [float("inf"), 1.0], True, "invalid_entry")
    err("p_not_normalized", [0.5, 0.6], [0.5, 0.5], False, "not_normalized")
    err("q_not_normalized", [0.5, 0.5], [0.2, 0.2], False, "not_normalized")
    err("sum_off_by_2e-6", [0.500002, 0.5], [0.25, 0.75], False, "not_normalized")
    err("zero_sum_normalize", [0.0, 0.0], [0.5, 0.5], True, "zero_sum")
    err("zero_sum_q_normalize", [1.0, 2.0], [0.0, 0.0], True, "zero_sum")
    return cases


def main():
    dump("bleu.json", {"sentence_bleu": bleu_cases(), "lin_och_token_ids": lin_och_cases()})
    dump("kl.json", {"epsilon": KL_EPS, "cases": kl_cases()})
    print(f"bleu.json: {len(BLEU_PAIRS) + 24} sentence pairs")
    print(f"kl.json: {len(kl_cases())} cases")


if __name__ == "__main__":
    main()
