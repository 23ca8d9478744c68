#!/usr/bin/env python
"""Looking at a computation in pytato's idiom: the dot source of the DAG
(written to ``graph.dot`` and, with graphviz, ``graph.svg`` in the current
directory), ``show_dot_graph``, the placeholder data-flow drawing and the
text drawing; then the program is run and checked against NumPy. Exits
non-zero when a drawing misses what it must show or a result is wrong."""

import logging
import shutil
import subprocess
import sys

import numpy as np

import pyopencl as cl

import pytato_like as pt


logger = logging.getLogger(__name__)

GRAPH_DOT = "graph.dot"
GRAPH_SVG = "graph.svg"


def main():
    n = pt.make_size_param("n")
    array = pt.make_placeholder(name="array", shape=n, dtype=np.float64)
    stack = pt.stack([array, 2*array, array + 6])
    result = stack @ stack.T

    problems = []

    # {{{ dot source, to a file and (with graphviz) to SVG

    dot_code = pt.get_dot_graph(result)
    with open(GRAPH_DOT, "w") as outf:
        outf.write(dot_code)
    logger.info("wrote '%s'", GRAPH_DOT)
    for must_show in ("Placeholder", "array", "SizeParam", "Stack", "Einsum"):
        if must_show not in dot_code:
            problems.append(f"dot source does not mention {must_show!r}")

    dot_path = shutil.which("dot")
    if dot_path is not None:
        subprocess.run([dot_path, "-Tsvg", GRAPH_DOT, "-o", GRAPH_SVG],
                       check=True)
        logger.info("wrote '%s'", GRAPH_SVG)
        # pytato's one-call forms (they write an SVG file on a headless box)
        pt.show_dot_graph(result, output_to="svg")
        pt.show_fancy_placeholder_data_flow(result, output_to="svg")
    else:
        logger.info("'dot' executable not found; cannot convert to SVG")

    # }}}

    # {{{ text drawing

    ascii_graph = pt.get_ascii_graph(result, use_color=False)
    print(ascii_graph)
    if "array" not in ascii_graph or "Einsum" not in ascii_graph:
        problems.append("the text drawing misses the placeholder or the einsum")

    # }}}

    # {{{ and the numbers

    ctx = cl.create_some_context()
    queue = cl.CommandQueue(ctx)
    array_in = np.linspace(-1, 1, 7)
    prg = pt.generate_loopy(result)
    evt, (out,) = prg(queue, array=array_in)
    ref_stack = np.stack([array_in, 2*array_in, array_in + 6])
    if not np.allclose(out, ref_stack @ ref_stack.T):
        problems.append(f"result {out} differs from NumPy's "
                        f"{ref_stack @ ref_stack.T}")

    # }}}

    for problem in problems:
        print("PROBLEM:", problem)
    if problems:
        return 1
    print("visualization: drawings written, result matches NumPy")
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
