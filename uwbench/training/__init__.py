"""Training: run configuration, the train/eval/test loop, timings."""
