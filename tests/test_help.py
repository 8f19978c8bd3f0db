"""--help: flags in sections, the presets explained under --preset, docs/flags.md made from the same parser."""
import dataclasses

from conftest import run_cli
from ppo1 import flagsdoc
from ppo1.cli import GROUPS, _MODE_FLAGS, build_parser, command_name
from ppo1.config import Config
from ppo1.presets import PRESET_HELP, PRESETS


def test_every_flag_is_in_exactly_one_help_section():
    named = [name for names in GROUPS.values() for name in names]
    assert len(named) == len(set(named)), "a flag listed in two sections"
    flags = {a.dest for a in build_parser()._actions if a.dest != "help"}
    assert flags == set(named)
    assert {f.name for f in dataclasses.fields(Config)} | set(_MODE_FLAGS) <= flags


def test_help_prints_the_sections_and_each_preset_on_its_own_line():
    r = run_cli(["--help"])
    assert r.returncode == 0
    for title in GROUPS:
        assert f"\n{title}:\n" in r.stdout
    assert set(PRESET_HELP) == {*PRESETS, "mujoco", "ppo_lstm", "procgen"}
    for name in PRESET_HELP:
        assert any(line.strip().startswith(f"{name}: ") for line in r.stdout.splitlines()), name


def test_help_and_argparse_errors_name_the_command_that_ran():
    assert run_cli(["--help"]).stdout.startswith("usage: python -m run_atari [--np N]")
    r = run_cli(["--help"], module="ppo1")
    assert r.stdout.startswith("usage: python -m ppo1 [--np N]") and "python -m ppo1 --np 2 --preset fast" in " ".join(
        r.stdout.split())
    assert command_name("ppo1", "/venv/bin/ppo1") == "ppo1"
    assert build_parser("ppo1").format_usage().startswith("usage: ppo1 [--np N]")


def test_flags_md_is_up_to_date_with_the_parser():
    assert flagsdoc.main(["--check"]) == 0, "docs/flags.md is out of date: run python -m ppo1.flagsdoc"


def test_flags_md_lists_every_flag_with_its_help():
    text = flagsdoc.render()
    for action in build_parser()._actions:
        if action.dest != "help":
            assert f"`{action.option_strings[0]}`" in text


def test_each_help_fits_two_lines_and_flags_md_adds_the_details_it_leaves_out():
    # --help at 136 columns gives a help ~110 characters a line; under --preset each preset has a line of its own
    import textwrap
    for action in build_parser()._actions:
        if action.dest != "help":
            assert len(textwrap.wrap(action.help.split("\n")[0], 110)) <= 2, action.dest
    text = flagsdoc.render()
    for f in dataclasses.fields(Config):
        assert f.metadata.get("details", "").replace("|", "\\|") in text, f.name
