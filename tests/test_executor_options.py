"""Executor options (headrace.ExecutorOptions): validated, taken per pipeline and from Triton model parameters, and
never part of the pipeline file, since they change how a pipeline runs, not what it computes."""

from __future__ import annotations

import numpy as np
import pytest

from headrace import ExecutorOptions, Pipeline, SchemaError, fn, pipeline_def, types
from headrace.serving.triton_backend import executor_options


def test_defaults_and_dict_form():
    assert ExecutorOptions.of(None) == ExecutorOptions()
    options = ExecutorOptions.of({"lookahead": "after", "plan_cache": False})
    assert options.lookahead == "after" and options.plan_cache is False and options.parallel_reads is False
    assert ExecutorOptions.of(options) is options


@pytest.mark.parametrize(("value", "message"), [
    ({"look_ahead": "off"}, "unknown option.*look_ahead"),
    ({"lookahead": "sometimes"}, "'lookahead'.*before"),
    ({"plan_process": "maybe"}, "'plan_process'.*auto"),
    ({"place_in_gpu_stage": "yes"}, "'place_in_gpu_stage': expected a bool"),
    ({"plan_cache": "no"}, "'plan_cache': expected a bool"),
    ({"switch_interval": -1.0}, "'switch_interval'"),
    ({"gpu_pool_limit": 1.5}, "'gpu_pool_limit'"),
    ({"coalesce_batches": -1}, "'coalesce_batches': expected an int >= 0"),
    ({"coalesce_batches": True}, "'coalesce_batches'"),
    ({"coalesce_batches": 2.0}, "'coalesce_batches'"),
    ("fast", "expected a dict"),
])
def test_bad_options_name_the_option(value, message):
    with pytest.raises(SchemaError, match=message):
        ExecutorOptions.of(value)


@pytest.mark.parametrize(("given", "batch_size", "runs"), [
    (0, 32, 8), (0, 64, 4), (0, 100, 2), (0, 256, 1), (0, 1024, 1), (0, 1, 8), (3, 32, 3), (1, 8, 1), (5, 512, 5)])
def test_coalesced_runs_by_default_reach_256_images_in_at_most_8_batches(given, batch_size, runs):
    assert ExecutorOptions(coalesce_batches=given).coalesced(batch_size) == runs


def test_triton_parameters_become_options():
    params = {"executor.lookahead": "off", "executor.plan_cache": "false", "executor.switch_interval": "0.0001",
              "executor.gpu_pool_limit": "1048576", "executor.coalesce_batches": "4", "num_threads": "2"}
    assert executor_options(params) == ExecutorOptions(lookahead="off", plan_cache=False, switch_interval=0.0001,
                                                       gpu_pool_limit=1 << 20, coalesce_batches=4)
    assert executor_options({}) == ExecutorOptions()
    with pytest.raises(SchemaError, match="'parallel_reads': expected true or false"):
        executor_options({"executor.parallel_reads": "maybe"})


@pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=3)
def _noisy():
    values = fn.random.uniform(range=[0.0, 1.0], shape=[3])
    return fn.cast(values * 10, dtype=types.INT32)


def test_options_are_not_in_the_file_and_change_no_output():
    plain = _noisy()
    tuned = _noisy(executor_options={"lookahead": "off", "parallel_reads": True})
    assert tuned.executor_options.lookahead == "off"
    assert plain.serialize() == tuned.serialize()
    loaded = Pipeline.load(tuned.serialize(), executor_options=ExecutorOptions(plan_cache=False))
    assert loaded.executor_options.plan_cache is False
    for _ in range(2):
        a, b, c = plain.run()[0], tuned.run()[0], loaded.run()[0]
        np.testing.assert_array_equal(a.as_array(), b.as_array())
        np.testing.assert_array_equal(a.as_array(), c.as_array())


@pytest.mark.parametrize(("value", "looks_ahead", "coalesced", "runs"), [
    ("auto", True, True, True), ("auto", True, False, False), ("auto", False, True, False), ("on", False, False, True),
    (True, False, False, True), ("off", True, True, False), (False, True, True, False)])
def test_the_plan_helper_runs_where_the_stage_looks_ahead_and_coalesces_unless_told(value, looks_ahead, coalesced,
                                                                                      runs):
    options = ExecutorOptions(plan_process=value)
    assert options.plan_process in ("auto", "on", "off")
    assert options.runs_plan_process(looks_ahead, coalesced) is runs
