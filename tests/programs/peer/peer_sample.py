"""A tiny test file for the peer harness's own test: one test of each kind the harness must tell apart.

Not collected by the project's test run (its name does not start with test_); the harness runs it
explicitly, under python and under tensorscope.
"""

import ctypes
import os
import unittest

import torch


class Sample(unittest.TestCase):
    def test_a_passes(self):
        x = torch.ones(3, requires_grad=True)
        (x * x).sum().backward()
        self.assertEqual(x.grad.tolist(), [2.0, 2.0, 2.0])

    def test_b_prints(self):
        t = torch.arange(4.0).view(2, 2)
        print("view shares storage:", t.t().untyped_storage().data_ptr() == t.untyped_storage().data_ptr())

    @unittest.skip("skipped on purpose")
    def test_c_skipped(self):
        pass

    def test_d_segfaults(self):
        # Reads address 0: the whole process dies with SIGSEGV, under python as under tensorscope.
        if os.environ.get("PEER_SAMPLE_CRASH", "1") == "1":
            ctypes.string_at(0)

    def test_e_fails(self):
        self.assertEqual(torch.tensor([1.0, 2.0]).sum().item(), 4.0)

    def test_f_after_crash(self):
        self.assertTrue(torch.zeros(2).eq(0).all())

    def test_g_sees_the_tool(self):
        # Differs on purpose: a program can see which modules are loaded.
        import sys

        print("tensorscope loaded:", "tensorscope" in sys.modules)
