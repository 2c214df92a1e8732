#!/usr/bin/env python3
"""The extension's per-op tensor table against runtime/include/dsv4_abi.h, read as text.

    PYTHONPATH=build/python python3 tests/python/test_abi.py [path/to/dsv4_abi.h] [unittest args]

python/ext/ops.c keys each op's tensors by their DSV4_ARGS_<OP> positions and
fails to compile where its table and those X-macros disagree; this reads the
header's text instead of going through the preprocessor, and checks what
dsv4c._dsv4c._op_table() reports: the ops are DSV4_OPS' (and dsv4c.OPS), each
tensor is the buffer argument at its position with that name, the op writes it
exactly where its kind is PTR, the tensors and the runtime's own buffers are
all of the op's buffers, once each, and the op methods take the tensors by
those names in that order.  No device and no NumPy needed.
"""

import inspect
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ABI_H = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else os.path.join(
    HERE, "..", "..", "runtime", "include", "dsv4_abi.h")

import dsv4c  # noqa: E402
from dsv4c import _dsv4c  # noqa: E402


def read_abi(path):
    """{spec name: [(argument, kind), ...]} in DSV4_OPS' order, from the header's text."""
    text = open(path).read()
    m = re.search(r"#define DSV4_OPS\(X\)((?:.*\\\n)*.*\n)", text)
    ops = re.findall(r"X\((\w+),\s*\"(\w+)\"", m.group(1))
    out = {}
    for enum, spec in ops:
        m = re.search(r"#define DSV4_ARGS_%s\(A\)((?:.*\\\n)*.*\n)" % enum, text)
        if not m:
            raise AssertionError("dsv4_abi.h has no DSV4_ARGS_%s" % enum)
        out[spec] = re.findall(r"A\((\w+),\s*(\w+)\)", m.group(1))
    return out


ABI = read_abi(ABI_H)
TABLE = _dsv4c._op_table()
BUFFER_KINDS = ("PTR", "IN")


class OpTable(unittest.TestCase):
    def test_ops(self):
        self.assertEqual(sorted(TABLE), sorted(ABI), "the extension's ops are DSV4_OPS'")
        self.assertEqual(tuple(dsv4c.OPS), tuple(ABI), "dsv4c.OPS is DSV4_OPS, in its order")

    def test_tensors_are_buffer_arguments(self):
        for op, args in ABI.items():
            for name, pos, written, _ in TABLE[op]["tensors"]:
                with self.subTest(op=op, tensor=name):
                    self.assertLess(pos, len(args))
                    self.assertEqual(args[pos][0], name, "position %d of DSV4_ARGS of %s" % (pos, op))
                    self.assertIn(args[pos][1], BUFFER_KINDS)
                    self.assertEqual(written, args[pos][1] == "PTR", "written exactly where the kind is PTR")
            for name, pos in TABLE[op]["runtime"]:
                with self.subTest(op=op, runtime=name):
                    self.assertEqual(args[pos][0], name)
                    self.assertIn(args[pos][1], BUFFER_KINDS)

    def test_every_buffer_once(self):
        for op, args in ABI.items():
            with self.subTest(op=op):
                taken = [pos for _, pos, _, _ in TABLE[op]["tensors"]] + [pos for _, pos in TABLE[op]["runtime"]]
                self.assertEqual(len(taken), len(set(taken)), "no buffer twice")
                buffers = {i for i, (_, kind) in enumerate(args) if kind in BUFFER_KINDS}
                self.assertEqual(set(taken), buffers, "every buffer of DSV4_ARGS of %s" % op)

    def test_methods_take_them_in_order(self):
        """Bundle.<op>'s signature (its docstring) names the tensors in the table's order, the ones that
        may be None with a None default; the dsv4c wrapper takes each by the same name."""
        for op in ABI:
            with self.subTest(op=op):
                doc = getattr(_dsv4c.Bundle, op).__doc__
                m = re.match(r"%s\((.*)\)" % op, doc)
                self.assertTrue(m, doc)
                params = [p.strip() for p in m.group(1).split(",")]
                names = [p.split("=")[0] for p in params]
                tensors = TABLE[op]["tensors"]
                order = [names.index(name) for name, _, _, _ in tensors]
                self.assertEqual(order, sorted(order), "%s takes its tensors in the table's order" % op)
                for name, _, _, optional in tensors:
                    if optional:
                        self.assertIn(name + "=None", params)
                wrapper = inspect.signature(getattr(dsv4c.Bundle, op)).parameters
                for name, _, _, _ in tensors:
                    self.assertIn(name, wrapper, "dsv4c.Bundle.%s takes %s" % (op, name))


if __name__ == "__main__":
    argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")]
    unittest.main(argv=argv)
