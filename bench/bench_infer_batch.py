"""Batched decoding speed: `omnishard infer --dataset --output_file --infer_batch_size B` against transformers'
`generate` on the same model, prompts and max_new_tokens, at the same B, in the same run (docs/performance.md
"Batched inference"; docs/inference.md "Batched decoding").

The bench model of bench/bench_infer.py (a random SLAM-Omni model: Qwen2 shape from the options, T = 8192, A = 4160,
G = 3 with the group-decode adapter; speed does not depend on the weights) decodes --records text questions,
greedy, repetition penalties 1 (transformers' `generate` has none by default). The sides alternate (A/B, the
order flipped every round) for every B:

- omnishard, `--text_only` (decoder + lm_head per step, the work `generate` does) and, with --full, the full
  SLAM-Omni step (the G audio layers through the adapter as well): records/s and tokens/s from its own last
  progress line (the decoding alone; model loading excluded);
- transformers: Qwen2ForCausalLM (the same weights: the model directory omnishard reads) `generate` greedy on the
  prompts' text rows (the same P positions per record, from omnishard's --show_prompt), in chunks of B left-padded
  with an attention mask, `max_new_tokens` = `min_new_tokens` = --new with no eos (every record generates --new
  tokens); the time of the `generate` calls (model loading excluded), under torch.inference_mode.

Both sides on the same thread count (--threads: OMP_NUM_THREADS for omnishard, torch.set_num_threads). The tokens
are not compared: omnishard's embedding is the mean of the G+1 rows of a position, transformers' the text row's
(the token equality of B > 1 and B = 1 is tests/test_infer_batch.py's).

    .venv/bin/python bench/bench_infer_batch.py [--build build] [--records 32] [--new 32] [--batches 1 4 16]
        [--rounds 2] [--threads 1] [--full]
"""
import argparse, json, pathlib, re, statistics, subprocess, sys, tempfile, time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_infer import cpu_model, make_bench_model, model_args   # noqa: E402


def omnishard(binary, model, data, out, B, new, threads, text_only):
    cmd = [str(binary), "infer", "--model", str(model), "--dataset", str(data), "--output_file", str(out),
           "--max_new_tokens", str(new), "--infer_batch_size", str(B), "--repetition_penalty", "1", "--overwrite", "true"]
    cmd += ["--text_only"] if text_only else []
    env = {"OMP_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=7200)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    m = re.findall(r"(\d+)/(\d+) records, ([\d.]+) records/s, ([\d.]+) tokens/s", p.stderr)[-1]
    rows = [json.loads(s) for s in open(out)]
    return float(m[2]), float(m[3]), rows


def prompts(binary, model, data, threads):
    """each record's text row (omnishard's prompt, --show_prompt): the prompt transformers gets"""
    with tempfile.TemporaryDirectory() as td:
        out = pathlib.Path(td) / "p.jsonl"
        cmd = [str(binary), "infer", "--model", str(model), "--dataset", str(data), "--output_file", str(out),
               "--max_new_tokens", "1", "--show_prompt", "--text_only"]
        p = subprocess.run(cmd, capture_output=True, text=True, env={"OMP_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"})
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
        return [json.loads(s)["prompt_input_ids"][-1] for s in open(out)]


def transformers_side(model, texts, B, new):
    import torch
    n, t0 = 0, time.perf_counter()
    for i in range(0, len(texts), B):
        chunk = texts[i:i + B]
        P = max(len(t) for t in chunk)
        ids = torch.tensor([[0] * (P - len(t)) + t for t in chunk])   # left padding
        mask = torch.tensor([[0] * (P - len(t)) + [1] * len(t) for t in chunk])
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=new,
                                 min_new_tokens=new, eos_token_id=None, pad_token_id=0)
        n += (out.shape[1] - P) * len(chunk)
    sec = time.perf_counter() - t0
    return len(texts) / sec, n / sec


def main():
    ap = argparse.ArgumentParser()
    model_args(ap)
    ap.add_argument("--records", type=int, default=32)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--full", action="store_true", help="also omnishard's full step (audio through the adapter)")
    a = ap.parse_args()
    import torch
    from transformers import Qwen2ForCausalLM
    from oracle import slam_samples_ref as sref
    torch.set_num_threads(a.threads)
    binary = ROOT / a.build / "omnishard"
    sides = ["omnishard"] + (["omnishard_full"] if a.full else []) + ["transformers"]
    with tempfile.TemporaryDirectory() as td:
        d = pathlib.Path(td) / "m"
        make_bench_model(d, a)
        data = pathlib.Path(td) / "test.jsonl"
        sref.write_jsonl(data, sref.make_records(a.records, A=4160, seed=11))
        texts = prompts(binary, d, data, a.threads)
        hf = Qwen2ForCausalLM.from_pretrained(str(d), torch_dtype=torch.float32).eval()
        res = {(s, B): [] for s in sides for B in a.batches}
        steps = {}
        for r in range(a.rounds):
            for B in a.batches:
                for side in (sides if r % 2 == 0 else sides[::-1]):
                    if side == "transformers":
                        rps, tps = transformers_side(hf, texts, B, a.new)
                    else:
                        full = side == "omnishard_full"
                        rps, tps, rows = omnishard(binary, d, data, pathlib.Path(td) / "out.jsonl", B, a.new,
                                                   a.threads, not full)
                        key = [(x["text_ids"], x["audio"]) for x in rows]
                        if steps.setdefault((side, "tokens"), key) != key:
                            sys.exit(f"{side}: B = {B} gave other tokens than B = {a.batches[0]}")
                        steps[side] = statistics.mean(x["steps"] for x in rows)
                    res[(side, B)].append((rps, tps))
                    print(f"round {r} B {B:3} {side:15}: {rps:8.3f} records/s {tps:9.1f} tokens/s", flush=True)
        P = [len(t) for t in texts]
        print(f"CPU: {cpu_model()}; {a.threads} thread(s); hidden {a.hidden}, {a.layers} layers, FFN {a.inter}, "
              f"{a.heads}/{a.kv_heads} heads, V {a.text_vocab + 4160}, G 3; {a.records} records, prompts {min(P)}-"
              f"{max(P)} positions, {a.new} new tokens (omnishard mean steps: "
              + ", ".join(f"{s} {steps[s]:.1f}" for s in sides if s in steps) + ")")
        print("| B | " + " | ".join(f"{s} records/s | tokens/s" for s in sides) + " | omnishard / transformers |")
        print("|---|" + "---|---|" * len(sides) + "---|")
        for B in a.batches:
            med = {s: (statistics.median(x[0] for x in res[(s, B)]), statistics.median(x[1] for x in res[(s, B)]))
                   for s in sides}
            print(f"| {B} | " + " | ".join(f"{med[s][0]:.3f} | {med[s][1]:.1f}" for s in sides)
                  + f" | {med['omnishard'][1] / med['transformers'][1]:.2f}x |")


if __name__ == "__main__":
    main()
