#!/usr/bin/env python3
"""Tests of torch_profile's aggregation and of pytorch_model.py's --profile
options; no torch needed: python3 scripts/peers/test_torch_profile.py"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_profile as tp  # noqa: E402

BWD = tp.BACKWARD + ": "


def ev(name, parents=(), us=0.0, seq=-1):
    return tp.Event(name, tuple(parents), us, seq)


def one_conv_step():
    """conv1 -> bn1 -> relu forward, their backward, a gradient
    accumulation, over 2 profiled steps (times summed over both)."""
    conv = ("layer:conv1", -1)
    bn = ("layer:bn1", -1)
    relu = ("layer:relu", -1)
    return [
        ev("layer:conv1"),
        ev("aten::convolution", [conv], 0.0, 7),
        ev("aten::cudnn_convolution", [("aten::convolution", 7), conv], 2000.0),
        ev("aten::cudnn_batch_norm", [bn], 1000.0, 8),
        ev("aten::relu_", [relu], 400.0, 9),
        ev("aten::threshold_backward", [("ReluBackward0", 9), (BWD + "ReluBackward0", -1)], 600.0),
        ev("aten::cudnn_batch_norm_backward", [("CudnnBatchNormBackward0", 8),
                                               (BWD + "CudnnBatchNormBackward0", -1)], 1600.0),
        ev("aten::convolution_backward", [("ConvolutionBackward0", 7),
                                          (BWD + "ConvolutionBackward0", -1)], 4000.0),
        ev("aten::add_", [(BWD + "torch::autograd::AccumulateGrad", -1)], 200.0),
        ev("aten::_foreach_add_", [("Optimizer.step#SGD.step", -1)], 100.0),
    ]


class Aggregation(unittest.TestCase):
    def test_kinds_directions_and_layers(self):
        kinds, ops, layers, order, (charged, total) = tp.aggregate(one_conv_step(), steps=2)
        self.assertEqual(kinds["conv"], [1.0, 2.0, 0.0])
        self.assertEqual(kinds["bn"], [0.5, 0.8, 0.0])
        self.assertEqual(kinds["relu"], [0.2, 0.3, 0.0])
        self.assertEqual(kinds["grad-sum"], [0.0, 0.1, 0.0])
        self.assertEqual(kinds["other"], [0.0, 0.0, 0.05])
        self.assertEqual(order, ["conv1", "bn1", "relu"])
        self.assertEqual(layers["conv1"], [1.0, 2.0, 0.0])
        self.assertEqual(layers["bn1"], [0.5, 0.8, 0.0])
        self.assertEqual(layers["relu"], [0.2, 0.3, 0.0])
        self.assertAlmostEqual(total, 4.95)
        self.assertAlmostEqual(charged, 4.8)  # not the accumulation, not the update
        self.assertEqual(ops["aten::convolution_backward"], [0.0, 2.0, 0.0])

    def test_a_backward_op_without_a_known_node_has_no_layer(self):
        events = [ev("aten::mul", [("MulBackward0", 99), (BWD + "MulBackward0", -1)], 1000.0)]
        kinds, _, layers, _, (charged, total) = tp.aggregate(events, steps=1)
        self.assertEqual((charged, total), (0.0, 1.0))
        self.assertEqual(dict(layers), {})
        self.assertEqual(kinds["other"], [0.0, 1.0, 0.0])

    def test_kind_names(self):
        for names, kind in [
            (["aten::max_pool2d_with_indices_backward"], "maxpool"),
            (["MaxPool2DWithIndicesBackward0"], "maxpool"),
            (["aten::addmm"], "fc"),
            (["aten::add"], "add"),
            (["AddBackward0"], "add"),
            (["aten::clamp_min"], "relu"),
            (["aten::_to_copy"], "cast"),
            (["aten::nll_loss_forward"], "loss"),
            (["layer:layer1.0.conv1", "aten::whatever"], "other"),
        ]:
            self.assertEqual(tp.kind_of(names), kind, names)

    def test_rendering(self):
        kinds, ops, layers, order, ct = tp.aggregate(one_conv_step(), steps=2)
        text = tp.render("resnet50", "CUDA time", 2, kinds, ops, layers, order, ct)
        self.assertIn("# resnet50: torch.profiler CUDA time per step", text)
        self.assertIn("4.950 ms, 4.800 ms of it charged to a layer", text)
        lines = text.splitlines()
        conv = next(line for line in lines if line.startswith("conv "))
        self.assertEqual(conv.split(), ["conv", "1.000", "2.000", "0.000", "60.6"])
        layer = next(line for line in lines if line.startswith("conv1 "))
        self.assertEqual(layer.split(), ["conv1", "1.000", "2.000", "60.6"])
        rows = [line.split()[0] for line in lines[lines.index("## per layer (forward order; "
                                                               "torchvision's module names)") + 3:]]
        self.assertEqual(rows, ["conv1", "bn1", "relu"])


class Options(unittest.TestCase):
    def setUp(self):
        import pytorch_model
        self.pm = pytorch_model

    def test_profile_options_parse(self):
        a = self.pm.parse_args(["resnet50", "--profile"])
        self.assertTrue(a.profile)
        self.assertEqual(a.profile_steps, 5)
        a = self.pm.parse_args(["resnet50", "--profile", "--profile-steps", "3"])
        self.assertEqual(a.profile_steps, 3)
        a = self.pm.parse_args(["resnet50"])
        self.assertFalse(a.profile)

    def test_bad_profile_steps_exit_2(self):
        for argv in (["resnet50", "--profile", "--profile-steps", "0"],
                     ["resnet50", "--profile-steps", "3"],
                     ["--check-fallback", "--profile"]):
            with self.assertRaises(SystemExit) as e:
                self.pm.parse_args(argv)
            self.assertEqual(e.exception.code, 2, argv)


if __name__ == "__main__":
    unittest.main()
