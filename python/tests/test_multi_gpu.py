"""scripts/multi_gpu_train.py under torchrun, 2 processes: DDP and FSDP2 training, the drop-in
swapped against the unswapped model (losses and reduced gradients within the bounds, no
fallback). On the CPU with gloo at a small width wherever torch is installed; on 2 GPUs with
NCCL at SAME-L's width when there are 2 CUDA devices and libdswa's CUDA backend sees them.
Skipped (visibly) without torch, without the script (a copy of the tests run against an
installed wheel has no scripts/) and, for NCCL, without 2 GPUs."""
import json
import os
import subprocess
import sys
import tempfile

from _util import need_torch, skip, torch

import dswa  # noqa: E402  (after _util, which puts the package on the path)

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "scripts", "multi_gpu_train.py")


def torchrun(*args, timeout=900):
    """The script under torchrun with 2 processes; its JSON summary (it must pass)."""
    if not os.path.exists(SCRIPT):
        skip(f"skipped: {SCRIPT} not found (the tests run outside the repository)")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "summary.json")
        # this test's dswa (and library: DSWA_LIB passes through) in the processes too
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(dswa.__file__)) +
                   os.pathsep + os.environ.get("PYTHONPATH", ""))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "2", SCRIPT, *args, "--json", out]
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
        assert r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-8000:]}"
        with open(out) as f:
            summary = json.load(f)
    print("\n".join(line for line in r.stdout.splitlines()
                    if line.startswith("multi_gpu_train:")))
    assert summary["passed"] and summary["world_size"] == 2, summary
    assert set(summary["runs"]) == {"ddp", "fsdp2"}, summary["runs"].keys()
    for mode, run in summary["runs"].items():
        assert run["passed"] and run["fallbacks"] == [], (mode, run)
        assert len(run["steps"]) == summary["steps"], (mode, run)
    return summary


def test_cpu_gloo():
    need_torch()
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        skip("skipped: this torch has no gloo process group")
    s = torchrun("--device", "cpu", "--dim", "128", "--depth", "1", "--seq", "48",
                 "--batch", "1", "--steps", "2")
    assert s["device"] == "cpu" and s["backend"] == "gloo", s


def test_two_gpus_nccl():
    need_torch()
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        skip(f"skipped: needs 2 CUDA devices for torch "
             f"(found {torch.cuda.device_count() if torch.cuda.is_available() else 0})")
    if not dswa.cuda_available():
        skip("skipped: libdswa.so has no CUDA backend or sees no device")
    import torch.distributed as dist
    if not dist.is_nccl_available():
        skip("skipped: this torch has no NCCL")
    s = torchrun("--device", "cuda", timeout=1200)
    assert s["backend"] == "nccl" and s["model"]["dim"] == 1536, s
