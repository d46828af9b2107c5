"""Where one compiled DNC iteration spends its CPU time: matrix products, Inductor's fused kernels, and
the framework around them (Dynamo, AOTAutograd, the compiled graphs' Python wrappers, autograd).

    PYTHONPATH=. python benchmarks/profile_step.py [--writer regular] [--iterations 3] [--cpp-wrapper]

Copy T = 50, batch 64, H = 100, D = 4, W = 64, one thread, forward + loss + backward, the step compiled
as `uwbench train` compiles it. Inductor's kernel profiling is switched on so that each fused kernel
shows up by name. Prints torch.profiler's table and the three totals per iteration, and the
multiply-adds of the products against `torch.nn.LSTM(125)`'s (the floor that no per-step work can go
below). Profiling adds its own cost; the shares are what matter, not the absolute times.
"""
from __future__ import annotations

import argparse
import sys

import torch


def product_macs(hidden: int, inputs: int, interface: int, outputs: int, read: int) -> int:
    """Multiply-adds of one step's matrix products per batch row, forward + backward (3x forward): the
    controller's gates (external input, read vector R*W and H into 4H; the external part is made once
    for all steps, which batches it but does not shrink it), the interface (H -> |xi|) and the output
    (H + R*W -> V)."""
    return 3 * ((inputs + read + hidden) * 4 * hidden + hidden * interface + (hidden + read) * outputs)


def lstm_macs(hidden: int, inputs: int, outputs: int) -> int:
    return 3 * ((hidden + inputs) * 4 * hidden + hidden * outputs)


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--writer", default="regular")
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--cpp-wrapper", action="store_true", help="compile with Inductor's C++ wrapper")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    from uwbench import env

    env.apply()
    import torch._inductor.config as inductor_config
    from torch.profiler import ProfilerActivity, profile

    from uwbench.bench.workloads import make_batch, make_task, uwbench_workload

    inductor_config.cpp.enable_kernel_profile = True
    task = make_task("copy", 50)
    batch = make_batch(task, 64)
    values = {"hidden_size": 100, "memory_size": 4, "word_size": 64, "read_heads": 1, "writer": args.writer}
    w = uwbench_workload("dnc", task, batch, values)
    w.model.compile_steps(options={"cpp_wrapper": True} if args.cpp_wrapper else {})
    for _ in range(3):  # compile and warm up
        w.run()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.iterations):
            w.run()
    events = prof.key_averages()
    print(events.table(sort_by="self_cpu_time_total", row_limit=25))
    n = args.iterations
    total = sum(e.self_cpu_time_total for e in events) / n / 1e3
    products = sum(e.self_cpu_time_total for e in events if e.key in ("aten::mm", "aten::addmm", "aten::bmm")) / n / 1e3
    kernels = sum(e.self_cpu_time_total for e in events if "cpp_fused" in e.key) / n / 1e3
    print(f"per iteration (ms of CPU, under the profiler): total {total:.1f}, matrix products {products:.1f}, "
          f"fused kernels {kernels:.1f}, the rest (framework, copies, loss) {total - products - kernels:.1f}")
    iface = w.model.w_xi.shape[1]
    dnc = product_macs(100, task.input_size, iface, task.output_size, 64)
    lstm = lstm_macs(125, task.input_size, task.output_size)
    print(f"multiply-adds per step and batch row, forward + backward: DNC {dnc:,} (interface {iface}), "
          f"nn.LSTM(125) {lstm:,}: {dnc / lstm:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
