"""Bounds on the flags that could hurt the machine (issue 12): a value out of bounds is refused in one line
before any work. The table in this process through the CLI's own parser and build_config (a started CLI's line
on every rank for each stage: test_cli's test_bad_input_ends_all_ranks_...); one run for the batch's memory check
at set-up."""
import pytest

from conftest import one_line_error, run_cli

BOUNDS = {
    "negative count": (["--stop_after_iterations", "-1"], "--stop_after_iterations: '-1' is invalid: must be a whole "
                                                          "number >= 0 (0 = off)"),
    "envs_per_rank": (["--envs_per_rank", "100000"], "--envs_per_rank=100000 is invalid: must be at most 256"),
    "video_max_frames": (["--video_max_frames", "1e9"], "--video_max_frames=1000000000 is invalid"),
    "episodes": (["--mode", "play", "--episodes", "1e9"], "--episodes=1000000000 is invalid: must be a whole "
                                                          "number >= 1 and <= 10000"),
    "max_frames": (["--mode", "movie", "--max_frames", "1e9"], "--max_frames=1000000000 is invalid"),
}


def refusal(argv: list[str], capsys) -> str:
    """The line the CLI refuses `argv` with before any work (its parser's, or the PPO1Error of the Config and
    the mode's flags, as every rank meets it), in this process."""
    from ppo1 import PPO1Error
    from ppo1.cli import _apply_mode_flags, build_config, build_parser
    try:
        args = build_parser().parse_args(argv)
        build_config(args)
        _apply_mode_flags(args)
    except SystemExit as e:  # the parser's error: its line is printed, exit status 2
        assert e.code == 2
        return capsys.readouterr().err
    except PPO1Error as e:
        return f"ppo1: error: {e}\n"
    raise AssertionError(f"{argv} was not refused")


@pytest.mark.parametrize("case", sorted(BOUNDS))
def test_out_of_bounds_values_are_refused_in_one_line(tmp_path, capsys, case):
    args, expected = BOUNDS[case]
    line = refusal([*args, "--checkpoint_dir", str(tmp_path)], capsys)
    assert line.startswith("ppo1: error: ") and line.count("\n") == 1 and expected in line, line


def test_a_batch_that_would_not_fit_in_memory_is_refused_in_one_line(tmp_path):
    r = run_cli(["--timesteps_per_actorbatch", "1e8", "--env_steps", "1e9", "--envs_per_rank", "1",
                 "--checkpoint_dir", str(tmp_path)])
    one_line_error(r, "one iteration's batch needs")

