"""--wandb: rank 0's Weights & Biases run, beside progress.csv and TensorBoard (the `.[wandb]` extra).

What it logs, every key against the agent steps (`timesteps`, the W&B x axis of every chart):
- each iteration's row (metrics.Recorder): every numeric column as progress/<column>, TensorBoard's names, so
  columns that other parts of ppo1 add to the row (evaluation) reach W&B without code here; and the games
  finished in the iteration as episodes/return and episodes/length, their mean (TensorBoard keeps one point
  per game; one W&B log call per game costs about a millisecond, dozens per iteration on short games);
- the run's config.json as the W&B run config;
- the training videos (--video_interval) and the --snapshot_interval screens, from the files ppo1 wrote.

Where it goes: WANDB_MODE when set (wandb reads it); else online when this machine has W&B credentials
(WANDB_API_KEY, or the netrc entry `wandb login` writes), else offline. An online start that fails (no
network, a bad key) warns and goes offline. The run's files live in <run_dir>/wandb/ (offline runs in
offline-run-<time>-<id>/), which `wandb sync <run_dir>/wandb` uploads later.

A resumed run continues the same W&B run: its id is kept in the checkpoint (TrainState.wandb_id) and the run
is resumed with resume="allow". Nothing W&B does stops training: an error at the start or in a log call is
one warning line, and the run goes on without W&B. `finish` ends the W&B run and its background processes
(wandb-core), also after a stop signal (the loop ends and checkpoints first, then Trainer.finish runs).
"""
from __future__ import annotations

import json
import math
import netrc
import numbers
import os
import secrets
import string
from typing import Callable, Iterable
from urllib.parse import urlparse

from ppo1.errors import PPO1Error, error_line
from ppo1.config import Config

INSTALL = "pip install -e '.[wandb]'"
INIT_TIMEOUT = 30.0    # seconds wandb.init may take (an online start waits on the server), then offline instead
FINISH_TIMEOUT = 60.0  # seconds an online run's end waits for its upload; what is left stays for `wandb sync`


def require() -> None:
    """Raise PPO1Error, one line naming the extra, unless the wandb package imports (a --wandb run's rank 0,
    before training starts)."""
    try:
        import wandb  # noqa: F401
    except Exception as e:  # ImportError, or a broken install failing in its own imports
        why = error_line(e, 200)
        raise PPO1Error(f"--wandb needs the wandb package, which does not import here ({why}): {INSTALL}, or train without it: --no-wandb") from None


def has_credentials(environ=os.environ) -> bool:
    """Whether W&B would find an API key: WANDB_API_KEY, an identity token file, or a netrc entry (`wandb login`)
    for the W&B host (WANDB_BASE_URL, else api.wandb.ai)."""
    if environ.get("WANDB_API_KEY") or environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    host = urlparse(environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname
    try:
        return netrc.netrc(environ.get("NETRC") or None).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):  # no netrc (FileNotFoundError), or one W&B would not read either
        return False


def start_mode(environ=os.environ) -> str | None:
    """wandb.init's mode: None where WANDB_MODE is set (wandb reads it itself), else online with credentials
    and offline without (an online run without a key would fail or ask for one)."""
    if environ.get("WANDB_MODE"):
        return None
    return "online" if has_credentials(environ) else "offline"


