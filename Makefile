# jupyter-collab-mcp — everything a fresh machine needs comes from here.
#   make run    local jupyter-server + sidecar + sample notebook, ready for a browser and an MCP client
#   make test   lint, unit tests (-race), then the integration suite against a real jupyter-server
#   make bench  benchmarks against the real server (numbers go in the README)

SHELL := /bin/bash
GO ?= go
PYTHON ?= python3
VENV := .venv
NODE := integration/node
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOTESTFLAGS ?=
FUZZTIME ?= 15s

.PHONY: all build deps venv node lint unit integration test bench fuzz run clean

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

node: $(NODE)/node_modules/.installed
$(NODE)/node_modules/.installed: $(NODE)/package.json $(NODE)/package-lock.json
	npm ci --prefix $(NODE) --no-audit --no-fund --loglevel=error
	touch $@

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

integration: deps
	$(GO) test -race -count=1 -tags integration -timeout 30m $(GOTESTFLAGS) ./integration/...

test: lint unit integration

# Short fuzz runs of every decoder (go test -fuzz takes one target at a time).
fuzz:
	@for f in $$($(GO) test -list '^Fuzz' ./ydoc/ | grep '^Fuzz'); do \
	  echo "== $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./ydoc/ || exit 1; done

bench: deps
	$(GO) test -tags integration -run '^$$' -bench . -benchtime 1x -count 1 -timeout 30m ./integration/...

run: deps build
	$(GO) build -o bin/devrun ./integration/cmd/devrun
	./bin/devrun

clean:
	rm -rf bin $(NODE)/node_modules
