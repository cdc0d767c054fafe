"""DeepSpeed ZeRO-3 side of bench/vs_deepspeed.py: one torch.distributed process per rank (launched by
torch.distributed.run, gloo, DS_ACCELERATOR=cpu) training the SLAM-Omni model of tests/oracle/slam_omni_ref.py
(Qwen2ForCausalLM + group-decode adapter, forward_losses) the way omnishard sft does:

- data: step s, rank r reads sample perm[s * ranks + r] of the epoch permutation (docs/training.md "data order"),
  batch 1 per rank, no accumulation; each rank's loss is the mean over its tokens, gradients are averaged over the
  ranks (DeepSpeed's data parallelism), so the logged loss is the ranks' mean (omnishard's definition);
- fp32 (or with --bf16 DeepSpeed's bf16 mode: the model loaded in bf16, bf16 parameters gathered and computed
  with, fp32 master weights and optimizer state in DeepSpeed's bf16 optimizer, the cross-entropy on fp32 logits as transformers' causal-LM loss does), ZeRO-3 (parameters created under zero.Init through transformers' HfDeepSpeedConfig, as ms-swift's
  Trainer does), torch.optim.AdamW (betas/eps/lr as given, weight decay 0) without warm-up or decay, gradient
  clipping at 1.0, activation recomputation (transformers' gradient checkpointing) unless --no-recompute.

Rank 0 writes --out: per-step wall times (forward + backward + step), losses, gradient norms.
"""
import argparse, json, os, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--no-recompute", action="store_true")
    ap.add_argument("--bf16", action="store_true", help="DeepSpeed's bf16 mode (bf16 compute, fp32 master weights)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    import deepspeed
    import torch.distributed as dist
    from safetensors.torch import load_file
    from transformers import Qwen2ForCausalLM
    from transformers.integrations import HfDeepSpeedConfig
    from oracle import slam_omni_ref as ref

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "train_batch_size": world,
           "gradient_clipping": 1.0, "zero_optimization": {"stage": 3}, "zero_allow_untested_optimizer": True,
           "fp16": {"enabled": False}, "bf16": {"enabled": a.bf16}, "steps_per_print": 10 ** 9}
    dschf = HfDeepSpeedConfig(cfg)   # noqa: F841 (kept alive: from_pretrained then builds under zero.Init)
    meta = json.load(open(os.path.join(a.model, "slam_omni.json")))
    G, T, A = meta["code_layer"], meta["padded_text_vocabsize"], meta["padded_audio_vocabsize"]
    dtype = torch.bfloat16 if a.bf16 else torch.float32
    model = Qwen2ForCausalLM.from_pretrained(a.model, torch_dtype=dtype)
    if not a.no_recompute:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    with deepspeed.zero.Init(config_dict_or_path=cfg):
        adapter = ref.Adapter(A, G)
    sd = load_file(os.path.join(a.model, "slam_omni.safetensors"))
    with deepspeed.zero.GatheredParameters(list(adapter.parameters()), modifier_rank=0):
        if rank == 0:
            with torch.no_grad():
                adapter.linear.weight.copy_(sd["group_decode_adapter.linear.weight"])
                adapter.linear.bias.copy_(sd["group_decode_adapter.linear.bias"])
    del sd

    class Slam(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.llm, self.adapter = model, adapter

        def forward(self, ids, lab, mask):
            terms = ref.forward_losses(self.llm, self.adapter, ids, lab, mask, G, T, A, upcast=a.bf16)
            w = 1.0 / (G + 1)
            return sum(w * s / c for s, c, _ in terms if c > 0)

    net = Slam()
    net.train()
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=False)
    engine, _, _, _ = deepspeed.initialize(model=net, optimizer=opt, config=cfg)
    pdtype = str(next(net.parameters()).dtype)   # what ZeRO-3 gathers and computes with (bf16 mode: torch.bfloat16)
    data = ref.load_data(a.data, a.seq)
    n = len(data)
    times, losses, norms = [], [], []
    for step in range(a.steps):
        epoch, base = divmod(step * world, n)
        if base + world > n:
            sys.exit(f"{a.data}: {n} samples do not divide into steps of {world} (use a multiple)")
        perm = ref.epoch_perm(n, a.seed, epoch)
        ids, lab, mask = ref.collate([data[perm[base + rank]]], 151643 if 151643 < T + A else 0)
        dist.barrier()
        t0 = time.perf_counter()
        loss = engine(ids, lab, mask)
        engine.backward(loss)
        engine.step()
        dt = time.perf_counter() - t0
        lt = loss.detach().clone()
        dist.all_reduce(lt)
        times.append(dt)
        losses.append(float(lt) / world)
        gn = engine.get_global_grad_norm()
        norms.append(float(gn) if gn is not None else None)
        if rank == 0:
            print(f"ds step {step + 1}: {dt:.3f} s loss {losses[-1]:.6f} grad_norm {norms[-1]}", flush=True)
    if rank == 0:
        json.dump({"times": times, "losses": losses, "grad_norms": norms, "param_dtype": pdtype, "deepspeed": deepspeed.__version__,
                   "torch": torch.__version__}, open(a.out, "w"))
    dist.barrier()


if __name__ == "__main__":
    main()
