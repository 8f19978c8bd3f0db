# Two commands on a fresh machine: `make train` and `make test`. Each creates .venv when missing.
# PYTHON picks the interpreter (3.11 to 3.13): Procgen (--env_name procgen:<game>) needs 3.13, e.g.
# `make procgen PYTHON=python3.13 VENV=.venv313` (torch from PyPI there: its CUDA build, several GB).
# Without PYTHON, python3.11, else python3; a PYTHON you give that cannot make the venv stops make.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
MPIRUN := $(VENV)/bin/mpirun
NP     ?= 2
ENV    ?= PongNoFrameskip-v4
PRESET ?= fast
# The run's name: pong-fast for the defaults, breakout-fast for ENV=BreakoutNoFrameskip-v4, pong-v5-fast for ALE/Pong-v5.
RUN    ?= $(shell echo '$(ENV)' | sed -e 's|^ALE/||' -e 's/NoFrameskip-v4$$//' | tr 'A-Z' 'a-z')-$(PRESET)
ARGS   ?=

.PHONY: venv procgen train play movie test bench clean
venv: $(VENV)/.installed

procgen: venv
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 13))' || { echo "make: Procgen needs Python 3.13 or newer; $(VENV) has $$($(PY) -V): make procgen PYTHON=python3.13 VENV=.venv313" >&2; exit 1; }
	@$(GET_UV)
	$(INSTALL) -e '.[test,procgen]'

# uv installs the packages into the venv (the venv's pip installs uv): on 2 cores it sets the venv up in about
# half pip's time, compiling the bytecode on both cores (without it, where PYTHONDONTWRITEBYTECODE is set, each
# of the suite's processes would compile torch anew). uv is given pip's PIP_FIND_LINKS (FIND_LINKS=DIR for
# another folder of wheels). torch==2.13.0 first: the CPU build lies on disk here; a looser request pulls a
# multi-GB CUDA build. The extras of every family the suite trains (ViZDoom, stable-retro, the GBA example;
# the GBA emulator also needs Debian's libmgba0.10, which .ci/run installs: without it its tests skip), and
# wandb for --wandb's tests (offline: no W&B account or network needed).
FIND_LINKS ?= $(PIP_FIND_LINKS)
GET_UV      = test -x $(VENV)/bin/uv || $(PY) -m pip install --quiet uv
INSTALL     = $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) $(foreach d,$(FIND_LINKS),--find-links $(d))
$(VENV)/.installed: setup.py Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { test '$(origin PYTHON)' = file && python3 -m venv $(VENV); } \
	  || { echo 'make: PYTHON=$(PYTHON) cannot make $(VENV) (with pyenv, give the full path: PYTHON=$$(pyenv root)/versions/<version>/bin/python3.13)' >&2; exit 1; }
	$(GET_UV)
	$(INSTALL) torch==2.13.0
	$(INSTALL) -e '.[test,vizdoom,retro,gba,wandb]'
	@touch $@

# `make train`: Pong with --preset fast on 2 ranks x 4 envs (fast's 8 actors on Pong); ends by itself (about 15
# minutes on 2 cores: README.md). Another PRESET runs 4 envs per rank (8 actors, the paper's).
ENVS   := $(if $(filter fast,$(PRESET)),,--envs_per_rank 4)
train: venv
	$(PY) -m run_atari --np $(NP) --preset $(PRESET) --env_name $(ENV) $(ENVS) --model_name $(RUN) $(ARGS)

# 10 whole games with the newest checkpoint of `make train`'s run, split over the ranks.
play: venv
	$(PY) -m run_atari --np $(NP) --mode play --model_name $(RUN) --episodes 10 $(ARGS)

# One game as MP4 and a GIF of its first 80 seconds (greedy actions), in the run's directory checkpoints/$(RUN)/.
movie: venv
	$(PY) -m run_atari --mode movie --model_name $(RUN) --greedy --gif --max_frames 4800 $(ARGS)

# The suite in 2 workers (the tests wait on processes: mpirun, signals, checkpoints, as much as they compute).
# worksteal: each worker starts on its half of the tests in file order and takes half of the other's queue when
# its own runs dry, so both stay busy to the end whatever a file's length; a file split between them builds its
# module fixtures on each (they are per worker, in its own temp directory).
test: venv
	$(PY) -m pytest -q -n 2 --dist worksteal tests

bench: venv
	$(PY) -m bench.throughput $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
