# The README's two commands: `make train` (the main job) and `make test` (lint + every test).
# Both set up .venv on a fresh machine first; set-up is skipped when pyproject.toml is unchanged.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= dev
# Without a GPU, pin torch to the CPU wheel before anything else can ask pip for torch:
# an unpinned torch pulls several GB of CUDA packages.
TORCH_CPU ?= torch==2.13.0

.PHONY: setup services clean-services train test test-fast lint check-extras bench gpu-check clean learning-study curriculum-study

setup: $(VENV)/.installed

# What `pip install -e '.[dev]'` gives (torch's CPU build first unless nvidia-smi is present),
# installed through uv, pip where uv fails (scripts/setup_venv.sh; INSTALLER=pip for pip alone).
$(VENV)/.installed: pyproject.toml
	PYTHON=$(PYTHON) VENV=$(VENV) EXTRAS=$(EXTRAS) TORCH_CPU="$(TORCH_CPU)" bash scripts/setup_venv.sh
	touch $@

train: setup
	$(BIN)/agentgym train --env agentgym/FrozenLake-v0

# On a machine with one GPU (setup installs CUDA torch where nvidia-smi exists): the GPU path's
# checks and figures in one JSON, about 9 minutes (scripts/gpu_check.py says what it runs).
gpu-check: setup
	$(BIN)/python scripts/gpu_check.py --out gpu_check.json

# The sandbox tests need bubblewrap and a Docker daemon with the project's image. As root on a
# Debian machine this installs and starts them (scripts/docker_setup.sh) and the tests then
# require them (fail, not skip); otherwise those tests skip and say why.
services: setup
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		PYTHON=$(BIN)/python bash scripts/docker_setup.sh && touch $(VENV)/.services; \
	else \
		echo "not root on Debian: sandbox tests that need docker or bubblewrap will skip"; \
	fi

# Undoes what `services` left behind: containers and images named agentgym/* (the sandbox image
# and the SWE tasks' images), then the dockerd that scripts/docker_setup.sh started, found by the
# exact command line the script gives it (a daemon started any other way is left alone).
clean-services:
	@if command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; then \
		for label in agentgym.owner agentgym.swe; do \
			ids=$$(docker ps -aq --filter label=$$label); \
			[ -z "$$ids" ] || docker rm -f $$ids >/dev/null; \
		done; \
		images=$$(docker images --format '{{.Repository}}:{{.Tag}}' | grep '^agentgym/' || true); \
		[ -z "$$images" ] || docker rmi -f $$images >/dev/null; \
		echo "removed $$(echo $$images | wc -w) agentgym/* images"; \
	fi
	@pid=$$(pgrep -x -f 'dockerd --iptables=false --bridge=none' || true); \
	if [ -n "$$pid" ]; then \
		kill $$pid; \
		for _ in $$(seq 60); do kill -0 $$pid 2>/dev/null || break; sleep 0.5; done; \
		echo "stopped dockerd (pid $$pid)"; \
	fi
	rm -f $(VENV)/.services

lint: setup
	$(BIN)/ruff check agentgym tests benchmarks scripts examples

# lint, services and every test; the FrozenLake learning test runs beside the lint, the service
# set-up and the rest of the suite, in runs that share the modules (scripts/run_tests.sh says how).
test: setup
	VENV=$(VENV) bash scripts/run_tests.sh

test-fast: setup
	$(BIN)/pytest -q -m "not slow"

# The learning study: DAPO, PPO and asynchronous GRPO over Ray beside the main job (GRPO), four
# FrozenLake runs side by side (an hour or more of 2 CPUs; CI runs the main job's alone), then the
# MiniWoB recipe's run.
learning-study: setup
	$(BIN)/pytest -q -m "study or slow" tests/recipes/test_frozenlake_learns.py
	$(BIN)/pytest -q -m study tests/envs/web/miniwob/test_miniwob_learns.py

# The curriculum acceptance study (four FrozenLake runs side by side, over an hour of 2 CPUs).
curriculum-study: setup
	$(BIN)/pytest -q -m study tests/recipes/test_curriculum_study.py

# Each extra installed alone in a fresh venv from a wheel of this tree, and a smoke run of what it
# is for (scripts/smoke_extra.py): what `pip install 'agentgymnasium[<extra>]'` gives a user.
check-extras:
	PYTHON=$(PYTHON) TORCH_CPU="$(TORCH_CPU)" scripts/check_extras.sh

bench: setup
	$(BIN)/python benchmarks/vector_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
