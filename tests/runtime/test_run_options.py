"""What ``run_schedule`` hands to torchrun: the caller's config as given, keywords only on
top of it, launch settings apart. No process is started: ``_launch`` is replaced by a spy."""
import pytest

from pplab.runtime import launcher
from pplab.runtime.launcher import Launch, RunConfig, run_schedule


class _Launched(Exception):
    pass


@pytest.fixture
def launched(monkeypatch):
    """The (config, launch keywords) run_schedule would start torchrun with."""
    seen = {}

    def spy(P, runs, **kw):
        seen["config"], seen["kw"] = runs[0].config, kw
        raise _Launched
    monkeypatch.setattr(launcher, "_launch", spy)

    def call(*args, **kw):
        with pytest.raises(_Launched):
            run_schedule(*args, **kw)
        return seen["config"], seen["kw"]
    return call


def test_an_explicit_config_is_run_as_given(launched):
    cfg = RunConfig(steps=10, recompute="full", device="cpu", emulate={"tf": 0.01, "tb": 0.02})
    got, _ = launched("1f1b", cfg, P=2, M=2)
    assert got == cfg                        # steps=10 stays 10, not the default 2


def test_keywords_change_only_what_they_name(launched):
    got, _ = launched("1f1b", RunConfig(steps=10, seed=3), P=2, M=2, lr=0.5)
    assert (got.steps, got.seed, got.lr) == (10, 3, 0.5)
    got, _ = launched("1f1b", P=2, M=2, steps=1, optimizer="adam")   # the lessons' form
    assert (got.steps, got.optimizer, got.lr) == (1, "adam", RunConfig().lr)


def test_launch_settings_go_to_the_launch_not_the_config(launched):
    _, kw = launched("1f1b", P=2, M=2, timeout=30, comm_timeout=4)
    assert (kw["timeout"], kw["comm_timeout"]) == (30, 4)
    _, kw = launched("1f1b", None, Launch(timeout=30), P=2, M=2)
    assert (kw["timeout"], kw["comm_timeout"]) == (30, 10)       # timeout / 3, within 5..60


def test_config_is_typed_and_keyword_only():
    with pytest.raises(TypeError):
        RunConfig(10)                                  # noqa: the point of the test
    with pytest.raises(Exception):
        RunConfig().steps = 3                          # frozen: built once, never written


def test_an_unknown_option_is_one_clear_line():
    with pytest.raises(ValueError, match="stepz.*steps"):
        run_schedule("1f1b", P=2, M=2, stepz=3)
