"""A run's config.json that cannot be used (issue 12): one line naming the file, never a traceback nor advice about
a flag. The table in this process, through the CLI's own build_config; started CLIs show the line and exit
status 2."""
import pytest

from conftest import FAST, one_line_error, run_cli

BAD_CONFIGS = {
    "not UTF-8": (b"\xff\xfe{\x00", "is not UTF-8 text"),
    "not JSON": (b"{gamma: 0.9", "is not valid JSON"),
    "nested too deeply": (b"[" * 100_000, "is not valid JSON"),
    "a list": (b"[1, 2]", "does not hold a JSON object"),
    "a string for a bool": (b'{"deterministic": "yes"}', "setting 'deterministic' is 'yes', must be of type bool"),
    "a string for a float": (b'{"gamma": "high"}', "setting 'gamma' is 'high', must be of type float"),
    "a bool for an int": (b'{"seed": true}', "setting 'seed' is True, must be of type int"),
    "out of range": (b'{"gamma": 7}', "setting gamma=7.0 is invalid: must be in (0, 1]"),
    "an unknown key": (b'{"bogus": 1}', "unknown settings ['bogus']"),
}


def refusal(argv: list[str]) -> str:
    """The PPO1Error the CLI meets for `argv` before any work (its flags parsed, the Config built on the run's
    config.json as build_config does for every rank), in this process."""
    from ppo1 import PPO1Error
    from ppo1.cli import build_config, build_parser
    with pytest.raises(PPO1Error) as e:
        build_config(build_parser().parse_args(argv))
    return str(e.value)


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_bad_config_json_is_refused_naming_the_file(tmp_path, case):
    content, expected = BAD_CONFIGS[case]
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "config.json").write_bytes(content)
    line = refusal([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r"])
    assert str(tmp_path / "r" / "config.json") in line and expected in line, line
    assert "--gamma" not in line and "--deterministic" not in line and "\n" not in line


def test_a_config_json_that_is_a_directory_is_one_line(tmp_path):
    # (the config stage's line on every rank under mpirun: test_cli's test_bad_input_ends_all_ranks_...)
    (tmp_path / "r" / "config.json").mkdir(parents=True)
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r"])
    one_line_error(r, f"cannot read {tmp_path / 'r' / 'config.json'}: it is a directory (EISDIR)")


def test_a_bad_config_json_is_one_line_from_the_cli(tmp_path):
    # the table's line as a started process prints it: one line on stderr, exit status 2
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "config.json").write_bytes(BAD_CONFIGS["nested too deeply"][0])
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r"])
    one_line_error(r, str(tmp_path / "r" / "config.json"), "is not valid JSON")
