"""docs/flags.md, made from the parser that --help prints: every flag with its default and help, by section,
and the details of a Config field that --help leaves out (its metadata's `details`).

    python -m ppo1.flagsdoc            # rewrite docs/flags.md
    python -m ppo1.flagsdoc --check    # exit 1 when docs/flags.md is out of date (tests/test_docs.py)
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = os.path.join(REPO, "docs", "flags.md")


def _default(action: argparse.Action) -> str:
    """The default as --help states it (Config fields say it in their help; the others have their own)."""
    if action.default in (argparse.SUPPRESS, None) or isinstance(action, argparse._StoreTrueAction):
        return ""
    return f"`{action.default}`"


def render() -> str:
    """The markdown of docs/flags.md."""
    from ppo1.cli import build_parser
    from ppo1.config import Config

    parser = build_parser()
    details = {f.name: f.metadata.get("details", "") for f in dataclasses.fields(Config)}
    lines = ["# Flags", "",
             "Every flag of `python -m run_atari`, by the sections of `--help`, with its default and help. "
             "Made by `python -m ppo1.flagsdoc` from the parser itself (a test fails when this page is out "
             "of date). Config fields (all but `--mode`, `--np`, `--fresh`, `--stop_after_iterations` and "
             "the play / movie / plot flags) are saved in each run's config.json; a resumed run reads them "
             "from there. Details that `--help` leaves out follow a flag's help on a line of their own.", ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.option_strings and a.dest != "help"]
        if not actions:
            continue
        lines += [f"## {group.title}", "", "| flag | default | what it does |", "|---|---|---|"]
        for a in actions:
            flag = " / ".join(f"`{o}`" for o in a.option_strings)
            if a.choices:
                flag += " {" + ", ".join(str(c) for c in a.choices) + "}"
            text = "\n".join(t for t in (a.help, details.get(a.dest)) if t)
            text = text.replace("%%", "%").replace("\n", "<br>").replace("|", "\\|")
            lines.append(f"| {flag} | {_default(a)} | {text} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ppo1.flagsdoc", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if docs/flags.md differs from what would be written")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        current = open(PATH).read() if os.path.exists(PATH) else ""
        if current != text:
            print(f"{PATH} is out of date: run python -m ppo1.flagsdoc", file=sys.stderr)
            return 1
        return 0
    os.makedirs(os.path.dirname(PATH), exist_ok=True)
    with open(PATH, "w") as f:
        f.write(text)
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
