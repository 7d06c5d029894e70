"""Llama 3 405B's 8K layouts fit the 80 GB H100 they ran on once pplab counts what the paper
says was kept ("The Llama 3 Herd of Models" §3.3.2): fp32 gradients sharded by FSDP, and only
the tensors a Llama layer's backward needs. Each of the two corrections is needed."""
import pytest

from pplab.cli import main
from pplab.memory import ParallelConfig, get_preset, layer_activation_bytes, memory_report
from pplab.memory import published_run as pr
from pplab.memory.activations import kept_layer_bytes
from pplab.memory.published_runs import LLAMA3_AS_RUN, llama3_layout

H100 = 80e9
LLAMA = get_preset("llama3-405b")


def peak(model, cfg):
    return memory_report(model, cfg).peak_bytes


def test_kept_layer_counts_the_llama_layer_not_korthikantis():
    s, h, t = 8192, LLAMA.hidden, 8
    sbh_t = s * h / t
    kv = LLAMA.kv * LLAMA.head_dim                       # 1,024: 8 KV heads of 128
    # 4h (two norm outputs, Q, O) + 2·kv (K, V) + 3f (gate, up, product), in 2-byte values
    per = kept_layer_bytes(s, 1, h, LLAMA.heads, kv, LLAMA.ffn, t, sp=True,
                           recompute="selective")
    assert per / sbh_t == pytest.approx(2 * (4 + 2 / 16 + 3 * 3.25)) == 27.75
    assert layer_activation_bytes(s, 1, h, LLAMA.heads, t, True, "selective") / sbh_t == 34
    # without SP the norm outputs (the column-parallel inputs) are whole on every TP rank
    no_sp = kept_layer_bytes(s, 1, h, LLAMA.heads, kv, LLAMA.ffn, t, recompute="selective")
    assert no_sp - per == pytest.approx(2 * 2 * s * h * (1 - 1 / t))
    # the softmax output when nothing is recomputed; only the input under full recomputation
    none = kept_layer_bytes(s, 1, h, LLAMA.heads, kv, LLAMA.ffn, t, True, "none")
    assert none - per == pytest.approx(2 * LLAMA.heads * s * s / t)
    assert kept_layer_bytes(s, 1, h, LLAMA.heads, kv, LLAMA.ffn, t, True, "full") == 2 * s * h


@pytest.mark.parametrize("row", pr.TABLE4, ids=lambda r: r.label)
def test_every_table4_row_fits_as_it_ran(row):
    model, cfg = llama3_layout(row)
    assert (cfg.zero, cfg.bytes_grad, cfg.zero2_reduce, cfg.activations) == \
        (2, 4, "per_microbatch", "kept")
    assert 60e9 < peak(model, cfg) < H100


def test_each_correction_alone_leaves_the_8k_row_over():
    row = pr.TABLE4[0]
    bare = peak(*pr.layout(row))
    sharded = peak(*pr.layout(row, zero2_reduce="per_microbatch"))
    kept = peak(*pr.layout(row, activations="kept"))
    both = peak(*llama3_layout(row))
    assert bare > sharded > H100 and bare > kept > H100 and both < H100
    assert 99e9 < bare < 101e9 and 73e9 < both < 76e9


def test_kept_is_for_llama_layers_only():
    gpt = get_preset("gpt3-175b")
    with pytest.raises(ValueError, match="Llama-style") as e:
        ParallelConfig(8, 8, 1, activations="kept").validate(gpt)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="activations must be one of"):
        ParallelConfig(activations="exact").validate(LLAMA)


LAYOUT = ["--model", "llama3-405b", "--tp", "8", "--pp", "16", "--dp", "64", "--zero", "2",
          "-s", "interleaved", "-V", "8", "-M", "32", "--first-layers", "0",
          "--last-layers", "0", "--sp", "--recompute", "selective"]


def test_pplab_memory_says_the_published_layout_fits_counted_as_kept(capsys):
    assert main(["memory", *LAYOUT, "--activations", "kept"]) == 0
    out = capsys.readouterr().out
    assert "peak 73.5 GB on rank 1 of the 80 GB GPU: fits" in out
    assert main(["memory", *LAYOUT]) == 0
    assert "does not fit" in capsys.readouterr().out


def test_pplab_memory_refuses_kept_for_a_gpt_model_in_one_line(capsys):
    assert main(["memory", "--model", "gpt3-175b", "--tp", "8", "--pp", "8",
                 "--activations", "kept"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Llama-style" in err and "\n" not in err and "Traceback" not in err
