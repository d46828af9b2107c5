"""The paper's claims as data: which cells each compares, on which measure, and which side should win.

A claim is checked on every pair of cells it applies to (the same model, controller, task, T and D
unless ``same`` says otherwise); a claim with no such pair in a study is skipped
(``uwbench.report.verdicts.judge``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

TWIN_AXES = ("model", "controller", "task", "seq_len", "memory_size")  # what a writer comparison holds fixed
SERIES_AXES = ("model", "controller", "task", "seq_len")  # a series over D (the ablation's curves)
SINUSOID_TASKS = ("sinusoid", "sinusoid_noisy")
PIXEL_TASKS = ("pixel_mnist", "pixel_mnist_permuted", "digits", "digits_permuted")  # Table 3 and its stand-in


@dataclass(frozen=True)
class Side:
    """Which cells are one side of a claim: a model (None: any) and writers (empty: any)."""

    model: Optional[str] = None
    writers: Tuple[str, ...] = ()

    def holds(self, row) -> bool:
        return (self.model is None or row["model"] == self.model) and (not self.writers or row["writer"] in self.writers)


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    source: str  # where the paper makes it
    winner: Side
    loser: Side
    same: Tuple[str, ...] = TWIN_AXES  # axes equal within a compared pair
    tasks: Tuple[str, ...] = ()  # the tasks it is made for (empty: any)
    measure: str = "metric"  # metric: the study's test metric | time: seconds per 100 updates (lower wins)
    window: Optional[Tuple[float, float]] = None  # ratio window: the gain must peak inside it
    on_tasks: str = ""  # the text for a study that has only some of ``tasks``, with {tasks} for theirs

    def text_for(self, tasks: Sequence[str]) -> str:
        """The claim as a study tests it: a study with only some of the claim's tasks names just those
        (the quickstart's copy-only runs test UW against regular writing on copy, not on reverse)."""
        have = [t for t in self.tasks if t in set(tasks)]
        if not self.on_tasks or not have or len(have) == len(self.tasks):
            return self.text
        return self.on_tasks.format(tasks=" and ".join(have))


CLAIMS = (
    Claim("dnc-beats-lstm", "Regular DNC beats the LSTM", "Table 1",
          winner=Side("dnc", ("regular",)), loser=Side("lstm"), same=("task", "seq_len"), tasks=("copy", "reverse")),
    Claim("uw-beats-regular", "UW beats regular writing on copy and reverse", "Table 1",
          winner=Side(None, ("uniform",)), loser=Side(None, ("regular",)), tasks=("copy", "reverse"),
          on_tasks="UW beats regular writing on {tasks}"),
    Claim("cuw-beats-uw", "CUW beats UW on add and max", "Table 2",
          winner=Side(None, ("cached_uniform",)), loser=Side(None, ("uniform",)), tasks=("add", "max"),
          on_tasks="CUW beats UW on {tasks}"),
    Claim("uw-cuw-cut-time", "UW and CUW cut training time (CPU seconds per 100 updates) against regular writing",
          "Section 3.1, Fig. 2 (b, d)", winner=Side(None, ("uniform", "cached_uniform")),
          loser=Side(None, ("regular",)), measure="time"),
    Claim("uw-gain-peaks", "In the ablation, UW helps most at compression ratios of about 10-40%",
          "Section 3.1, Fig. 2 (a, c)", winner=Side(None, ("uniform",)), loser=Side(None, ("regular",)),
          tasks=("double",), window=(0.10, 0.40)),
    Claim("uw-beats-regular-ablation", "In the ablation, UW beats regular writing in every configuration",
          "Section 3.1, Fig. 2 (a, c)", winner=Side(None, ("uniform",)), loser=Side(None, ("regular",)),
          tasks=("double",)),
    Claim("uw-cuw-beat-regular-sinusoid", "On sinusoid regression UW and CUW beat regular writing",
          "Section 3.4, Fig. 3", winner=Side(None, ("uniform", "cached_uniform")), loser=Side(None, ("regular",)),
          tasks=SINUSOID_TASKS),
    Claim("uw-cuw-beat-lstm-sinusoid", "On sinusoid regression UW and CUW beat the LSTM", "Section 3.4, Fig. 3",
          winner=Side(None, ("uniform", "cached_uniform")), loser=Side("lstm"), same=("task", "seq_len"),
          tasks=SINUSOID_TASKS),
    Claim("cuw-beats-uw-noisy", "On noisy sinusoids CUW beats UW", "Section 3.4, Fig. 3 (b)",
          winner=Side(None, ("cached_uniform",)), loser=Side(None, ("uniform",)), tasks=("sinusoid_noisy",)),
    Claim("uw-cuw-beat-dnc-pixels", "On pixel sequences UW and CUW beat the regular DNC at every memory size it has",
          "Table 3", winner=Side("dnc", ("uniform", "cached_uniform")), loser=Side("dnc", ("regular",)),
          same=("model", "controller", "task", "seq_len"), tasks=PIXEL_TASKS),
)
