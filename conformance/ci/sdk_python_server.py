#!/usr/bin/env python3
"""A small RCP server written with the public Python SDK (PyPI package `rcp-protocol`, import
name `rcp`), for certifying a server of another SDK with the installed `rcp-conformance` wheel.

It is this project's own code, not the SDK's example: a term-overlap retriever over six
documents, with `retrieve` and `embed` (a hashed bag of words), served over stdio. Run it as
`python3 sdk_python_server.py` with the SDK importable.
"""
import hashlib
import math
import re

import rcp

DOCS = {
    "wing-1": "Lift on a swept wing at transonic speed and the shock it forms.",
    "wing-2": "Boundary layer transition on a flat plate in supersonic flow.",
    "heat-1": "Heat transfer to a blunt body re-entering the atmosphere.",
    "heat-2": "Ablation of a heat shield under convective heating.",
    "shell-1": "Buckling of thin cylindrical shells under axial compression.",
    "shell-2": "Vibration of a cantilever plate with a tip mass.",
}
DIM = 64
WORD = re.compile(r"[a-z0-9]+")


def terms(text):
    return WORD.findall(text.lower())


def embed(text):
    v = [0.0] * DIM
    for t in terms(text):
        v[int(hashlib.sha256(t.encode()).hexdigest(), 16) % DIM] += 1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


def query_text(query):
    if isinstance(query, dict):
        return str(query.get("text", ""))
    return str(query)


def build():
    s = rcp.Server()
    s.set_info("sdk-python-server", "0.1.0")
    s.advertise(rcp.Capability.Retrieve, {"maxK": 50})
    s.advertise(rcp.Capability.Embed, {"dimension": DIM, "modalities": ["text"]})

    @s.on(rcp.Method.RETRIEVE)
    def _retrieve(params):
        q = set(terms(query_text(params.get("query", ""))))
        k = int(params.get("k", 10))
        scored = []
        for doc_id, text in DOCS.items():
            overlap = len(q & set(terms(text)))
            if overlap:
                scored.append({"id": doc_id, "score": float(overlap), "text": text})
        scored.sort(key=lambda h: (-h["score"], h["id"]))
        return {"hits": scored[:k]}

    @s.on(rcp.Method.EMBED)
    def _embed(params):
        inputs = params.get("inputs", [])
        texts = [i.get("text", "") if isinstance(i, dict) else str(i) for i in inputs]
        return {"vectors": [embed(t) for t in texts], "dimension": DIM}

    return s


if __name__ == "__main__":
    build().serve_stdio()
