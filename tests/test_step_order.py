"""engine.step_order: which GPU steps run before the decoders started ahead, and that the order stays topological."""

from __future__ import annotations

from types import SimpleNamespace

from headrace.engine.step_order import beside_decoders_first


def _step(name: str, reads: tuple[str, ...] = (), decoder: bool = False, guard=None, args: tuple[str, ...] = ()):
    node = SimpleNamespace(name=name, guard=guard)
    return ("gpu", SimpleNamespace(node=node, inputs=[(r, 0) for r in reads], arg_refs=[(a, 0) for a in args],
                                   launches_ahead=decoder))


def _names(steps) -> list[str]:
    return [step.node.name for _, step in steps]


def test_steps_that_read_no_decoder_move_before_it_in_order():
    steps = [_step("decode", ("jpegs",), decoder=True), _step("flip", ("decode",), args=("coin",)),
             _step("boxes_gpu", ("boxes",)), _step("bb_flip", ("boxes_gpu",), args=("coin",)),
             _step("resize", ("flip",)), _step("labels_gpu", ("labels",)), _step("encoder", ("bb_flip", "labels_gpu"))]
    assert _names(beside_decoders_first(steps)) == ["boxes_gpu", "bb_flip", "labels_gpu", "encoder", "decode", "flip",
                                                     "resize"]


def test_a_step_reading_a_decoder_through_an_argument_input_waits_for_it():
    steps = [_step("decode", ("jpegs",), decoder=True), _step("mean", ("decode",)),
             _step("scale", ("other",), args=("mean",)), _step("alone", ("other",))]
    assert _names(beside_decoders_first(steps)) == ["alone", "decode", "mean", "scale"]


def test_every_step_after_two_decoders_keeps_its_place_relative_to_both():
    steps = [_step("first", ("a",), decoder=True), _step("second", ("b",), decoder=True), _step("mix", ("first",)),
             _step("labels", ("c",))]
    assert _names(beside_decoders_first(steps)) == ["labels", "first", "second", "mix"]


def test_branches_and_cpu_steps_keep_the_graph_order():
    guarded = [_step("decode", ("jpegs",), decoder=True), _step("boxes", ("b",), guard=("pred", 0))]
    assert _names(beside_decoders_first(guarded)) == ["decode", "boxes"]
    with_cpu = [_step("decode", ("jpegs",), decoder=True), ("samples", SimpleNamespace(node=SimpleNamespace(
        name="host_op", guard=None))), _step("boxes", ("b",))]
    assert _names(beside_decoders_first(with_cpu)) == ["decode", "host_op", "boxes"]
