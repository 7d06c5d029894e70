"""Device choice: NCCL on CUDA when every local rank has a GPU, otherwise CPU with gloo and a
note that says so. On a machine without enough GPUs (CI) the fallback is what is tested; on a
GPU machine the same test checks the CUDA run instead."""
import torch

from pplab.runtime import run_schedule


def _enough_gpus(P: int) -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() >= P


def test_cuda_request_runs_on_cuda_or_falls_back_with_a_note():
    r = run_schedule("1f1b", P=2, M=4, steps=2, device="cuda", timeout=90)
    assert r.grad_max_rel_error <= 1e-5
    if _enough_gpus(2):
        assert (r.backend, r.note) == ("nccl", "")
        assert r.device.startswith("cuda")
        assert r.cuda_peak_bytes is not None and all(b > 0 for b in r.cuda_peak_bytes)
    else:
        assert (r.backend, r.device) == ("gloo", "cpu")
        assert r.cuda_peak_bytes is None
        assert "fell back to CPU with gloo" in r.note and "2 local ranks" in r.note


def test_cpu_request_never_mentions_cuda():
    r = run_schedule("gpipe", P=2, M=2, steps=1, device="cpu", timeout=90)
    assert (r.backend, r.device, r.note) == ("gloo", "cpu", "")


def test_one_rank_runs_on_the_one_gpu_with_nccl_or_says_why_not():
    """A single-stage run needs one GPU: there it takes NCCL and CUDA (the stream syncs and the
    allocator's peak), with the same gradients as the reference; without one, the note says
    why it fell back."""
    r = run_schedule("1f1b", P=1, M=4, steps=2, device="cuda", timeout=90)
    assert r.grad_max_rel_error <= 1e-5
    if _enough_gpus(1):
        assert (r.backend, r.note) == ("nccl", "")
        assert r.device.startswith("cuda")
        [peak] = r.cuda_peak_bytes
        assert peak > r.peak_saved_bytes[0] > 0     # the allocator holds weights, grads too
    else:
        assert (r.backend, r.device) == ("gloo", "cpu")
        assert "fell back to CPU with gloo" in r.note and "for 1 local rank:" in r.note
