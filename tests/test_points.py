"""bench.points: every point of real Pong games played by a tiny trained run, and a point replayed."""
import re
import subprocess
import sys

from bench.points import main, points_of, repeats, summarize, summarize_games
from conftest import REPO


def test_points_are_signed_with_the_steps_since_the_previous_point():
    assert points_of([(90, 1.0), (185, 1.0), (310, -1.0), (359, 1.0)]) == [(1, 90), (1, 95), (-1, 125), (1, 49)]
    assert points_of([]) == []


def test_a_rally_repeated_three_times_is_reported_most_frequent_first():
    pts = [(1, 90), (-1, 125), (1, 49), (-1, 125), (1, 49), (-1, 125), (1, 49), (-1, 125), (1, 95)]
    assert repeats(pts) == [((-1, 125), 4), ((1, 49), 3)]
    assert repeats(pts, min_count=5) == []


def test_the_tries_of_a_replayed_point_are_summed_up_by_result_and_length():
    assert summarize([(-1, 125)] * 3 + [(1, 49)]) == "4 tries: 1 won, 3 lost (result and steps: -125: 3, +49: 1)"


def test_the_games_summary_counts_first_points_won_and_points_lost_after_the_first():
    lost_first = [(-1, 59), (1, 48)] + [(1, 78)] * 20                # 21-1: +20
    won_all = [(1, 93)] + [(1, 78)] * 20                              # 21-0: +21
    two_late = [(-1, 56), (1, 48), (-1, 125), (1, 44)] + [(1, 79)] * 19  # 21-2: +19
    assert summarize_games([lost_first, won_all, two_late], [20.0, 21.0, 19.0]) == (
        "3 games: mean score 20.00; first point won in 1 of 3; points lost after the first: 1 (0.3 per game)")


def test_each_game_lists_points_that_add_up_to_its_score(pong_run):
    ck, name = pong_run
    lines: list[str] = []
    import bench.points as points
    trained, env, gen = points.open_run(str(ck), name)
    (game,) = points.play_points(trained, env, gen, 1, out=lines.append)
    m = re.match(r"game 1: score (-?\d+), (\d+) agent steps, (\d+) points won, (\d+) lost: ", lines[0])
    assert m, lines[0]
    score, length, won, lost = (int(x) for x in m.groups())
    assert won - lost == score and max(won, lost) == 21 and len(game) == won + lost
    assert sum(n for _, n in game) <= length
    assert lines[0].split(": ", 2)[2].split() == [("+" if s > 0 else "-") + str(n) for s, n in game]
    assert lines[-1] == summarize_games([game], [score])


def test_ram_bytes_are_listed_at_the_start_of_each_point_of_a_game(pong_run):
    ck, name = pong_run
    import bench.points as points
    trained, env, gen = points.open_run(str(ck), name)
    lines: list[str] = []
    games = points.play_points(trained, env, gen, 2, out=lines.append, ram=[51, 49])
    ram_lines = [line for line in lines if line.startswith("  RAM 51,49 at each point's start: ")]
    assert len(ram_lines) == 2
    for game, line in zip(games, ram_lines):
        values = line.split(": ", 1)[1].split()
        assert len(values) == len(game)             # one per point, the next game's start not among them
        assert all(re.fullmatch(r"\d{1,3}/\d{1,3}", v) and max(map(int, v.split("/"))) < 256 for v in values)


def test_a_point_from_a_saved_state_counts_its_scripted_steps_and_no_reward_it_is_told_to_skip(pong_run):
    ck, name = pong_run
    import bench.points as points
    trained, env, gen = points.open_run(str(ck), name)
    states, results = points.point_states(trained, env, gen, 1, 2)
    assert len(states) == 2 and len(results) == 1 and results[0] in (1, -1)

    def noop(_obs):
        return 0

    sign, steps = points.play_point(env, states[0], noop)
    assert sign == -1 and steps > 20                                   # a paddle that never moves loses the opening
    asked = []
    assert points.play_point(env, states[0], lambda obs: asked.append(obs) or 0, script=[0] * 5) == (sign, steps)
    assert len(asked) == steps - 5                                     # the script first, then the policy

    def agent_scores_3(e):
        e.ale.setRAM(14, 3)                                           # the agent's score on the screen

    assert points.play_point(env, states[0], noop, setup=agent_scores_3) == (1, 1)  # rewarded on the next step
    assert points.play_point(env, states[0], noop, setup=agent_scores_3, uncounted_steps=1) == (sign, steps)


def test_a_replayed_point_prints_each_try_and_greedy_replays_are_identical(pong_run, capsys):
    ck, name = pong_run
    args = ["--checkpoint_dir", str(ck), "--model_name", name, "--replay", "1:2", "--tries", "3"]
    assert main(args) == 0
    first = capsys.readouterr().out.splitlines()
    assert [re.sub(r"(won|lost) after \d+", "X", line) for line in first[:3]] == [
        "try 0 (greedy): X steps", "try 1 (sampled): X steps", "try 2 (sampled): X steps"]
    assert first[3].startswith("3 tries: ") and len(first) == 4
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines() == first  # the saved state and the seeds make it exact
    assert main([*args, "--random"]) == 0
    assert capsys.readouterr().out.count("(random actions)") == 3


def test_a_bad_replay_point_or_a_missing_run_is_one_line(pong_run, tmp_path):
    ck, name = pong_run
    for flags, words in ((["--model_name", name, "--checkpoint_dir", str(ck), "--replay", "x"], "give GAME:POINT"),
                         (["--model_name", name, "--checkpoint_dir", str(ck), "--replay", "1:99"],
                          "game 1 had only"),
                         (["--model_name", name, "--checkpoint_dir", str(ck), "--ram", "51,200"], "addresses 0-127"),
                         (["--model_name", name, "--checkpoint_dir", str(ck), "--ram", "51", "--replay", "1:0"],
                          "leave out --replay"),
                         (["--model_name", "missing", "--checkpoint_dir", str(tmp_path)], "no run directory")):
        r = subprocess.run([sys.executable, "-m", "bench.points", *flags], cwd=REPO, capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        assert words in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
