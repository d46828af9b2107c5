"""The heartbeat of a running trial (the optuna backend, ``sweeps/backends/optuna.py``): a thread that
beats every ``--heartbeat-interval`` seconds, through Optuna's own heartbeat for RDB storages or, for the
journal file, a timestamp in the trial's user attrs (``HEARTBEAT_ATTR``)."""
from __future__ import annotations

import threading
import time

HEARTBEAT_ATTR = "heartbeat"  # journal storage: the last beat (seconds since the epoch)


class Heartbeat:
    """Beats for one trial every ``interval`` seconds from a thread, until stopped; ``lost`` is set when
    the storage says the trial was ended by someone else."""

    def __init__(self, storage, trial_id: int, interval: int, journal: bool):
        self.storage, self.trial_id, self.interval, self.journal = storage, trial_id, interval, journal
        self.lost = threading.Event()
        self._stop = threading.Event()
        self.beat()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{trial_id}", daemon=True)
        self._thread.start()

    def beat(self) -> None:
        from optuna.exceptions import UpdateFinishedTrialError

        try:
            if self.journal:
                self.storage.set_trial_user_attr(self.trial_id, HEARTBEAT_ATTR, time.time())
            else:
                self.storage.record_heartbeat(self.trial_id)
        except UpdateFinishedTrialError:
            self.lost.set()
        except Exception:  # noqa: BLE001 - a transient storage error: the next beat tries again
            pass

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()
            if self.lost.is_set():
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)
