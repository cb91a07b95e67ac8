# Two commands for a newcomer on a fresh machine (both idempotent: a second run reuses the venv, the llama.cpp
# wheel built for its flags and the assembled model):
#   make demo   set everything up and tune the bundled demo (tuner optimize --target faithfulness)
#   make test   set up what the tests need, lint, and run them (.ci/run calls it in a fresh venv)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU torch before the extras, or pip pulls the multi-GB CUDA build; elsewhere:
#   make demo TORCH="torch --index-url https://download.pytorch.org/whl/cpu"
TORCH ?= torch==2.13.0
MODEL ?= qwen2.5-1.5b
# the 0.5B for every real-model test; the 1.5B beside it where a study searches the generator (tests/test_model_knobs.py)
TEST_MODELS ?= qwen2.5-0.5b qwen2.5-1.5b
# portable x86-64-v3 llama.cpp, not -march=native: a cached wheel never dies with "Illegal instruction" elsewhere
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# pip's own wheel cache is keyed by the sdist alone, not by CMAKE_ARGS: a wheel once built natively (AVX-512) would
# be reused here and change greedy outputs. So the wheel is built once per set of flags into a folder of its own.
LLAMA_CPP := $(shell sed -n 's/.*"\(llama-cpp-python\)\[server\]\(==[0-9.]*\)".*/\1\2/p' pyproject.toml)
LLAMA_WHEELS := $(HOME)/.cache/tuner/wheels/$(shell echo "$(LLAMA_CPP) $(CMAKE_ARGS)" | sha1sum | cut -c1-12)

.PHONY: demo test test-openvino install

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	ls $(LLAMA_WHEELS)/*.whl >/dev/null 2>&1 || \
	  $(BIN)/python -m pip wheel -q --no-deps --no-cache-dir $(LLAMA_CPP) -w $(LLAMA_WHEELS)
	$(BIN)/python -m pip install -q --find-links $(LLAMA_WHEELS) -e ".[embed,llm,dev]"
	touch $@

demo: install
	$(BIN)/tuner models install $(MODEL)
	$(BIN)/tuner optimize --target faithfulness --trials 40

# one pytest worker per usable core, each pinned to its own (tests/conftest.py): on 2 cores the suite took 42 min
# against 61 min in one process (one llama.cpp thread prompt-evaluates about as fast as two on these cores)
TEST_WORKERS ?= $(shell nproc)
# pytest's exit 5 (no test collected) is a failure too; then the embedder tests again beside the openvino extra,
# in a venv of its own (its pins would move the main one's transformers)
test: install
	for model in $(TEST_MODELS); do $(BIN)/tuner models install $$model || exit 1; done
	$(BIN)/ruff check tuner tests bench
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=25; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status
	$(MAKE) test-openvino

OV := $(VENV)-openvino/bin
test-openvino:
	test -x $(OV)/python || $(PYTHON) -m venv $(VENV)-openvino
	$(OV)/python -m pip install -q $(TORCH)
	# torch named again: optimum-intel asks for torchvision, whose newest release would swap in a CUDA torch (5 GB)
	$(OV)/python -m pip install -q -e ".[openvino]" "pytest>=8" $(TORCH)
	# a PyPI torchvision is built for PyPI's CUDA torch: beside a CPU torch it breaks `import transformers`
	$(OV)/python -c "import torchvision" 2>/dev/null || $(OV)/python -m pip uninstall -q -y torchvision
	$(OV)/python -m pytest -q tests/test_embedders.py -p no:cacheprovider
