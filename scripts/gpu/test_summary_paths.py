#!/usr/bin/env python3
"""Tests of summary_paths.py (verify.sh paths' summary) on made-up logs: the per-path table's
medians and ratios, a run whose status is not ok, and a folder with nothing in it. Standard
library only: `python3 scripts/gpu/test_summary_paths.py`."""
import json
import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summary_paths  # noqa: E402

HEAD = "model,batch,device,dtype,layout,total_ms_median,status\n"


def write_logs(folder, runs):
    """runs: [(step name, csv rows)]; a steps.tsv naming each as ok, after a usable GPU."""
    with open(os.path.join(folder, "steps.tsv"), "w") as f:
        f.write("gpu\tok\t0\tNVIDIA H200\n")
        for name, rows in runs:
            f.write(f"{name}\tok\t10\t\n")
            with open(os.path.join(folder, name + ".out"), "w") as out:
                out.write(HEAD + "".join(rows))


def row(ms, status="ok"):
    return f"resnet50,256,gpu,f16,nhwc,{ms},{status}\n"


class PathsSummary(unittest.TestCase):
    def test_goal_groups_gather_in_one_table_with_their_layout(self):
        def bf16(ms):
            return f"resnet50,256,gpu,bf16,nhwc,{ms},ok\n"

        with tempfile.TemporaryDirectory() as d:
            write_logs(d, [("p_all_goal-256-bf16-nhwc_1", [bf16(40)]),
                           ("p_pt_goal-256-bf16-nhwc_1", [bf16(50)]),
                           ("p_pt_goal-256-bf16-nhwc_2", [bf16(50)]),
                           ("p_all_goal-256-bf16-nhwc_2", [bf16(40)]),
                           ("p_fuse-bn-relu_r50_1", [row(45)])])
            text = "\n".join(summary_paths.paths(d))
        self.assertIn("issue 28's goal table", text)
        goal = [l for l in text.splitlines() if l.startswith("| resnet50 NHWC | 256 | bf16")]
        self.assertEqual(len(goal), 2, text)
        self.assertIn("| 40.00 | 6,400 | n/a | 1.25 |", goal[0])
        self.assertIn("| --fuse-bn=relu |", text)

    def test_medians_and_ratios_per_path(self):
        with tempfile.TemporaryDirectory() as d:
            write_logs(d, [("p_default_r50_1", [row(50)]), ("p_all_r50_1", [row(40)]),
                           ("p_pt_r50_1", [row(45)]), ("p_pt_r50_2", [row(45)]),
                           ("p_all_r50_2", [row(42)]), ("p_default_r50_2", [row(52)])])
            text = "\n".join(summary_paths.paths(d))
        lines = [l for l in text.splitlines() if l.startswith("| resnet50")]
        self.assertEqual(len(lines), 3, text)
        default, every, pt = lines
        self.assertIn("| (none) | 50.00, 52.00 | 51.00 |", default)
        # default ms / this ms = 51 / 41; PyTorch ms / this ms = 45 / 41.
        self.assertIn("| 41.00 | 6,244 | 1.24 | 1.10 |", every)
        self.assertIn("PyTorch eager", pt)
        self.assertIn("Paths verification on NVIDIA H200", text)

    def test_own_batch_norm_paths_have_rows_and_a_per_layer_column(self):
        def per_layer(ms):
            return json.dumps({"records": [{"total_ms": {"median": ms}, "layers": [
                {"kind": "bn", "forward_ms": ms / 4, "backward_ms": ms / 4},
                {"kind": "conv", "forward_ms": ms / 4, "backward_ms": ms / 4}]}]})

        with tempfile.TemporaryDirectory() as d:
            write_logs(d, [("p_all-own_r50_1", [row(30)]), ("p_own-bn-plain_r50_1", [row(48)])])
            with open(os.path.join(d, "steps.tsv"), "a") as f:
                for name, ms in [("per_layer_default", 52.0), ("per_layer_own", 32.0)]:
                    f.write(f"{name}\tok\t10\t\n")
                    with open(os.path.join(d, name + ".out"), "w") as out:
                        out.write(per_layer(ms))
            text = "\n".join(summary_paths.paths(d))
        self.assertIn("| --own-kernels --own-bn --fuse-bn --cuda-graph --api auto --rnn-algo auto | 30.00 |", text)
        self.assertIn("| --own-bn | 48.00 |", text)
        self.assertIn("| bn | 26.00 | - | 16.00 |", text)
        self.assertIn("with the own batch norm 32.00 ms", text)

    def test_bilstm_per_layer_runs_have_a_table(self):
        def per_layer(ms, kernels):
            return json.dumps({"records": [{"total_ms": {"median": ms}, "layers": [
                {"name": "bidirectional_1", "kind": "recurrent", "forward_ms": ms / 3,
                 "backward_ms": ms / 3, "kernels": kernels}]}]})

        with tempfile.TemporaryDirectory() as d:
            write_logs(d, [("p_default_r50_1", [row(50)])])
            with open(os.path.join(d, "steps.tsv"), "a") as f:
                for name, ms, k in [("per_layer_bilstm", 3.0, "cudnn RNN v8 standard"),
                                    ("per_layer_bilstm_auto", 1.5, "cudnn RNN v8 persist-static-small-h [auto of ...]")]:
                    f.write(f"{name}\tok\t10\t\n")
                    with open(os.path.join(d, name + ".out"), "w") as out:
                        out.write(per_layer(ms, k))
            text = "\n".join(summary_paths.paths(d))
        self.assertIn("| standard | 3.0000 | bidirectional_1 | 1.000 | 1.000 | cudnn RNN v8 standard |", text)
        self.assertIn("| --rnn-algo auto | 1.5000 | bidirectional_1 | 0.500 | 0.500 | cudnn RNN v8 "
                      "persist-static-small-h [auto of ...] |", text)

    def test_norm_conv_layers_have_a_table_beside_the_plain_forward(self):
        def doc(recs):
            return json.dumps({"records": recs})

        def rec(problem, algo, ms, check=None, direction="fwd"):
            return {"problem": problem, "dir": direction, "algo": algo, "ms": {"median": ms}, "check": check}

        with tempfile.TemporaryDirectory() as d:
            write_logs(d, [])
            os.makedirs(os.path.join(d, "check"))
            for name, recs in [
                ("normconv_f16.json", [rec("mb256ic64ih56oc64oh56kh3ph1", "norm-conv:eng9", 1.2),
                                       rec("mb256ic64ih56oc64oh56kh3ph1", "norm-conv:eng3", 0.9,
                                           direction="bwd-data")]),
                ("conv_graph_normconv_f16.json",
                 [rec("mb256ic64ih56oc64oh56kh3ph1", "graph:eng34", 1.0),
                  rec("mb256ic64ih56oc64oh56kh3ph1", "graph:eng1", 1.5, direction="bwd-data")]),
                ("check/normconv_check.json",
                 [rec("mb2ic64ih56oc64oh56kh3ph1", "norm-conv:eng9", 0.01, {"rel_err": 3e-4, "passed": True})]),
            ]:
                with open(os.path.join(d, name), "w") as f:
                    f.write(doc(recs))
            text = "\n".join(summary_paths.normconv_section(d))
            self.assertIn("| ic64ih56oc64oh56kh3ph1 | fwd | 1.0000 | graph:eng34 | 1.2000 | norm-conv:eng9 | "
                          "1.20 | ok (3.00e-04, norm-conv:eng9) | - |", text)
            self.assertIn("| ic64ih56oc64oh56kh3ph1 | bwd-data | 1.5000 | graph:eng1 | 0.9000 | norm-conv:eng3 | "
                          "0.60 | - | - |", text)
            self.assertEqual(summary_paths.normconv_section(os.path.join(d, "nowhere")), [])
            # A check whose output was never written (rel_err null), and a
            # layer runtime fusion refused, still make a table.
            with open(os.path.join(d, "check", "normconv_check.json"), "w") as f:
                f.write(doc([rec("mb2ic64ih56oc64oh56kh3ph1", "norm-conv:eng9", 0.01,
                                 {"rel_err": None, "passed": False})]))
            with open(os.path.join(d, "normconv_f16.json"), "w") as f:
                f.write(json.dumps({"records": [], "skipped": [
                    {"problem": "mb256ic64ih56oc64oh56kh3ph1", "dir": "fwd", "status": "not supported"}]}))
            # A bf16 graph no engine ran names cuDNN's answers in its column.
            with open(os.path.join(d, "check", "normconv_check_bf16.json"), "w") as f:
                f.write(json.dumps({"records": [], "skipped": [
                    {"problem": "mb2ic64ih56oc64oh56kh3ph1", "dir": "fwd", "status": "no engine (heuristics A 0)"}]}))
            text = "\n".join(summary_paths.normconv_section(d))
            self.assertIn("| skipped: not supported | - | FAILED (NaN, norm-conv:eng9) | "
                          "skipped: no engine (heuristics A 0) |", text)

    def test_a_run_that_is_not_ok_has_no_time(self):
        with tempfile.TemporaryDirectory() as d:
            write_logs(d, [("p_default_r50_1", [row(50)]), ("p_fuse-bn_r50_1", [row("", "OOM")])])
            runs = summary_paths.path_runs(d)
        self.assertEqual(runs[("r50", "resnet50", 256, "f16")]["fuse-bn"], {1: None})

    def test_every_path_word_of_verify_sh_has_its_flags_here(self):
        # A path word verify.sh times but this table does not know would
        # be left out of the summary without a word.
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "verify.sh")) as f:
            text = f.read()
        body = text[text.index("path_flags() {"):]
        body = body[:body.index("\n}\n")]
        words = re.findall(r"^\s+([a-z0-9-]+)\) echo (.+?) ;;$", body, re.M)
        self.assertGreater(len(words), 10)
        for word, flags in words:
            if word.startswith("per-layer-"):
                continue
            self.assertIn(word, summary_paths.PATH_FLAGS, word)
            self.assertEqual(summary_paths.PATH_FLAGS[word], flags, word)

    def test_a_skipped_goal_group_is_named_in_the_rerun_command(self):
        with tempfile.TemporaryDirectory() as d:
            write_logs(d, [("p_default_r50_1", [row(50)])])
            with open(os.path.join(d, "steps.tsv"), "a") as f:
                f.write("goal_256_f16_nchw\tskipped: time budget (63 s left, about 70 s needed)\t0\t"
                        "rerun: goal 256:f16:nchw\n")
                f.write("keras_paths\tskipped: time budget (5 s left)\t0\trerun: keras\n")
            text = "\n".join(summary_paths.paths(d))
        self.assertIn('skipped goal (256:f16:nchw), keras: `PATHS_STEPS="goal keras" '
                      'GOAL_GROUPS="256:f16:nchw"', text)

    def test_empty_logs_say_no_gpu(self):
        with tempfile.TemporaryDirectory() as d:
            text = "\n".join(summary_paths.paths(d))
        self.assertIn("No usable GPU here", text)
        self.assertNotIn("| resnet50", text)


if __name__ == "__main__":
    unittest.main()
