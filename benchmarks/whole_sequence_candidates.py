"""The whole-sequence candidates side by side, interleaved in one process (benchmarks/README.md,
"Whole sequences per call"): regular DNC, copy T = 50, batch 64, H = 100, D = 4, W = 64, 1 thread.

    PYTHONPATH=. python benchmarks/whole_sequence_candidates.py eager step native chunk2 chunk4 > OUT.json

``eager``: the plain model; ``step``: ``compile_steps()`` (one graph per kind of step); ``native``: the
C++ whole-sequence path (``use_native``, the kept one: the default of ``uwbench train`` on CPU);
``chunkK``: K steps per compiled call with the write schedule baked in (a prototype for the regular and
uniform writers only: no CUW cache across chunks, no traces). Prints the timings as JSON.
"""
import json
import os
import sys
import types

import torch
torch.set_num_threads(1)  # one thread before uwbench's modules are imported: the imports below stay after it
from uwbench.models.base import build_model  # noqa: E402
from uwbench.models import mann as mm  # noqa: E402
from uwbench.bench import workloads as wl  # noqa: E402
from uwbench.bench.timing import interleave  # noqa: E402

task = wl.make_task("copy", 50)
batch = wl.make_batch(task, 64)
opts = dict(fullgraph=True, dynamic=False, options={"size_asserts": False, "alignment_asserts": False, "scalar_asserts": False})

def chunk(self, gxs, w_read, cstate, mstate, r, gr, writes, reads):
    hs, rs = [], []
    for k in range(len(gxs)):
        st = mstate if writes[k] else None
        cstate, mstate, r, gr = mm._carry(self._step(gxs[k], w_read, cstate, st, r, gr, writes[k], reads[k], None), mstate, r, gr)
        hs.append(cstate[0])
        rs.append(r)
    return cstate, mstate, r, gr, hs, rs

def chunked_forward(model, K):
    cchunk = torch.compile(types.MethodType(chunk, model), **opts)
    def run_steps(gxs, w_read, carried, writes, reads):
        cstate, mstate, r, gr = carried
        hs, rs = [], []
        for s in range(0, len(gxs), K):
            cstate, mstate, r, gr, h_, r_ = cchunk(tuple(gxs[s:s+K]), w_read, cstate, mstate, r, gr, tuple(writes[s:s+K]), tuple(reads[s:s+K]))
            hs += h_
            rs += r_
        return (cstate, mstate, r, gr), hs, rs
    def fwd(inputs, dec, lengths=None):
        ctrl, mem = model.controller, model.memory
        b = inputs.shape[0]
        sch = [bool(x) for x in model.writer.schedule(inputs.shape[1])]
        with ctrl.sequence():
            carried = (ctrl.initial_state(b, None), mem.initial_state(b, None), mem.initial_read(b, None), None)
            w_read = ctrl.weight_ih[model.input_size:]
            carried, _, _ = run_steps(ctrl.project(inputs, 0, model.input_size).unbind(1), w_read, carried, sch, sch)
            gx_dec = ctrl.project(dec, 0, model.input_size).unbind(1)
            carried, hs, rs = run_steps(gx_dec, w_read, carried, [True]*len(gx_dec), [True]*len(gx_dec))
        return torch.clamp(torch.stack(hs, 1) @ model.w_y + torch.stack(rs, 1) @ model.w_r, -20, 20)
    return fwd

cands = {}
for name in sys.argv[1:]:
    torch.manual_seed(0)
    model = build_model("dnc", task.input_size, task.output_size, {}, task=task)
    if name == "step":
        model.compile_steps()
        fwd = model
    elif name == "native":
        model.use_native(True)
        fwd = model
    elif name.startswith("chunk"):
        fwd = chunked_forward(model, int(name[5:]))
    else:
        fwd = model
    cands[name] = wl.iteration(model, (lambda f: lambda: task.loss(f(batch.inputs, batch.decoder_inputs), batch))(fwd))
load0 = os.getloadavg()
t = interleave(cands, repeats=7, warmup=2)
out = {n: x.as_dict() for n, x in t.items()}
print(json.dumps({"load_start": load0, "load_end": os.getloadavg(), "timings": out}, indent=1))
