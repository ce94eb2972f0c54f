#!/usr/bin/env python3
"""Training with dswa's drop-in on several GPUs: a small SAME-L-shaped model (upstream_block.py's
TransformerBlock: DyT pre-norms, differential attention with DyT qk-norm and RoPE, SwiGLU
feed-forward; dim 1536 = 24 heads of 64, ff_mult 3, window [17, 17]) trained for a few steps
under DDP (float32) and under FSDP2 (fully_shard per block and at the root, MixedPrecisionPolicy:
bfloat16 parameters, float32 gradient reduction), each twice from the same initial weights and
the same data: unswapped, and swapped (dswa.samel.swap_attention: the attention core as one
fused call, forward and backward). Each rank trains on its own batches; per step the losses and
every parameter's gradient after the all-reduce (DDP) or reduce-scatter (FSDP2: the full
gradient, full_tensor()) are compared, swapped against unswapped:

    torchrun --nproc_per_node 2 scripts/multi_gpu_train.py --json out.json
    torchrun --nproc_per_node 2 scripts/multi_gpu_train.py --device cpu --dim 128 ...  (gloo)

The errors are relative Frobenius norms per tensor, bounded per dtype (TOL below). Any dswa
warning is an error (a fallback to the unswapped forward warns). A DDP control checks that the
gradients compared are the reduced ones: a rank's own gradient of step 0 (DDP's no_sync), all
parameters together, differs from them by far more than the bound. The summary is printed; on success rank 0 writes it as JSON to
--json. Exit status: 0 passed, 1 a mismatch or a dswa warning, 2 cannot run here (not under
torchrun, fewer GPUs than processes, no CUDA backend in libdswa, no torch). dswa is imported
as installed, else from this repository's python/ (its library from build/ or $DSWA_LIB)."""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Relative Frobenius error bounds, swapped against unswapped. float32 (DDP): torch's default
# float32 precision ("highest"), under which the drop-in computes fp32-accurate math (and
# torch's own matmuls do not use TF32); the few steps let the two models' weights drift apart
# by the rounding of each update. bfloat16 (FSDP2's parameters): the unswapped model's own
# rounding after every op dominates, as python/tests/test_samel_upstream.py bounds it (4e-2 for
# the output, 4x that for gradients).
TOL = {"float32": {"loss": 1e-4, "grad": 2e-4},
       "bfloat16": {"loss": 4e-2, "grad": 1.6e-1}}
CONTROL_FACTOR = 10      # the control's error must exceed this many times the gradient bound


