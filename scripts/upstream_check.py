"""The drop-in inside upstream's own code: stable_audio_3's TransformerResamplingBlock (the
SAME-L autoencoder's resampling stage: TransformerBlocks with DyT, differential attention,
RoPE, called with the window it computes from stride and sliding_window), or with `--model
decoder` the whole SAMEDecoder of SAME-L's shape (latent 256 -> Linear -> that stage with 12
blocks, the last 7 with the sine gate -> 512 channels per sample of the 16x output), built as
its scripts build it and cast whole (`model.to(dtype)`: float32, float16, bfloat16, the rotary
inv_freq buffer included), unswapped and swapped with dswa.samel.swap_attention.

For each dtype: the output of a forward (eval, no grad) and of a training step (train,
activation checkpointing as upstream's checkpointing=True, forward + backward over every
parameter) swapped against unswapped (relative Frobenius error: the output, every parameter's
gradient), the number of dswa warnings (each a fallback to upstream's forward: must be 0), and
ms per call of each (CUDA: CUDA events around repeated calls after warm-up; CPU: wall clock).
With --profile (CUDA) each side's forward and training step also under torch.profiler: GPU
kernel time per call, the attention modules' share of it (forward), dswa's kernels' share,
and the host syncs per call (each stalls eager mode's launch queue).
Exit 1 on any warning or an error above the dtype's bound, unless (16-bit) the swapped model is
within 25 % of the unswapped one's own error against a float32 reference (the swapped model
in float32, which the float32 row checks against upstream's): deep in 16-bit, upstream's model
is itself far from its float32 self.

    python3 scripts/upstream_check.py --upstream DIR [--device cuda] [--model stage|decoder]
        [--dim 1536] [--L 1292] [--depth N] [--profile] [--json OUT.json]

DIR holds upstream's `stable_audio_3` package (a checkout of Stability-AI/stable-audio-3);
it imports einops, and torchaudio only by name (a stub module is enough on the CPU).
"""
import argparse
import json
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# swapped against unswapped, both in the dtype (each side's own roundings)
TOL = {"float32": 1e-2, "float16": 2e-2, "bfloat16": 8e-2}


def within_reference(errs):
    """Swapped as close to the float32 reference as unswapped is, give or take 25 %: [unswapped
    error, swapped error] against it; None (no reference) fails."""
    return errs is not None and errs[1] <= 1.25 * errs[0]


def rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


def timed(fn, device, reps):
    """ms per call: on CUDA bench/block_bench.py's CUDA events around reps calls (median of 3),
    on the CPU the wall clock."""
    if device == "cuda":
        from block_bench import event_time
        return event_time(fn, reps, 2, 3)[0]
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) * 1e3 / reps


