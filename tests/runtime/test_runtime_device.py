"""Device choice: NCCL on CUDA when every local rank has a GPU, otherwise CPU with gloo and a
note that says so. On a machine without enough GPUs (CI) the fallback is what is tested; on a
GPU machine the same test checks the CUDA run instead."""
import pytest
import torch

from pplab.runtime import run_schedule


def _enough_gpus(P: int) -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() >= P


@pytest.mark.parametrize("P", [1, 2])
def test_cuda_request_runs_on_cuda_or_falls_back_with_a_note(P):
    """With a GPU per rank: NCCL and CUDA (the stream syncs, the allocator's peak, which holds
    weights and grads besides the saved activations), gradients equal to the reference;
    without: CPU with gloo, and a note that says why."""
    r = run_schedule("1f1b", P=P, M=4, steps=2, device="cuda", timeout=90)
    assert r.grad_max_rel_error <= 1e-5
    if _enough_gpus(P):
        assert (r.backend, r.note) == ("nccl", "")
        assert r.device.startswith("cuda")
        assert r.cuda_peak_bytes is not None and len(r.cuda_peak_bytes) == P
        assert all(peak > saved > 0 for peak, saved in zip(r.cuda_peak_bytes,
                                                           r.peak_saved_bytes))
    else:
        assert (r.backend, r.device) == ("gloo", "cpu")
        assert r.cuda_peak_bytes is None
        ranks = "1 local rank:" if P == 1 else f"{P} local ranks:"
        assert "fell back to CPU with gloo" in r.note and ranks in r.note


def test_cpu_request_never_mentions_cuda():
    r = run_schedule("gpipe", P=2, M=2, steps=1, device="cpu", timeout=90)
    assert (r.backend, r.device, r.note) == ("gloo", "cpu", "")