def new_run_id() -> str:
    """A new W&B run id: 8 random lower-case letters and digits, as W&B's own."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and math.isfinite(value)


class WandbLog:
    """Rank 0's W&B run: a sink of the Recorder's rows (`write`, as ProgressLog's), plus `video` and `image`.
    `start` returns None when W&B cannot start (warned); after a failed log call every method does nothing."""

    def __init__(self, run, warn: Callable[[str], None]):
        self.run, self.warn = run, warn

    @property
    def run_id(self) -> str | None:
        return None if self.run is None else self.run.id

    @classmethod
    def start(cls, config: Config, run_id: str | None, warn: Callable[[str], None] = print) -> "WandbLog | None":
        """Start (or, with the `run_id` of a checkpoint, resume) the W&B run of `config` in <run_dir>/wandb/.
        Returns None, after one warning line, when it cannot start."""
        env = os.environ
        tags = [t.strip() for t in config.wandb_tags.split(",") if t.strip()]
        kwargs = dict(
            dir=config.run_dir, id=run_id or new_run_id(), resume="allow",
            project=config.wandb_project or env.get("WANDB_PROJECT") or "ppo1",
            name=config.wandb_name or env.get("WANDB_NAME") or config.model_name,
            entity=config.wandb_entity or None, group=config.wandb_group or None, tags=tags or None)
        mode = start_mode()
        try:
            import wandb
            # console off: ppo1's console (its progress bar, signal-safe writes) stays as it is and no thread
            # copies it; silent: W&B's banners and warnings stay off the console, ppo1 says what matters in a line
            settings = wandb.Settings(init_timeout=INIT_TIMEOUT, finish_timeout=FINISH_TIMEOUT, console="off",
                                      silent=True)
            run = wandb.init(mode=mode, settings=settings, **kwargs)
        except Exception as e:
            if mode != "online":
                return cls._failed(f"W&B not started ({error_line(e)})", warn)
            cls._teardown()  # whatever the failed start left running
            warn(f"ppo1: warning: W&B did not start online ({error_line(e)}); logging offline instead")
            try:
                run = wandb.init(mode="offline", settings=settings, **kwargs)
            except Exception as e:
                return cls._failed(f"W&B not started offline either ({error_line(e)})", warn)
        log = cls(run, warn)
        try:
            run.define_metric("timesteps")  # the agent steps: the x axis of every key
            run.define_metric("*", step_metric="timesteps")
            run.config.update(json.loads(config.to_json()), allow_val_change=True)  # config.json; a resume may change it
            where = (f"offline in {run.settings.sync_dir} (`wandb sync {os.path.join(config.run_dir, 'wandb')}` "
                     "uploads it)" if run.settings.mode == "offline" else f"at {run.url}")
        except Exception as e:
            log._fail(e)
            return None
        warn(f"ppo1: W&B run {run.id} {'resumed' if run_id else 'started'} {where}")
        return log

    @staticmethod
    def _teardown() -> None:
        """End wandb's background processes (wandb-core), whatever state a failure left them in."""
        try:
            import wandb
            wandb.teardown()
        except Exception:
            pass

    @classmethod
    def _failed(cls, what: str, warn: Callable[[str], None]) -> None:
        cls._teardown()
        warn(f"ppo1: warning: {what}; training continues without W&B")
        return None

    def _fail(self, e: BaseException) -> None:
        """A W&B call failed: one warning, then the run is ended as failed and W&B left alone for the rest."""
        run, self.run = self.run, None
        self.warn(f"ppo1: warning: W&B logging failed ({error_line(e)}); training continues without W&B")
        try:
            run.finish(exit_code=1)
        except Exception:
            pass
        self._teardown()

    def _log(self, data: dict) -> None:
        if self.run is None:
            return
        try:
            self.run.log(data)
        except Exception as e:
            self._fail(e)

    def write(self, row: dict, episodes: Iterable[tuple[float, int]] = ()) -> None:
        """Log one iteration's row (its numeric, finite columns) and the mean of the games finished in it."""
        if self.run is None:
            return
        data = {f"progress/{k}": v for k, v in row.items() if k != "timesteps" and _number(v)}
        games = list(episodes)
        if games:
            data["episodes/return"] = float(sum(r for r, _ in games) / len(games))
            data["episodes/length"] = float(sum(n for _, n in games) / len(games))
        data["timesteps"] = int(row["timesteps"])
        self._log(data)

    def video(self, path: str, timesteps: int) -> None:
        """A training video (an MP4 ppo1 wrote), copied into the W&B run as wandb.Video."""
        if self.run is None:
            return
        import wandb
        try:
            media = wandb.Video(path, caption=os.path.basename(path), format="mp4")
        except Exception as e:
            self._fail(e)
            return
        self._log({"videos/game": media, "timesteps": int(timesteps)})

    def image(self, path: str, timesteps: int, key: str = "snapshot/envs") -> None:
        """An image file ppo1 wrote (the --snapshot_interval grid), copied into the W&B run as wandb.Image now
        (the file is replaced by the next snapshot)."""
        if self.run is None:
            return
        import wandb
        try:
            media = wandb.Image(path)
        except Exception as e:
            self._fail(e)
            return
        self._log({key: media, "timesteps": int(timesteps)})

    def finish(self, exit_code: int = 0) -> None:
        """End the W&B run (a non-zero `exit_code` marks it failed) and wandb's background processes."""
        run, self.run = self.run, None
        if run is not None:
            try:
                run.finish(exit_code=exit_code)
            except Exception as e:
                self.warn(f"ppo1: warning: W&B run not finished cleanly ({error_line(e)}); its files stay in "
                          f"{os.path.dirname(run.settings.sync_dir)}")
        self._teardown()