def profiled(m, x, step, attention):
    """block_bench.kernel_profile of m's forward (eval, no grad; the kernels of its `attention`
    modules in a range) and of its training step."""
    import torch
    from block_bench import kernel_profile
    ranges = []

    def enter(mod, args):
        ranges.append(torch.profiler.record_function("attention"))
        ranges[-1].__enter__()

    def leave(mod, args, out):
        ranges.pop().__exit__(None, None, None)

    hooks = [h for a in m.modules() if isinstance(a, attention)
             for h in (a.register_forward_pre_hook(enter), a.register_forward_hook(leave))]
    m.eval()
    try:
        with torch.no_grad():
            fwd = kernel_profile(lambda: m(x), ranges=("attention",))
    finally:
        for h in hooks:
            h.remove()
    m.train()
    return {"forward": fwd, "training": kernel_profile(lambda: step(m))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, help="directory holding stable_audio_3/")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dim", type=int, default=1536)
    ap.add_argument("--L", type=int, default=1292, help="latent frames (N = 17 L tokens)")
    ap.add_argument("--model", choices=("stage", "decoder"), default="stage")
    ap.add_argument("--depth", type=int, help="transformer blocks in the stage (default: "
                    "stage 1, decoder SAME-L's 12)")
    # 16-bit first: float32 under upstream's FlexAttention autotunes for minutes on a GPU
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16", "float32"])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.depth is None:
        args.depth = 12 if args.model == "decoder" else 1
    sys.path[:0] = [args.upstream, os.path.join(ROOT, "python"), os.path.join(ROOT, "bench")]
    import torch
    import dswa.samel
    from stable_audio_3.models.autoencoders import SAMEDecoder, TransformerResamplingBlock
    from stable_audio_3.models.transformer import Attention

    dev, stride = args.device, 16
    result = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
              "torch": torch.__version__, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "model": args.model, "dim": args.dim, "L": args.L, "depth": args.depth,
              "rows": []}
    ok = True
    for dtype in args.dtypes:
        dt = getattr(torch, dtype)
        torch.manual_seed(0)
        # SAME-L's decoder stage: latent -> 16 tokens per frame, sliding window [1, 1] latent
        # frames = [17, 17] tokens, DyT, differential attention with feat_scale, heads of 64
        if args.model == "decoder":
            build = lambda: SAMEDecoder(out_channels=512, channels=args.dim, latent_dim=256,
                                        c_mults=[1], strides=[stride],
                                        transformer_depths=[args.depth], sliding_window=[1, 1],
                                        sinusoidal_blocks=[8], dim_heads=64, feat_scale=True)
            x_channels = 256
        else:
            build = lambda: TransformerResamplingBlock(args.dim, args.dim, stride,
                                                       sliding_window=[1, 1], type="decoder",
                                                       transformer_depth=args.depth,
                                                       dim_heads=64, feat_scale=True)
            x_channels = args.dim
        ref = build()
        # upstream zero-inits the branch outputs: make them count. Only those: noise on every
        # weight made the 12-block decoder chaotic (an input moved by 1e-7 moved its output by
        # 4e-3 in float64; float32 itself off float64 by 1.3e-2, swapped or not), and the
        # swapped-against-unswapped comparison meaningless.
        for p in ref.parameters():
            if not p.any():
                with torch.no_grad():
                    p.add_(0.02 * torch.randn_like(p))
        # a second instance, not a deepcopy: the decoder's weight-normed convolutions have none
        sw = build()
        sw.load_state_dict(ref.state_dict())
        # 16-bit rows: a float32 reference (swapped: no FlexAttention autotuning; the float32 row
        # checks it against upstream's). Deep in 16-bit, upstream's own model is far from its
        # float32 self (bf16, 12 blocks: about 20 %), so swapped against unswapped alone says
        # little there: each is judged by its distance from the reference as well.
        wide = None
        if dt != torch.float32:
            wide = build()
            wide.load_state_dict(ref.state_dict())
            wide = dswa.samel.swap_attention(wide.to(device=dev, dtype=torch.float32))
        # cast whole, as upstream's scripts do
        ref, sw = (m.to(device=dev, dtype=dt) for m in (ref, sw))
        sw = dswa.samel.swap_attention(sw)
        x = torch.randn(1, x_channels, args.L, device=dev, dtype=dt)
        ropes = [m.inv_freq.dtype for m in ref.modules() if hasattr(m, "inv_freq")]
        row = dict(dtype=dtype, inv_freq=str(ropes[0]) if ropes else None)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            ref.eval(), sw.eval()
            with torch.no_grad():
                yu, ys = ref(x), sw(x)
                row["rel_err_forward"] = rel(ys, yu)
                if wide is not None:
                    wide.eval()
                    yw = wide(x.float())
                    row["ref_err_forward"] = [rel(yu, yw), rel(ys, yw)]   # unswapped, swapped
                row["forward_ms"] = [timed(lambda m=m: m(x), dev, args.reps) for m in (ref, sw)]
            def step(m, inp=x):
                m.zero_grad(set_to_none=True)
                m(inp).float().square().sum().backward()   # sum: 16-bit gradients clear of underflow

            grads = []
            for m in (ref, sw) + ((wide,) if wide is not None else ()):
                m.train()
                for b in m.modules():                    # upstream's activation checkpointing
                    if isinstance(b, TransformerResamplingBlock):
                        b.checkpointing = True
                step(m, x.float() if m is wide else x)
                grads.append(torch.cat([p.grad.double().flatten() for p in m.parameters()
                                        if p.grad is not None]))
            row["rel_err_grads"] = rel(grads[1], grads[0])
            if wide is not None:
                row["ref_err_grads"] = [rel(grads[0], grads[2]), rel(grads[1], grads[2])]
            row["training_ms"] = [timed(lambda m=m: step(m), dev, args.reps) for m in (ref, sw)]
            if args.profile and dev == "cuda":
                sides = (("unswapped", ref, Attention),
                         ("swapped", sw, dswa.samel.SamelAttention))
                row["profile"] = {side: profiled(m, x, step, attention)
                                  for side, m, attention in sides}
        row["dswa_warnings"] = [str(w.message)[:200] for w in got if "dswa" in str(w.message)]
        row["speedup_forward"] = row["forward_ms"][0] / row["forward_ms"][1]
        row["speedup_training"] = row["training_ms"][0] / row["training_ms"][1]
        row["ok"] = not row["dswa_warnings"] and all(
            row[f"rel_err_{w}"] < TOL[dtype] or within_reference(row.get(f"ref_err_{w}"))
            for w in ("forward", "grads"))
        ok &= row["ok"]
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
        if args.json:                     # after every row: a run cut short keeps its rows
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
