#!/usr/bin/env python3
"""Tests of goal_table.py's arithmetic on made-up results; no PyTorch and no
cnnbench run: python3 scripts/peers/test_goal_table.py"""

import csv
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import goal_table as gt  # noqa: E402

CONV_FIELDS = ["problem", "dir", "algo", "ms_median", "gflops", "peak_fraction"]
STEP_FIELDS = ["model", "batch", "fwd_ms_median", "bwd_ms_median", "total_ms_median", "status"]


def write(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def conv_row(problem, d, ms, gflops, peak_fraction=""):
    return {"problem": problem, "dir": d, "algo": "direct", "ms_median": ms, "gflops": gflops,
            "peak_fraction": peak_fraction}


class GoalTable(unittest.TestCase):
    def conv_dir(self, tmp, dirs=gt.DIRS):
        """Two layers in each of `dirs`: a 3x3 at 70% of a 200 GFLOP/s peak
        and 0.85x, a 1x1 at 1.5x; the peak is the best of cnnbench's rounds."""
        a, b = 'mb1ic8ih8oc8oh8kh3ph1n"x:3x3"', 'mb1ic8ih8oc8oh8kh1n"x:1x1"'
        ours, peer = [], []
        for d in dirs:
            ours += [conv_row(a, d, "1.0", "140", "0.7"), conv_row(b, d, "2.0", "100", "0.5")]
            peer += [conv_row(a, d, "0.85", "165"), conv_row(b, d, "3.0", "67")]
        write(os.path.join(tmp, "cnnbench_all.csv"), CONV_FIELDS,
              ours + [conv_row(a, dirs[0], "1.0", "140", "0.75")])
        write(os.path.join(tmp, "cnnbench.csv"), CONV_FIELDS, ours)
        write(os.path.join(tmp, "pytorch.csv"), CONV_FIELDS, peer)
        return gt.conv_results(tmp)

    def conv_goals(self, dirs=gt.DIRS):
        with tempfile.TemporaryDirectory() as tmp:
            conv = self.conv_dir(tmp, dirs)
        self.assertAlmostEqual(conv["peak_gflops"], 200.0)
        return {g["goal"].split(",")[0].split(" at ")[0]: g for g in gt.goals(conv=conv)}

    def test_a_capped_isa_is_judged_against_its_own_peak(self):
        m = {"peak": [{"isa": "avx512", "gflops_all_threads": 400.0},
                      {"isa": "avx2", "gflops_all_threads": 200.0}, {"isa": "scalar", "gflops_all_threads": 25.0}]}
        self.assertAlmostEqual(gt.isa_peak_scale(m, "avx2"), 0.5)
        self.assertAlmostEqual(gt.isa_peak_scale({"peak": None}, "avx2"), 1.0)
        with tempfile.TemporaryDirectory() as tmp:
            self.conv_dir(tmp)
            conv = gt.conv_results(tmp, 0.5)
        self.assertAlmostEqual(conv["peak_gflops"], 100.0)
        # The 3x3's 140 GFLOP/s is 140% of half the 200 GFLOP/s peak.
        self.assertTrue(all(r["pct"] > 100 for r in conv["rows"] if r["is_3x3"]))

    def test_conv_goals_name_each_miss(self):
        table = self.conv_goals()
        median = table["convolutions"]
        self.assertTrue(median["met"])  # the median of 0.85 and 1.5, 1.175, is over 1.10
        self.assertEqual(median["measured"], "fwd 1.18, bwd-data 1.18, bwd-filter 1.18")
        floor = table["no layer under 0.9x"]
        self.assertFalse(floor["met"])
        self.assertEqual(floor["misses"], [f"x:3x3 {d}: 0.85x (direct)" for d in gt.DIRS])
        pct = table["3x3 layers"]
        self.assertFalse(pct["met"])
        self.assertEqual(pct["misses"][0], "x:3x3 fwd: 70.0% (direct)")

    def test_a_direction_neither_tool_measured_is_a_miss(self):
        table = self.conv_goals(dirs=("fwd",))
        for g in table.values():
            self.assertFalse(g["met"])
            self.assertIn("bwd-filter: no layer measured by both", g["misses"])

    @staticmethod
    def steps(**peer):
        """step_results of cnnbench's 600 + 1200 ms ResNet-50 step beside
        PyTorch's row with `peer`'s changes."""
        with tempfile.TemporaryDirectory() as tmp:
            row = {"model": "resnet50", "batch": "16", "fwd_ms_median": "600", "bwd_ms_median": "1200",
                   "total_ms_median": "1800", "status": "ok"}
            write(os.path.join(tmp, "cnnbench.csv"), STEP_FIELDS, [row])
            write(os.path.join(tmp, "pytorch.csv"), STEP_FIELDS, [{**row, **peer}])
            return gt.step_results(tmp)

    def test_steps_and_rnn(self):
        steps = self.steps(fwd_ms_median="750", bwd_ms_median="1500", total_ms_median="2250")
        rnn = {"small": [{"problem": "a", "ratio": {"fwd": 1.2, "bwd": 0.97}},
                         {"problem": "b", "ratio": {"fwd": 1.5, "bwd": 1.1}}],
               "deep": [{"problem": "c", "ratio": {"fwd": 1.0, "bwd": 1.0}}]}
        step, small, deep = gt.goals(steps=steps, rnn=rnn)
        self.assertTrue(step["met"])  # 2250 / 1800 = 1.25
        self.assertIn("1.25x: cnnbench 1800 ms (forward 600, backward 1200)", step["measured"])
        self.assertFalse(small["met"])
        self.assertEqual(small["misses"], ["a bwd: 0.97x"])
        self.assertIn("1 of 4 passes behind", small["measured"])
        self.assertTrue(deep["met"])  # 1.0 is at the bar
        self.assertIn("(1 problem)", deep["goal"])

    def test_a_step_either_tool_did_not_run_is_a_miss(self):
        steps = self.steps(fwd_ms_median="", bwd_ms_median="", total_ms_median="", status="OOM")
        (step,) = gt.goals(steps=steps)
        self.assertFalse(step["met"])
        self.assertEqual(step["measured"], "not measured (cnnbench: ok, PyTorch: OOM)")
        slow = gt.goals(steps=[{"model": "m", "batch": 2, "ms": 2.0, "peer_ms": 2.2, "ratio": 1.1,
                                "fwd_ms": 1, "bwd_ms": 1, "peer_fwd_ms": 1, "peer_bwd_ms": 1.2}])
        self.assertEqual(slow[0]["misses"], ["1.10x"])

    def test_render_marks_misses(self):
        m = {"cpu": "CPU", "family": "25", "model": "17", "isa": "avx512", "threads": 2,
             "peak": [{"isa": "avx512", "gflops_all_threads": 230.0}], "bandwidth_gbs": 25.0,
             "cnnbench": "cnnbench 0.1.0"}
        table = [{"goal": "g1", "measured": "m1", "met": True, "misses": []},
                 {"goal": "g2", "measured": "m2", "met": False, "misses": ["x: 0.5x"]}]
        md = gt.render(m, "python3 scripts/peers/goal_table.py --out D", table)
        self.assertIn("| g1 | m1 | yes |", md)
        self.assertIn("| g2 | m2 | **no** |", md)
        self.assertIn("- g2: x: 0.5x", md)
        self.assertIn("FMA peak 230 GFLOP/s", md)


if __name__ == "__main__":
    unittest.main()