def parse(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run it with torchrun --nproc_per_node N (one process per GPU).")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cuda: one GPU per process, NCCL (default); cpu: the CPU backend, gloo")
    p.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                   help="the process group's backend (default: nccl on cuda, gloo on cpu)")
    p.add_argument("--modes", default="ddp,fsdp2",
                   help="comma list of ddp, fsdp2 (default: both)")
    p.add_argument("--dim", type=int, default=1536, help="model width, a multiple of 64 "
                   "(default 1536, SAME-L's)")
    p.add_argument("--depth", type=int, default=2, help="transformer blocks (default 2)")
    p.add_argument("--window", type=int, nargs=2, default=[17, 17], metavar=("LEFT", "RIGHT"),
                   help="the sliding window (default 17 17, SAME-L's)")
    p.add_argument("--batch", type=int, default=2, help="sequences per process and step")
    p.add_argument("--seq", type=int, default=512, help="sequence length (default 512)")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps (default 3)")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="where rank 0 writes the summary (only when every check "
                   "passed)")
    a = p.parse_args(argv)
    a.backend = a.backend or ("nccl" if a.device == "cuda" else "gloo")
    a.modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in a.modes if m not in ("ddp", "fsdp2")]
    if bad or not a.modes:
        p.error(f"--modes {','.join(a.modes)}: expected a comma list of ddp, fsdp2")
    if a.dim <= 0 or a.dim % 64:
        p.error(f"--dim {a.dim}: a positive multiple of 64 (heads of 64)")
    for name in ("depth", "batch", "seq", "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if min(a.window) < 0:
        p.error("--window: two integers >= 0")
    return a


class CannotRun(Exception):
    """This machine or launch cannot run the check (exit status 2)."""


def imports():
    """torch, dswa.samel and upstream_block; dswa as installed, else this repository's."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise CannotRun("torch is not installed") from None
    sys.path.insert(0, os.path.join(ROOT, "python", "tests"))     # upstream_block.py
    sys.path.append(os.path.join(ROOT, "python"))                 # dswa, when not installed
    import dswa
    import dswa.samel
    import upstream_block
    return dswa, upstream_block


def main(argv=None):
    args = parse(argv)
    try:
        return run(args)
    except CannotRun as e:
        print(f"multi_gpu_train: cannot run: {e}", file=sys.stderr, flush=True)
        return 2


def run(args):
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise CannotRun("not started by torchrun (RANK, WORLD_SIZE unset): torchrun "
                        "--nproc_per_node 2 scripts/multi_gpu_train.py ...")
    dswa, U = imports()
    import torch
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if world < 2:
        raise CannotRun(f"WORLD_SIZE {world}: the check needs 2 or more processes (the "
                        "gradients compared are reduced over them)")
    if args.device == "cuda":
        n = torch.cuda.device_count()
        if n < int(os.environ.get("LOCAL_WORLD_SIZE", world)):
            raise CannotRun(f"{os.environ.get('LOCAL_WORLD_SIZE', world)} processes on this "
                            f"machine need as many CUDA GPUs: torch sees {n}")
        if not dswa.cuda_available():
            raise CannotRun(f"libdswa ({dswa.library_path()}) has no CUDA backend or sees no "
                            "device")
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if args.backend == "nccl" and args.device != "cuda":
        raise CannotRun("--backend nccl needs --device cuda")
    # dswa's warnings (a fallback to the unswapped forward) are errors
    import warnings
    warnings.filterwarnings("error", message="dswa")
    dist.init_process_group(args.backend, device_id=device if args.device == "cuda" else None)
    try:
        summary = train_all(args, dswa, U, torch, dist, rank, world, device)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(summary, indent=1), flush=True)
        if summary["passed"] and args.json:
            tmp = args.json + ".part"
            with open(tmp, "w") as f:
                json.dump(summary, f, indent=1)
            os.replace(tmp, args.json)
    return 0 if summary["passed"] else 1


class Model:
    """depth TransformerBlocks called as upstream's transformer calls them (window by keyword;
    each block its own RoPE table for positions 0 .. N-1)."""

    @staticmethod
    def build(U, torch, args):
        class SameL(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = torch.nn.ModuleList(
                    U.TransformerBlock(args.dim, dim_heads=64, ff_mult=3)
                    for _ in range(args.depth))
                self.window = list(args.window)

            def forward(self, x):
                for b in self.blocks:
                    x = b(x, self_attention_flash_sliding_window=self.window)
                return x
        return U.randomize(SameL(), args.seed)


def batch(torch, args, step, rank, device):
    """(x, target) of this step and rank: the same for the unswapped and swapped runs, another
    for each rank."""
    g = torch.Generator().manual_seed(args.seed * 100003 + step * 1009 + rank)
    x = torch.randn(args.batch, args.seq, args.dim, generator=g)
    t = torch.randn(args.batch, args.seq, args.dim, generator=g)
    return x.to(device), t.to(device)


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm().clamp(min=1e-30))


def fallbacks(model):
    """The reasons any swapped module fell back for (each warns once: an error here)."""
    return sorted({w for m in model.modules() for w in getattr(m, "_warned", ())})


def train(mode, swapped, base, args, dswa, torch, dist, rank, world, device):
    """Trains a copy of base (swapped or not) under mode; per step (local loss, reduced
    gradients by name) and, for DDP, the control's local gradients of step 0."""
    import copy
    import torch.nn.functional as F
    model = copy.deepcopy(base)
    if swapped:
        dswa.samel.swap_attention(model)
    model = model.to(device)
    control = None
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        wrapped = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        named = list(wrapped.module.named_parameters())
    else:
        try:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        except ImportError:          # torch < 2.6
            try:
                from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
            except ImportError:
                raise CannotRun(f"torch {torch.__version__} has no FSDP2 (fully_shard)") from None
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh(device.type, (world,))
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for b in model.blocks:
            fully_shard(b, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        wrapped = model
        named = list(model.named_parameters())
    opt = torch.optim.SGD([p for _, p in named], lr=args.lr)
    steps = []
    for s in range(args.steps):
        x, t = batch(torch, args, s, rank, device)
        if mode == "ddp" and s == 0:
            with wrapped.no_sync():       # this rank's own gradient, not all-reduced
                F.mse_loss(wrapped(x).float(), t).backward()
            control = {n: p.grad.detach().clone() for n, p in named}
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(wrapped(x).float(), t)
        loss.backward()
        if mode == "ddp":
            grads = {n: p.grad.detach().clone() for n, p in named}
        else:
            grads = {n: p.grad.full_tensor().detach().clone() for n, p in named}
        steps.append((float(loss.detach()), grads))
        opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps, control, fallbacks(model)


def train_all(args, dswa, U, torch, dist, rank, world, device):
    import time
    torch.manual_seed(args.seed)
    base = Model.build(U, torch, args)
    summary = {"world_size": world, "device": args.device, "backend": args.backend,
               "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
               "torch": torch.__version__, "dswa": dswa.__version__,
               "dswa_package": os.path.dirname(dswa.__file__), "library": dswa.library_path(),
               "float32_matmul_precision": torch.get_float32_matmul_precision(),
               "model": {"dim": args.dim, "heads": args.dim // 64, "head_dim": 64,
                         "ff_mult": 3, "depth": args.depth, "window": list(args.window)},
               "batch_per_rank": args.batch, "seq": args.seq, "steps": args.steps,
               "lr": args.lr, "runs": {}}
    passed = True
    for mode in args.modes:
        dtype = "float32" if mode == "ddp" else "bfloat16"
        tol = TOL[dtype]
        t0 = time.time()
        ref, _, _ = train(mode, False, base, args, dswa, torch, dist, rank, world, device)
        t1 = time.time()
        sw, control, fell = train(mode, True, base, args, dswa, torch, dist, rank, world, device)
        t2 = time.time()
        # errors on this rank; then the largest over the ranks
        rows, local = [], []
        for s, ((l_ref, g_ref), (l_sw, g_sw)) in enumerate(zip(ref, sw)):
            if set(g_ref) != set(g_sw):
                raise RuntimeError(f"{mode}: the swapped model's parameters "
                                   f"{sorted(set(g_sw) ^ set(g_ref))} differ from the unswapped")
            errs = {n: rel(g_sw[n], g_ref[n]) for n in g_ref}
            worst = max(errs, key=errs.get)
            local += [abs(l_sw - l_ref) / abs(l_ref), errs[worst]]
            rows.append({"step": s, "loss_unswapped": l_ref, "loss_swapped": l_sw,
                         "worst_parameter_rank0": worst})
        ctrl = None
        if control is not None:
            names = sorted(control)
            ctrl = rel(torch.cat([control[n].reshape(-1) for n in names]),
                       torch.cat([sw[0][1][n].reshape(-1) for n in names]))
            local.append(-ctrl)                 # the smallest over the ranks, through MAX
        e = torch.tensor(local, dtype=torch.float64, device=device)
        dist.all_reduce(e, op=dist.ReduceOp.MAX)
        e = e.tolist()
        fell_any = torch.tensor([float(bool(fell))], device=device)
        dist.all_reduce(fell_any, op=dist.ReduceOp.MAX)
        ok = True
        for s, row in enumerate(rows):
            row["loss_rel_err"], row["grad_rel_err_max"] = e[2 * s], e[2 * s + 1]
            ok &= row["loss_rel_err"] <= tol["loss"] and row["grad_rel_err_max"] <= tol["grad"]
        run = {"dtype": dtype, "tolerance": tol, "steps": rows,
               "seconds_unswapped": round(t1 - t0, 2), "seconds_swapped": round(t2 - t1, 2),
               "fallbacks": fell}
        if ctrl is not None:
            run["control_local_vs_reduced_grad_rel_err_min"] = -e[-1]
            ok &= -e[-1] > CONTROL_FACTOR * tol["grad"]
        if fell_any.item():
            ok = False
        run["passed"] = bool(ok)
        summary["runs"][mode] = run
        passed &= ok
        if rank == 0:
            print(f"multi_gpu_train: {mode} ({dtype}): "
                  + "; ".join(f"step {r['step']}: loss {r['loss_unswapped']:.6g} vs "
                              f"{r['loss_swapped']:.6g} (rel {r['loss_rel_err']:.2g}), "
                              f"grads rel <= {r['grad_rel_err_max']:.2g}" for r in rows)
                  + (f"; control {run['control_local_vs_reduced_grad_rel_err_min']:.2g}"
                     if ctrl is not None else "")
                  + f": {'ok' if ok else 'MISMATCH'} (bounds {tol})", flush=True)
    summary["passed"] = bool(passed)
    return summary


if __name__ == "__main__":
    sys.exit(main())
