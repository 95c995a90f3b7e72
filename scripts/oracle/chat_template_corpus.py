#!/usr/bin/env python3
"""List the Jinja constructs the chat-template corpus uses.

Parses every template in the llama.cpp tree's models/templates/ (and any
extra .jinja files given) with jinja2 and prints, per kind, every node
type, filter, test, method (attribute called) and global function used,
with the number of templates using it.  The engine's Jinja subset
(engine/jinja/) covers this list.

usage: chat_template_corpus.py [TEMPLATE_DIR] [extra.jinja ...]
"""
import collections
import glob
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import loopcontrols

DEFAULT = os.path.expanduser(
    "~/.cache/pg_llm/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates")


class Generation(jinja2.ext.Extension):
    """The {% generation %} block HF transformers adds (parsed as a body)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def scan(src):
    env = jinja2.Environment(extensions=[loopcontrols, Generation])
    tree = env.parse(src)
    used = collections.defaultdict(set)
    for node in tree.find_all(nodes.Node):
        used["node"].add(type(node).__name__)
        if isinstance(node, nodes.Filter):
            used["filter"].add(node.name)
        elif isinstance(node, nodes.Test):
            used["test"].add(node.name)
        elif isinstance(node, nodes.Call):
            if isinstance(node.node, nodes.Getattr):
                used["method"].add(node.node.attr)
            elif isinstance(node.node, nodes.Name):
                used["function"].add(node.node.name)
        elif isinstance(node, nodes.BinExpr) or isinstance(node, nodes.UnaryExpr):
            used["operator"].add(node.operator)
        elif isinstance(node, nodes.Compare):
            for op in node.ops:
                used["operator"].add(op.op)
        elif isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name) \
                and node.node.name == "loop":
            used["loop"].add(node.attr)
    if "{%-" in src or "-%}" in src or "{{-" in src or "-}}" in src:
        used["whitespace"].add("-")
    if "{%+" in src or "+%}" in src:
        used["whitespace"].add("+")
    return used


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    files = sorted(glob.glob(os.path.join(d, "*.jinja"))) + sys.argv[2:]
    count = collections.defaultdict(collections.Counter)
    for f in files:
        with open(f, encoding="utf-8") as fp:
            src = fp.read()
        try:
            used = scan(src)
        except jinja2.TemplateSyntaxError as e:
            print(f"# {os.path.basename(f)}: does not parse: {e}")
            continue
        for kind, names in used.items():
            for n in names:
                count[kind][n] += 1
    print(f"# {len(files)} templates")
    for kind in sorted(count):
        print(f"{kind}:")
        for n, c in sorted(count[kind].items()):
            print(f"  {n} {c}")


if __name__ == "__main__":
    main()
