import subprocess
import sys

import pytest

from uwbench.cli import main


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "uwbench", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_help_lists_commands_without_importing_torch():
    code = ("import sys; from uwbench.cli import build_parser; build_parser().format_help(); "
            "print('torch' in sys.modules, 'mlflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
    help_text = run_cli("--help").stdout
    for command in ("train", "ls", "demo"):
        assert command in help_text


def test_output_piped_into_a_reader_that_left_ends_quietly():
    """`uwbench ... | head`: when the reader of standard output has gone, the command stops with the shell's
    SIGPIPE status and no error message (it is not a file-permission problem)."""
    proc = subprocess.Popen([sys.executable, "-m", "uwbench", "ls"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader leaves before the first line is written
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141
    assert err == ""


def test_ls_lists_tasks_models_controllers(capsys):
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    for name in ("copy", "reverse", "double", "add", "max", "lstm", "ln_lstm", "gru", "rnn"):
        assert name in out


def test_unknown_task_is_a_clear_error(capsys):
    assert main(["train", "--task", "cpy", "--model", "lstm"]) == 2
    err = capsys.readouterr().err
    assert "unknown task 'cpy'" in err and "Did you mean 'copy'" in err


def test_bad_set_key_is_a_clear_error(capsys):
    assert main(["train", "--task", "copy", "--model", "lstm", "--set", "model.hiden_size=3"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'hiden_size'" in err and "Did you mean 'hidden_size'" in err


def test_memory_flag_on_a_model_without_memory_is_refused(capsys):
    assert main(["train", "--task", "copy", "--model", "lstm", "--memory-size", "4"]) == 2
    assert "unknown key 'memory_size'" in capsys.readouterr().err


def _ls_raising(monkeypatch, exc):
    import uwbench.commands.ls as ls

    def run(args):
        raise exc

    monkeypatch.setattr(ls, "run", run)


def test_a_user_error_is_one_line_with_exit_code_2(monkeypatch, capsys):
    from uwbench.errors import UserError

    class PluginSettingError(UserError):
        pass

    _ls_raising(monkeypatch, PluginSettingError("`every >= 1` must hold, got 0"))
    assert main(["ls"]) == 2
    err = capsys.readouterr().err
    assert err == "uwbench ls: error: `every >= 1` must hold, got 0\n"


def test_any_other_exception_shows_as_a_bug_and_debug_gives_its_traceback(monkeypatch, capsys):
    """A plain ValueError (or any exception that is not a UserError) is not the user's to fix: it says it is a
    bug, exit code 1 (not the user error's 2), no traceback; --debug raises it, traceback and all."""
    _ls_raising(monkeypatch, ValueError("an internal check failed\nwith detail"))
    assert main(["ls"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("uwbench ls: error: ValueError: an internal check failed (a bug in uwbench or a plugin")
    assert "--debug" in err and "Traceback" not in err and "with detail" not in err and err.count("\n") == 1
    with pytest.raises(ValueError, match="an internal check failed"):
        main(["ls", "--debug"])


def test_the_project_error_types_are_user_errors():
    from uwbench.config import ConfigError
    from uwbench.errors import DataNotFoundError, NotFoundError, UserError
    from uwbench.registry import UnknownNameError
    from uwbench.snapshot.check import SnapshotError
    from uwbench.spec.errors import SpecError
    from uwbench.sweeps.common import SweepError
    from uwbench.training.checkpoint import CheckpointError

    for cls in (ConfigError, UnknownNameError, SpecError, SweepError, SnapshotError, CheckpointError, NotFoundError,
                DataNotFoundError):
        assert issubclass(cls, UserError), cls
    assert issubclass(UnknownNameError, KeyError) and issubclass(NotFoundError, FileNotFoundError)
    assert issubclass(UserError, ValueError)  # callers that caught a ValueError for a bad input still do


def test_train_records_a_finished_run(tracking_uri, capsys):
    import mlflow

    code = main(["train", "--task", "copy", "--model", "lstm", "--seq-len", "4", "--steps", "20",
                 "--eval-every", "10", "--hidden-size", "16", "--tracking-uri", tracking_uri,
                 "--experiment", "cli", "--no-progress", "--set", "task.test_size=64"])
    assert code == 0
    out = capsys.readouterr().out
    assert "test accuracy:" in out and "MLflow run id:" in out
    mlflow.set_tracking_uri(tracking_uri)
    df = mlflow.search_runs(experiment_names=["cli"])
    assert len(df) == 1 and df.iloc[0]["status"] == "FINISHED"
    assert df.iloc[0]["tags.model"] == "lstm" and df.iloc[0]["tags.task"] == "copy"
    assert df.iloc[0]["tags.git_sha"]
