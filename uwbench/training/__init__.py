"""Training: a run's settings (``config``) and whether its tensors fit (``sizes``), the execution path it takes
(``compile_policy``), the train/eval/test loop (``loop``) with its timings (``timing``), what it records in
MLflow (``record``) and its mid-run checkpoints (``checkpoint``); a population of runs trained as one
(``population``); the replay of a recorded run around a fall in its curve (``trace``)."""
