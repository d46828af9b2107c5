#!/bin/sh
# One call on a CUDA machine, at most about 13 minutes: the `gpu` tests, the population bench on the GPU, a
# 3-member population run of `uwbench train`, and Table 1's paper50 profile swept for 3 minutes with
# populations (its member-updates per second and the whole profile's hours at that rate). Everything it
# leaves is in $GPU_CHECK_OUT (default runs/gpu-check): gpu-tests.log, bench.log, the bench's JSON and
# figure, train.log, paper50-sweep.json and .log, nvidia-smi.txt.
# `make gpu-check` runs it; each part has its own time limit, so a hang in one still leaves the others.
set -u
OUT="${GPU_CHECK_OUT:-runs/gpu-check}"
PY="${PY:-.venv/bin/python}"
mkdir -p "$OUT"
export UWBENCH_RUNS_DIR="$OUT/runs" UWBENCH_SYSTEM_METRICS=0
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >> "$OUT/nvidia-smi.txt"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())" > "$OUT/torch.txt" 2>&1
timeout 150 "$PY" -m pytest -q -m gpu -p no:cacheprovider > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests exit $?" >> "$OUT/gpu-tests.log"
timeout 240 "$PY" -m uwbench bench --sections population --out "$OUT" --name population-gpu.json > "$OUT/bench.log" 2>&1
echo "bench exit $?" >> "$OUT/bench.log"
timeout 60 "$PY" -m uwbench train --task copy --model dnc --seq-len 50 --memory-size 4 --hidden-size 100 --steps 300 \
  --eval-every 100 --seed 0 1 2 --device cuda --no-progress --tracking-uri "sqlite:///$OUT/train.db" > "$OUT/train.log" 2>&1
echo "train exit $?" >> "$OUT/train.log"
timeout 330 "$PY" benchmarks/population_sweep.py --study studies/table1_memorization.yaml --profile paper50 \
  --workers 1 --settings auto --time-limit 180 --set train.device=cuda --out "$OUT/paper50-sweep.json" \
  > "$OUT/paper50-sweep.log" 2>&1
echo "paper50 sweep exit $?" >> "$OUT/paper50-sweep.log"
tail -n 3 "$OUT/gpu-tests.log" "$OUT/bench.log" "$OUT/train.log" "$OUT/paper50-sweep.log"
