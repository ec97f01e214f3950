"""A directory that is not a run but holds runs (a reproduction's, a sweep's) gets a message naming
them, from every command that takes a run directory."""

import json

import pytest

from socialsim.cli import main
from socialsim.dashboards import server
from socialsim.model.run_dir import not_a_run_dir, runs_below


def _runs(root, *relative):
    for rel in relative:
        (root / rel).mkdir(parents=True)
        (root / rel / "config.json").write_text(json.dumps({"config": {}}))
    return [root / rel for rel in relative]


def test_the_runs_of_a_reproduction_and_of_a_sweep_are_found_and_named(tmp_path):
    repro = _runs(tmp_path / "repro", "full/seed-1", "base/seed-1", "base/seed-2", "ltrha/seed-1")
    (tmp_path / "repro" / "summary.csv").write_text("")
    assert runs_below(tmp_path / "repro") == sorted(repro)
    message = not_a_run_dir(tmp_path / "repro")
    assert message.startswith(f"{tmp_path / 'repro'} is not a run directory (no config.json); it holds 4 runs (")
    assert f"{repro[1]}, {repro[2]}, {repro[0]} and 1 more): give one of them" in message
    sweep = _runs(tmp_path / "sweep", "runs/abc123")
    assert not_a_run_dir(tmp_path / "sweep").endswith(f"it holds 1 run ({sweep[0]}): give one of them")
    three = _runs(tmp_path / "three", "a/seed-1", "a/seed-2", "b/seed-1")  # all named, no "and 0 more"
    assert not_a_run_dir(tmp_path / "three").endswith(f"3 runs ({three[0]}, {three[1]}, {three[2]}): give one of them")
    three_down = _runs(tmp_path / "sweeps", "hobbs/runs/abc")
    assert runs_below(tmp_path / "sweeps") == three_down
    _runs(tmp_path / "deep", "a/b/c/d")  # four levels down: not searched
    assert not_a_run_dir(tmp_path / "deep") == f"{tmp_path / 'deep'} is not a run directory (no config.json)"
    assert runs_below(tmp_path / "nowhere") == []


@pytest.mark.parametrize("argv", [["replay", "{dir}"], ["run", "--resume", "{dir}"]])
def test_replay_and_resume_name_the_runs_inside(argv, tmp_path, capsys):
    (run,) = _runs(tmp_path / "repro", "full/seed-1")
    assert main([a.format(dir=tmp_path / "repro") for a in argv] + ["--no-progress"]) == 2
    assert f"it holds 1 run ({run}): give one of them" in capsys.readouterr().err


def test_the_dashboard_names_the_runs_inside(tmp_path):
    from socialsim.dashboards.session import ReplaySession

    (run,) = _runs(tmp_path / "sweep", "runs/abc")
    with pytest.raises(ValueError, match="it holds 1 run .*: give one of them"):
        server.check_target(str(tmp_path / "sweep"))  # socialsim dashboard FOLDER
    with pytest.raises(FileNotFoundError, match=f"it holds 1 run \\({run}\\): give one of them"):
        ReplaySession(tmp_path / "sweep")  # the page's "Replay a run" card
