# Two commands on a fresh machine: `make train` and `make test`. Each creates .venv when missing.
# PYTHON picks the interpreter (3.11 to 3.13): Procgen (--env_name procgen:<game>) needs 3.13, e.g.
# `make procgen PYTHON=python3.13 VENV=.venv313` (torch from PyPI there: its CUDA build, several GB).
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
MPIRUN := $(VENV)/bin/mpirun
NP     ?= 2
ENV    ?= PongNoFrameskip-v4
ARGS   ?=

.PHONY: venv procgen train test bench clean
venv: $(VENV)/.installed

procgen: venv
	$(PY) -m pip install --quiet -e '.[test,procgen]'

# torch==2.13.0 first: the CPU build lies on disk here; a looser request pulls a multi-GB CUDA build.
$(VENV)/.installed: setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $@

train: venv
	$(MPIRUN) -np $(NP) $(PY) -m run_atari --env_name $(ENV) --envs_per_rank 4 $(ARGS)

test: venv
	$(PY) -m pytest -q tests

bench: venv
	$(PY) -m bench.throughput $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
