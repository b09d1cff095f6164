"""`enable_conditionals=True`: per-sample `if`/`elif`/`else`, `and`/`or`/`not`, merges, errors, the pipeline file."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ops_support import needs_dali

from headrace import Pipeline, fn, pipeline_def, types
from headrace.errors import PipelineFileError, SampleError, SchemaError

BATCH = 8
VALUES = [np.array(v, dtype=np.int32) for v in range(BATCH)]


def values_source():
    return list(VALUES)


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, enable_conditionals=True, seed=5)
def if_elif_else():
    x = fn.external_source(source=values_source, batch=True)
    if x > 5:
        y = x * 10
    elif x > 2 and not (x == 4):
        y = x + 100
    else:
        y = x - 1
    return y


def test_each_sample_takes_its_own_branch():
    (y,) = if_elif_else().run()
    expected = [v * 10 if v > 5 else v + 100 if (v > 2 and v != 4) else v - 1 for v in range(BATCH)]
    np.testing.assert_array_equal(y.as_array(), expected)


def test_same_results_with_one_thread_and_many():
    one = if_elif_else(num_threads=1).run()[0].as_array()
    many = if_elif_else(num_threads=3).run()[0].as_array()
    np.testing.assert_array_equal(one, many)


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, enable_conditionals=True)
def short_circuit():
    x = fn.external_source(source=values_source, batch=True)
    # integer division by zero fails in the kernel: it must never run for x == 0
    safe_and = (x != 0) and (12 // x > 2)
    safe_or = (x == 0) or (12 // x < 3)
    negated = not (x > 3)
    return safe_and, safe_or, negated


def test_and_or_short_circuit_per_sample_and_not():
    safe_and, safe_or, negated = short_circuit().run()
    values = np.arange(BATCH)
    np.testing.assert_array_equal(safe_and.as_array(), [v != 0 and 12 // v > 2 for v in values])
    np.testing.assert_array_equal(safe_or.as_array(), [v == 0 or 12 // v < 3 for v in values])
    np.testing.assert_array_equal(negated.as_array(), values <= 3)
    assert safe_and.as_array().dtype == np.bool_


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, enable_conditionals=True)
def branch_only_work():
    x = fn.external_source(source=values_source, batch=True)
    pair = fn.stack(x, x)
    if x % 2 == 0:
        # each branch fails on the other branch's samples: a 2-element reshape of a 2-element pair works,
        # a 3-element one would not, and 12 // x fails for x == 0
        out = fn.reshape(pair, shape=[2, 1])
    else:
        out = fn.reshape(fn.stack(x, x, 12 // x), shape=[3, 1])
    return out


def test_nodes_off_a_samples_branch_do_not_run():
    (out,) = branch_only_work().run()
    for v in range(BATCH):
        expected = [[v], [v]] if v % 2 == 0 else [[v], [v], [12 // v]]
        np.testing.assert_array_equal(out.at(v), np.array(expected, dtype=np.int32))


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, enable_conditionals=True)
def nested_and_partial():
    x = fn.external_source(source=values_source, batch=True)
    y = x  # assigned before: a branch that leaves it alone keeps this value
    if x >= 2:
        if x < 6:
            y = x * 2
        z = x + 1
    else:
        z = x - 1
    return y, z


def test_nested_ifs_and_variables_assigned_in_one_branch():
    y, z = nested_and_partial().run()
    values = np.arange(BATCH)
    np.testing.assert_array_equal(y.as_array(), np.where((values >= 2) & (values < 6), values * 2, values))
    np.testing.assert_array_equal(z.as_array(), np.where(values >= 2, values + 1, values - 1))


MAX_REPEATS = 5


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, enable_conditionals=True, seed=11)
def max_length_unrolling():
    image = fn.external_source(source=lambda: [np.full((2, 3), v, np.float32) for v in range(BATCH)], batch=True)
    repeats = fn.random.uniform(values=list(range(MAX_REPEATS + 1)), dtype=types.INT32)
    count = 0
    for i in range(MAX_REPEATS):  # the data-dependent loop `for _ in range(repeats)`, unrolled to its maximum
        if repeats > i:
            image = image * 2 + 1
            count = count + 1
    return image, repeats, count


def test_max_length_unrolling_runs_a_per_sample_number_of_steps():
    image, repeats, count = max_length_unrolling().run()
    reps = repeats.as_array()
    assert set(reps.tolist()) != {reps[0]}, "the seed should give different counts"
    np.testing.assert_array_equal(count.as_array(), reps)
    for v in range(BATCH):
        expected = float(v)
        for _ in range(reps[v]):
            expected = expected * 2 + 1
        np.testing.assert_array_equal(image.at(v), np.full((2, 3), expected, np.float32))


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, enable_conditionals=True, seed=13)
def random_in_branches():
    x = fn.external_source(source=values_source, batch=True)
    flip = fn.random.coin_flip(probability=0.5)
    if flip == 1:
        out = fn.cast(x, dtype=types.FLOAT) + fn.random.uniform(range=[0.0, 1.0])
    else:
        out = fn.cast(x, dtype=types.FLOAT) - fn.random.normal()
    return out, flip


def test_conditionals_round_trip_through_the_pipeline_file():
    pipe = random_in_branches()
    text = pipe.serialize()
    content = json.loads(text)
    ops = [n["op"] for n in content["nodes"]]
    assert "_conditional.split" in ops and "_conditional.merge" in ops
    assert any("guard" in n for n in content["nodes"])
    assert content["pipeline"]["enable_conditionals"] is True
    loaded = Pipeline.load(text, )
    reader = content["nodes"][0]["name"]
    original = random_in_branches()
    for _ in range(2):
        a = original.run()
        b = loaded.run(**{reader: values_source()})
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x.as_array(), y.as_array())
    assert loaded.serialize() == text
    out, flip = a
    values = np.arange(BATCH)
    frac = out.as_array() - values
    heads = flip.as_array() == 1
    assert np.all((frac[heads] >= 0) & (frac[heads] < 1))


def test_static_python_conditions_stay_python():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe(double: bool, scale: float = 3.0):
        x = fn.external_source(source=lambda: [np.ones(2, np.float32)] * 2, batch=True)
        if double and scale > 1:
            x = x * scale
        return x

    assert pipe(True).run()[0].as_array().tolist() == [[3.0, 3.0]] * 2
    assert pipe(False).run()[0].as_array().tolist() == [[1.0, 1.0]] * 2
    assert not any(n.schema.name.startswith("_conditional") for n in pipe(True).graph.nodes)


def test_closure_values_are_seen():
    offset = 40

    @pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=values_source, batch=True)
        y = x + offset if x > 3 else x
        return y

    np.testing.assert_array_equal(pipe().run()[0].as_array(), [v + 40 if v > 3 else v for v in range(BATCH)])


def test_variable_from_one_branch_used_after_the_if_is_a_clear_error():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=lambda: VALUES[:2], batch=True)
        if x > 0:
            only_here = x + 1
        return only_here

    with pytest.raises(SchemaError, match=r"'only_here' is assigned in only one branch of the `if` on data at line"):
        pipe()


def test_branch_value_escaping_without_merge_is_a_clear_error():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=lambda: VALUES[:2], batch=True)
        kept = []
        if x > 0:
            kept.append(x + 1)
        return x + kept[0]

    with pytest.raises(SchemaError, match=r"computed inside a branch of an `if` on data"):
        pipe()


def test_unsupported_constructs_are_clear_errors():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def with_while():
        x = fn.external_source(source=lambda: VALUES[:2], batch=True)
        while x < 3:
            x = x + 1
        return x

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def with_return():
        x = fn.external_source(source=lambda: VALUES[:2], batch=True)
        if x < 3:
            return x
        return x + 1

    with pytest.raises(SchemaError, match="max-length unrolling"):
        with_while()
    with pytest.raises(SchemaError, match=r"`return` inside an `if` on data \(line \d+\)"):
        with_return()


def test_if_on_data_without_conditionals_says_how_to_enable_them():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: VALUES[:2], batch=True)
        if x > 1:
            x = x + 1
        return x

    with pytest.raises(SchemaError, match="enable_conditionals=True"):
        pipe()


def test_non_scalar_condition_names_the_sample():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=lambda: [np.zeros(3, np.int32)] * 2, batch=True)
        if x > 0:
            x = x + 1
        return x

    with pytest.raises(SampleError, match=r"_conditional.predicate .*sample 0.*one boolean per sample"):
        pipe().run()


def test_a_file_whose_node_reads_into_a_branch_is_rejected():
    content = json.loads(nested_and_partial().serialize())
    inside = next(n for n in content["nodes"] if "guard" in n and n["op"] == "math.binary")
    content["nodes"].append({"name": "leak", "op": "math.unary", "device": "cpu", "inputs": [[inside["name"], 0]],
                             "args": {"op": "neg"}})
    content["outputs"].append(["leak", 0])
    with pytest.raises(PipelineFileError, match=r"node 'leak'.*inside a branch"):
        Pipeline.load(json.dumps(content))
    content = json.loads(nested_and_partial().serialize())
    content["outputs"] = [[inside["name"], 0]]
    with pytest.raises(PipelineFileError, match="inside a conditional branch"):
        Pipeline.load(json.dumps(content))


def test_dali_exec_dynamic_flags_are_accepted():
    for flag in ("exec_dynamic", "experimental_exec_dynamic"):
        @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True, **{flag: True})
        def pipe():
            x = fn.external_source(source=lambda: VALUES[:2], batch=True)
            return x + 1 if x > 0 else x

        assert pipe().run()[0].as_array().tolist() == [0, 2]


@pytest.mark.parametrize("_", [0], ids=["vs-dali"])
@needs_dali[0]
@needs_dali[1]
def test_same_branches_as_dali(_):
    from nvidia import dali

    def build(api):
        @api.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, enable_conditionals=True)
        def pipe():
            x = api.fn.external_source(source=values_source, batch=True)
            if x > 5:
                y = x * 10
            elif x > 2 and not (x == 4):
                y = x + 100
            else:
                y = x - 1
            return y

        return pipe()

    ours = build(__import__("headrace")).run()[0].as_array()
    theirs_pipe = build(dali)
    theirs_pipe.build()
    theirs = np.stack([np.array(t) for t in theirs_pipe.run()[0]])
    np.testing.assert_array_equal(ours, theirs)


def test_readme_unrolled_blur_matches_repeated_opencv_blur():
    import cv2

    max_steps = 4
    rng = np.random.default_rng(9)
    frames = [rng.uniform(0, 1, (12, 16, 3)).astype(np.float32) for _ in range(BATCH)]

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, enable_conditionals=True, seed=4)
    def repeated_blur():
        images = fn.external_source(name="images", layout="HWC")
        steps = fn.random.uniform(values=[0, 1, 2, 3, 4], dtype=types.INT32)
        for i in range(max_steps):
            if steps > i:
                images = fn.gaussian_blur(images, window_size=3)
        return images, steps

    images, steps = repeated_blur().run(images=frames)
    sigma = 0.3 * ((3 - 1) * 0.5 - 1) + 0.8
    for i, frame in enumerate(frames):
        expected = frame
        for _ in range(int(steps.at(i))):
            expected = cv2.GaussianBlur(expected, (3, 3), sigma, borderType=cv2.BORDER_REFLECT_101)
        np.testing.assert_allclose(images.at(i), expected, atol=1e-5)
    assert len(set(steps.as_array().tolist())) > 1


def test_per_sample_branches_property():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=15, deadline=None)
    @given(st.lists(st.integers(-50, 50), min_size=BATCH, max_size=BATCH), st.integers(-50, 50),
           st.integers(-50, 50))
    def check(values, low, high):
        samples = [np.array(v, np.int32) for v in values]

        @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, enable_conditionals=True)
        def pipe():
            x = fn.external_source(source=lambda: samples, batch=True)
            if x < low or x > high:
                y = x * 3
            elif not (x == low):
                y = -x
            else:
                y = x + 1000
            return y

        got = pipe().run()[0].as_array()
        v = np.array(values)
        expected = np.where((v < low) | (v > high), v * 3, np.where(v != low, -v, v + 1000))
        np.testing.assert_array_equal(got, expected)

    check()


def test_python_values_differing_per_branch_fail_only_when_used():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def unused():
        x = fn.external_source(source=lambda: VALUES[:2], batch=True)
        if x > 0:
            mode, y = "up", x + 1
        else:
            mode, y = "down", x - 1  # noqa: F841 - unused on purpose
        return y

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def used():
        x = fn.external_source(source=lambda: VALUES[:2], batch=True)
        if x > 0:
            mode = "up"
        else:
            mode = "down"
        return fn.cast(x, dtype=types.FLOAT) if mode.startswith("u") else x

    assert unused().run()[0].as_array().tolist() == [-1, 2]
    with pytest.raises(SchemaError, match=r"'mode' is 'up' in one branch and 'down' in the other"):
        used()


def test_static_ifs_may_return_break_and_continue():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe(early: bool):
        x = fn.external_source(source=lambda: VALUES[:2], batch=True)
        for step in range(10):
            if step == 1:
                continue
            if step > 2:
                break
            x = x + 1
        if early:
            return x * 100
        if x > 0:  # on data, after the plain ones
            for k in range(3):  # a loop of its own may break inside a branch on data
                if k == 1:
                    break
                x = x + 10
        return x

    assert pipe(True).run()[0].as_array().tolist() == [200, 300]
    assert pipe(False).run()[0].as_array().tolist() == [12, 13]


def _code_size(code) -> int:
    return len(code.co_code) + sum(_code_size(c) for c in code.co_consts if hasattr(c, "co_code"))


def test_rewritten_code_grows_linearly_with_elif_chains():
    from headrace.conditionals import convert

    def chain3(x):
        if x == 0:
            y = x + 100
        elif x == 1:
            y = x + 101
        elif x == 2:
            y = x + 102
        else:
            y = x
        return y

    def chain6(x):
        if x == 0:
            y = x + 100
        elif x == 1:
            y = x + 101
        elif x == 2:
            y = x + 102
        elif x == 3:
            y = x + 103
        elif x == 4:
            y = x + 104
        elif x == 5:
            y = x + 105
        else:
            y = x
        return y

    # each branch's code appears once in the rewrite: twice the branches, about twice the code (a copy per
    # nesting level would make it eight times)
    assert _code_size(convert(chain6).__code__) < 2.5 * _code_size(convert(chain3).__code__)
    for value in (0, 4, 9):
        assert convert(chain6)(value) == chain6(value)


def test_a_guard_must_be_a_split_output():
    content = json.loads(nested_and_partial().serialize())
    guarded = next(n for n in content["nodes"] if "guard" in n)
    guarded["guard"] = [content["nodes"][0]["name"], 0]  # the external source, not a split
    with pytest.raises(PipelineFileError, match=r"its guard must be an output of a _conditional.split node"):
        Pipeline.load(json.dumps(content))
    guarded["guard"] = ["nowhere", 0]
    with pytest.raises(PipelineFileError, match=r"reads from node 'nowhere', which does not exist"):
        Pipeline.load(json.dumps(content))
